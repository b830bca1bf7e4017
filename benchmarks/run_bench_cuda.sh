#!/usr/bin/env bash
# On a CUDA GPU (issue 33): (1) the Triton path against the loop at the paper's sizes, values and
# gradients; (2) every model of the zoo against cuDNN (`atnbench bench --device cuda`), adding,
# copying and ptb-char, ATN k = 1, 5, 25, 45, 65; (3) the speed targets judged from (2). Writes
# benchmarks/results/<date>-cuda-<host>-{check,bench}.json and -targets.txt. Needs Triton
# (`pip install -e '.[gpu]'` after the CUDA build of torch). Extra arguments go to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
stamp="benchmarks/results/$(date +%Y-%m-%d)-cuda-$(hostname -s 2>/dev/null || hostname)"
python benchmarks/cuda_check.py equal --output "$stamp-check.json"
atnbench bench --device cuda --workload adding,copying,ptb-char \
    --models lstm-fused,ln,atn,atn-bn,bn,bln,bn-input,gru-fused,gru-ln,gru-atn,gru-atn-bn,gru-bn,gru-bln,gru-bn-input \
    --k 1,5,25,45,65 --reps 20 --warmup 5 \
    --output "$stamp-bench.json" "$@"
python benchmarks/cuda_check.py targets "$stamp-bench.json" | tee "$stamp-targets.txt"
echo "records in $stamp-*" >&2
