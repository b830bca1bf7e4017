#!/usr/bin/env bash
# The full k-scaling table: adding + copying, ATN k = 1, 5, 25, 45, 65 (fast path and loop), with the
# window-rebuilding reference (atn-ref). JSON records go to benchmarks/results/<date>-<host>.json,
# the table to the terminal. Extra arguments are passed on, e.g. --threads 4 --reps 20.
# Takes a while (atn-ref at k=65 on copying is seconds per step) and needs ~5 GB of RAM.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
out="benchmarks/results/$(date +%Y-%m-%d)-$(hostname -s 2>/dev/null || hostname).json"
atnbench bench \
    --workload adding,copying \
    --models lstm-fused,lstm,ln,atn,ln-loop,atn-loop \
    --k 1,5,25,45,65 \
    --reference \
    --reps 10 --warmup 3 \
    --output "$out" \
    "$@"
echo "JSON records written to $out" >&2
