# Sourced by the one-call checks (gpu_check.sh, host_check.sh) from the repository root, with
# NAME set to the check's name: installs tpcore from the wheel in .whl/ (made beforehand with
# `pip wheel --no-deps -w .whl .`) into $SITE (default /tmp/tpcore-site) so that every python,
# subprocesses too, imports the wheel; makes $OUT (default /tmp/NAME); points
# $TPCORE_AUTHORS_CODE at .anchors unless it is set.
OUT=${OUT:-/tmp/$NAME}
SITE=${SITE:-/tmp/tpcore-site}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TPCORE_AUTHORS_CODE=${TPCORE_AUTHORS_CODE:-$PWD/.anchors}
python3 -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/tpcore-*.whl \
    || { echo "$NAME: no wheel in .whl/ (pip wheel --no-deps -w .whl .)"; exit 2; }
export PYTHONPATH=$SITE PYTHONSAFEPATH=1
