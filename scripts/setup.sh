#!/usr/bin/env bash
# Create .venv (if missing) and install dpgym with its pinned dependencies; a no-op when up to date.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.dpgym-installed
want=$(cat pyproject.toml constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip 2>&1 | grep -v '^WARNING: Location' || true
  # torch==2.13.0 is pinned: an unpinned torch would pull a multi-GB CUDA build.
  .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[test]' 2>&1 | grep -v '^WARNING: Location' || true
  .venv/bin/python -c "import harness, torch, opacus, xgboost" # fail loudly if the install did not take
  echo "$want" > "$stamp"
fi
