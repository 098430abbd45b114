#!/usr/bin/env bash
# The CPU side-by-side check, one command on a machine with PyTorch, pytest-benchmark and no
# network (the host of a GPU machine, an Intel Xeon, where subnormal floats are slow): installs
# tpcore from the wheel in .whl/ (made beforehand with `pip wheel --no-deps -w .whl .`) into a
# scratch folder, runs the training benches that compare tpcore with its anchors step by step
# (bench/bench_training.py, bench/bench_transformer.py: late and early steps, subnormals flushed
# and kept, the authors' code at temperature 0.01, PyTorch) pinned to two cores of their own,
# writes the raw JSON under $OUT (default /tmp/host_check) and prints each bench's ratios.
#
#   bash bench/host_check.sh            # from the repository root
#
# CORES picks the two cores (default the last two), HOST_SECONDS bounds the run, HOST_SELECT
# is the -k expression. The authors' code is read from $TPCORE_AUTHORS_CODE (default .anchors,
# holding their src/ folder); without it those rows skip.
set -uo pipefail
cd "$(dirname "$0")/.."
NAME=host_check
source bench/wheel_env.sh
n=$(nproc)
CORES=${CORES:-$((n - 2)),$((n - 1))}
{ lscpu | grep -E "Model name|^Flags" | cut -c1-200
  echo "cores $CORES of $n; load $(cut -d' ' -f1-3 /proc/loadavg)"
  python3 -m tpcore info | grep -iE "cpu|subnormal"; } | tee "$OUT/host.txt"

start=$(date +%s)
taskset -c "$CORES" timeout "${HOST_SECONDS:-400}" python3 -m pytest bench/bench_training.py \
    bench/bench_transformer.py -k "${HOST_SELECT:-regimes or vs_authors or vs_torch}" \
    -p no:cacheprovider -q --benchmark-enable --benchmark-json="$OUT/host.json" 2>&1 | tail -n 3
echo "benches: exit ${PIPESTATUS[0]} in $(( $(date +%s) - start )) s; load after $(cut -d' ' -f1-3 /proc/loadavg)"
python3 -c "import json, sys
for b in json.load(open(sys.argv[1]))['benchmarks']:
    info = {k: v for k, v in b['extra_info'].items() if k.startswith('ratio') or k.endswith('_ms')}
    print(b['name'], info)" "$OUT/host.json"
