#!/usr/bin/env bash
# Static checks, run by scripts/test.sh before the tests (so by CI, .ci/run) and by the
# pre-commit hooks (.pre-commit-config.yaml):
#   lint-imports  the layer contracts of pyproject.toml [tool.importlinter]
#                 (cli > api | audit > bench > algorithms > synth > ols > data > privacy > errors | params)
#   ruff check    pyproject.toml [tool.ruff]: F, E9, import sorting (I), bugbear (B), pyupgrade (UP),
#                 simplify (SIM) on dpstats/; F and E9 only on tests, benchmarks, docs
#   mypy          pyproject.toml [tool.mypy]: strict on privacy/, algorithms/, synth/, bench/, audit/ and the public facts
# Uses the tools of .venv (the `lint` extra, part of `dev`); needs no network.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${DPSTATS_VENV:-.venv}/bin"
status=0
echo "lint: lint-imports" && "$BIN/lint-imports" --no-cache || status=1
echo "lint: ruff check" && "$BIN/ruff" check --no-cache dpstats tests benchmarks docs scripts || status=1
echo "lint: mypy" && "$BIN/mypy" || status=1
exit $status
