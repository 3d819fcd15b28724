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
  echo "setting up .venv (pinned by constraints.txt; log in .venv/setup.log)"
  # torch==2.13.0 is pinned: an unpinned torch would pull a multi-GB CUDA build.
  if ! { .venv/bin/python -m pip install --upgrade pip &&
         .venv/bin/python -m pip install -c constraints.txt -e '.[test]'; } > .venv/setup.log 2>&1; then
    grep -v '^WARNING: Location' .venv/setup.log | tail -40
    echo "set-up failed (full log: .venv/setup.log)" >&2
    exit 1
  fi
  .venv/bin/python -c "import dpgym, torch, opacus, xgboost"  # fail loudly if the install did not take
  echo "$want" > "$stamp"
fi
