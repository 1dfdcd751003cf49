#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: verify the public corpus, run the
# benchmark (quick preset by default; `bash scripts/main.sh --preset full` for the
# protocol's full run) and write the report to results/report/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
DP=.venv/bin/dpstats
$DP corpus verify
$DP bench --results results/bench.sqlite "${@:---preset=quick}"
$DP report --results results/bench.sqlite --out results/report
echo "main: report written to results/report/index.html"
