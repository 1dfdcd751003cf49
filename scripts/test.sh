#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite: Python tests (incl. the
# comparisons with R's sandwich through rpy2), the R package's testthat suite and
# R CMD check, the docs build with warnings as errors and the doc examples; before them
# the static checks of scripts/lint.sh (import-linter, ruff, mypy).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export RETICULATE_PYTHON="$PWD/.venv/bin/python"
bash scripts/lint.sh    # layer contracts, ruff, mypy (strict on privacy/): fails before the tests run
exec .venv/bin/python -m pytest "$@"
