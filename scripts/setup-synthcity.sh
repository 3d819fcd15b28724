#!/usr/bin/env bash
# Create .venv-synthcity, the separate environment the optional synthcity_* generators run in
# (plugins/generators/synthcity.py, harness/isolation.py). Never part of the default install:
# synthcity pins torch < 2.3 and numpy < 2, and pip fetches its whole stack (several GB, with a CUDA
# torch build on Linux). Idempotent. PYTHON picks the interpreter (synthcity supports 3.8 to 3.11);
# PIP_EXTRA passes extra pip options (e.g. an index with CPU-only torch wheels).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-synthcity
SYNTHCITY=synthcity==0.2.12
READY=$VENV/.dpgym-ready  # written last: dpgym runs no synthcity cell in a half-built environment
if [ ! -x "$VENV/bin/python" ]; then
  "$PYTHON" -m venv "$VENV"
fi
rm -f "$READY"
# shellcheck disable=SC2086  # PIP_EXTRA is a list of options
"$VENV/bin/python" -m pip install ${PIP_EXTRA:-} -c scripts/synthcity-constraints.txt "$SYNTHCITY"
"$VENV/bin/python" - <<'PY'
from synthcity.plugins import Plugins
for name in ("aim", "dpgan", "privbayes", "pategan", "adsgan"):
    Plugins().get(name)
PY
touch "$READY"
echo "$VENV is ready: dpgym runs the synthcity_* generators in it (dpgym list shows them available)"
