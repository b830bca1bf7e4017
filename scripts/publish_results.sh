#!/usr/bin/env bash
# Publish the evidence in results/: the finished runs of a store as JSON Lines (and its studies,
# the plans and looks of `sweep --until-decided`, as studies.json), then the report
# and the verdicts written from a fresh store that imported that file (so anyone can rebuild
# them from results/runs.jsonl alone).
#
#   scripts/publish_results.sh STORE [REPORT_ARGS...]
#
# Runs already in results/runs.jsonl stay (import is idempotent; a conflict stops the script),
# unless a run of this code now supersedes them (below).
set -euo pipefail
store=${1:?usage: scripts/publish_results.sh STORE}
cd "$(dirname "$0")/.."
# The report records its command: its store is named in the checkout (results/README.md says how
# to build it) for the script's length only, not a temporary folder's path nobody has. Checked
# before anything is written.
published=published.db
for leftover in "$published" "$published-wal" "$published-shm"; do  # a store's log files too
  if [ -e "$leftover" ] || [ -L "$leftover" ]; then
    echo "publish_results.sh: $leftover exists here; move it away first" >&2; exit 2
  fi
done
mkdir -p results
fresh=$(mktemp -d)/published.db
trap 'rm -rf "$(dirname "$fresh")"' EXIT

studies=()
if [ -f results/studies.json ]; then studies=(--studies results/studies.json); fi
if [ -f results/runs.jsonl ]; then atnbench store import results/runs.jsonl --store "$fresh" "${studies[@]}"; fi
for status in done diverged; do  # each export's studies in a file of its own: one never replaces another's
  atnbench store export "$(dirname "$fresh")/$status.jsonl" --store "$store" --status "$status" \
    --studies "$(dirname "$fresh")/$status-studies.json"
  atnbench store import "$(dirname "$fresh")/$status.jsonl" --store "$fresh" \
    --studies "$(dirname "$fresh")/$status-studies.json"
done
# Stale runs (older code) whose experiment now has a current run are left out: the published
# set is current where it can be; the rest stay, and the reports mark them stale.
# Written beside, then moved in: an export never replaces a file holding runs it would lose, and
# leaving the superseded runs out is the point here (every run of the old file is in $fresh).
atnbench store export "$(dirname "$fresh")/published.jsonl" --store "$fresh" --drop-superseded \
  --studies "$(dirname "$fresh")/published-studies.json"
mv "$(dirname "$fresh")/published.jsonl" results/runs.jsonl
mv "$(dirname "$fresh")/published-studies.json" results/studies.json
trap 'rm -rf "$(dirname "$fresh")" "$published" "$published-wal" "$published-shm"' EXIT
atnbench store import results/runs.jsonl --store "$published" --studies results/studies.json

atnbench reproduce --report-only --store "$published" --out-dir results/report
atnbench report --store "$published" --paper --verdicts --format markdown --output results/verdicts.md
# the tables README.md and results/README.md quote, between <!-- generated:... --> markers
python -m atnbench.report.prose --store "$published" README.md results/README.md
echo "results/: runs.jsonl ($(wc -l < results/runs.jsonl) runs), report/, verdicts.md"
