#!/usr/bin/env bash
# Every model of the zoo (LSTM and GRU, every norm, fast path) on adding + copying, ATN k = 1, 5,
# 25, 45, 65, one thread (as sweeps run). JSON records go to benchmarks/results/<date>-<time>-<host>.json (a second run the same day keeps the first's),
# the table to the terminal. ~5 min on a 2-core VM. Extra arguments are passed on, e.g.
# --threads 2 --reps 20, or --reference for the window-rebuilding ATN (atn-ref: seconds per step
# at k=65 on copying, ~5 GB of RAM).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
out="benchmarks/results/$(date +%Y-%m-%d-%H%M%S)-$(hostname -s 2>/dev/null || hostname).json"
atnbench bench \
    --workload adding,copying \
    --models lstm-fused,ln,atn,atn-bn,bn,bln,bn-input,gru-fused,gru-ln,gru-atn,gru-atn-bn,gru-bn,gru-bln,gru-bn-input \
    --k 1,5,25,45,65 \
    --reps 10 --warmup 3 --threads 1 \
    --output "$out" \
    "$@"
echo "JSON records written to $out" >&2
