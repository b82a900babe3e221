#!/usr/bin/env bash
# Create (or refresh) the project's virtual environment in .venv and install sky-kueue
# with its test tools into it. Safe to run repeatedly: it reinstalls only when
# pyproject.toml changed since the last successful install.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.sky-kueue-installed
want="$(sha256sum pyproject.toml | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -e '.[test]'
  echo "$want" > "$stamp"
fi
# The Kueue model compiled with mypyc, when this machine can (about a minute after a change to
# the model's sources, nothing otherwise); without it the model runs as pure Python.
bash scripts/compile-model.sh
