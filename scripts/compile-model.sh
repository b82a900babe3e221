#!/usr/bin/env bash
# Compile the Kueue model with mypyc (sky_kueue/kueue/compiled.py says when the build is used).
# Optional: without mypyc, a C compiler or Python's headers the model runs as pure Python, the
# same answers more slowly; this prints one line saying so and exits 0. Up to date: no work.
# SKY_KUEUE_COMPILE=0 skips it; --clean removes the build; VENV_PYTHON names another interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${SKY_KUEUE_COMPILE:-1}" = "0" ]; then
  exit 0
fi
status=0
"${VENV_PYTHON:-.venv/bin/python}" scripts/compile_model.py "$@" || status=$?
if [ "$status" -eq 3 ]; then
  exit 0  # cannot compile here: the reason is printed, the pure model is used
fi
if [ "$status" -ne 0 ]; then
  echo "note: compiling the Kueue model failed (above); it runs as pure Python" >&2
fi
exit 0
