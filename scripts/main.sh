#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: verify the public corpus, run the
# benchmark (quick preset by default; `bash scripts/main.sh --preset full` for the
# protocol's full run), run the coverage benchmark of the private intervals
# (`dpstats bench --inference`, quick preset: first instance per task and study,
# epsilon 1 and 10, 3 draws; a few minutes; set COVERAGE_ARGS to change it, e.g.
# COVERAGE_ARGS="--preset quick --epsilon 0.3 1 3 10") and write the report to results/report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DP=.venv/bin/dpstats
$DP corpus verify
$DP bench --results results/bench.sqlite "${@:---preset=quick}"
# shellcheck disable=SC2086
$DP bench --inference --results results/bench.sqlite ${COVERAGE_ARGS:---preset=quick}
$DP report --results results/bench.sqlite --out results/report
echo "main: report written to results/report/index.html"
