#!/usr/bin/env bash
# Issue 33, item 4: every batch-normalized model's training step against nn.LSTM / nn.GRU on this
# CPU, one thread, adding and copying. On an idle machine: the bench itself (wall-clock ms);
# with --busy: thread CPU time (benchmarks/cpu_step_ratio.py), a check that tolerates other work.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--busy" ]; then
    for w in adding copying; do
        python benchmarks/cpu_step_ratio.py --workload "$w" --models bln,bn,atn-bn,bn-input,gru-bln,gru-bn,gru-atn-bn --reps 20
    done
    exit 0
fi
mkdir -p benchmarks/results
out="benchmarks/results/$(date +%Y-%m-%d-%H%M%S)-$(hostname -s 2>/dev/null || hostname)-cpu-batch-norms.json"
atnbench bench --workload adding,copying \
    --models lstm-fused,ln,bn,bln,atn-bn,bn-input,gru-fused,gru-bn,gru-bln,gru-atn-bn,gru-bn-input \
    --k 5,45 --reps 10 --warmup 3 --threads 1 --output "$out" "$@"
echo "JSON records written to $out" >&2
