#!/usr/bin/env bash
# The GPU check, one command on a machine with an NVIDIA GPU, CuPy, PyTorch, pytest-xdist and
# pytest-benchmark, and no network: installs tpcore from the wheel in .whl/ (made beforehand with
# `pip wheel --no-deps -w .whl .`) into a scratch folder, runs the test suite on CuPy in parallel,
# the GPU side-by-side benches (bench/bench_gpu.py), a profile of three training steps
# (bench/profile_steps.py) and a kernel-by-kernel profile of the largest transformer's step
# (bench/kernel_profile.py), writes their outputs under $OUT (default /tmp/gpu_check) and
# prints the table last.
#
#   bash bench/gpu_check.sh            # from the repository root
#
# SUITE_SECONDS, BENCH_SECONDS, PROFILE_SECONDS, KERNELS_SECONDS bound each part; WORKERS sets
# the suite's processes; BENCH_SELECT passes a -k expression to the benches. The authors' code
# for the Transformer Program rows is read from $TPCORE_AUTHORS_CODE (default .anchors, holding
# their src/ folder); without it those rows skip.
set -uo pipefail
cd "$(dirname "$0")/.."
NAME=gpu_check
source bench/wheel_env.sh
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  TPCORE_BACKEND=cupy python3 -m tpcore info | grep "cuda graphs"
  python3 -c "import cupy, numpy, torch; print('cupy', cupy.__version__, 'numpy',
numpy.__version__, 'torch', torch.__version__)"; } | tee "$OUT/gpu.txt"

start=$(date +%s)
TPCORE_BACKEND=cupy timeout "${SUITE_SECONDS:-300}" python3 -m pytest -n "${WORKERS:-12}" \
    -p no:cacheprovider -rfE tests > "$OUT/suite.log" 2>&1
echo "suite: exit $? in $(( $(date +%s) - start )) s; $(tail -n 1 "$OUT/suite.log")"
grep -E "^(FAILED|ERROR)" "$OUT/suite.log" | head -n 40

start=$(date +%s)
TPCORE_BACKEND=cupy timeout "${BENCH_SECONDS:-300}" python3 -m pytest bench/bench_gpu.py \
    ${BENCH_SELECT:+-k "$BENCH_SELECT"} -p no:cacheprovider -q --benchmark-enable \
    --benchmark-json="$OUT/bench_gpu.json" 2>&1 | tail -n 5
echo "benches: exit ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s"

TPCORE_BACKEND=cupy timeout "${PROFILE_SECONDS:-90}" python3 bench/profile_steps.py \
    > "$OUT/profile.txt" 2>&1
echo "profile: exit $?"
grep "^##" "$OUT/profile.txt"

TPCORE_BACKEND=cupy timeout "${KERNELS_SECONDS:-90}" python3 bench/kernel_profile.py \
    > "$OUT/kernels.md" 2>&1
echo "kernels: exit $? (the largest transformer's kernels, tpcore and PyTorch: kernels.md)"

python3 bench/report.py "$OUT/bench_gpu.json" --out "$OUT" && cat "$OUT/speed.md"
python3 -c "import json, sys
for b in json.load(open(sys.argv[1]))['benchmarks']:
    if 'main_job' in b['name']: print('main job:', b['extra_info'])" "$OUT/bench_gpu.json"
