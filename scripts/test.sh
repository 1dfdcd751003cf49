#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: Python tests (incl. the
# comparisons with R's sandwich through rpy2), the R package's testthat suite and
# R CMD check, the docs build with warnings as errors and the doc examples.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RETICULATE_PYTHON="$PWD/.venv/bin/python"
exec .venv/bin/python -m pytest "$@"
