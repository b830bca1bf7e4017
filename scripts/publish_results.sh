#!/usr/bin/env bash
# Publish the evidence in results/: the finished runs of a store as JSON Lines, then the report
# and the verdicts written from a fresh store that imported that file (so anyone can rebuild
# them from results/runs.jsonl alone).
#
#   scripts/publish_results.sh STORE [REPORT_ARGS...]
#
# Runs already in results/runs.jsonl stay (import is idempotent; a conflict stops the script).
set -euo pipefail
store=${1:?usage: scripts/publish_results.sh STORE}
cd "$(dirname "$0")/.."
mkdir -p results
fresh=$(mktemp -d)/published.db
trap 'rm -rf "$(dirname "$fresh")"' EXIT

if [ -f results/runs.jsonl ]; then atnbench store import results/runs.jsonl --store "$fresh"; fi
for status in done diverged; do
  atnbench store export "$(dirname "$fresh")/$status.jsonl" --store "$store" --status "$status"
  atnbench store import "$(dirname "$fresh")/$status.jsonl" --store "$fresh"
done
atnbench store export results/runs.jsonl --store "$fresh"

atnbench reproduce --report-only --store "$fresh" --out-dir results/report
atnbench report --store "$fresh" --paper --verdicts --format markdown --output results/verdicts.md
echo "results/: runs.jsonl ($(wc -l < results/runs.jsonl) runs), report/, verdicts.md"
