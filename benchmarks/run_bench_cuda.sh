#!/usr/bin/env bash
# On a CUDA GPU (issues 33, 42): (1) every model of the zoo against cuDNN (`atnbench bench --device
# cuda`), adding, copying and ptb-char, ATN k = 5 and 45; (2) the speed targets judged from (1);
# (3) the Triton path against the loop at the adding and copying sizes, values and gradients.
# The bench comes first and every step writes its record as it goes (the bench after each
# workload, the check after each case): a GPU lent for minutes, stopped by `timeout`, keeps what
# was measured (on an H200 the bench did one workload and part of the next in 190-250 s, the
# check 11 cases in 180 s). Writes benchmarks/results/<date>-cuda-<host>-{bench,check}.json and
# -targets.txt. Needs Triton (`pip install -e '.[gpu]'` after the CUDA build of torch). Extra
# arguments go to the bench.
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
stamp="benchmarks/results/$(date +%Y-%m-%d)-cuda-$(hostname -s 2>/dev/null || hostname)"
status=0
atnbench bench --device cuda --workload adding,copying,ptb-char \
    --models lstm-fused,ln,atn,atn-bn,bn,bln,bn-input,gru-fused,gru-ln,gru-atn,gru-atn-bn,gru-bn,gru-bln,gru-bn-input \
    --k 5,45 --reps 10 --warmup 3 \
    --output "$stamp-bench.json" "$@" || status=$?
if [ -f "$stamp-bench.json" ]; then
  python benchmarks/cuda_check.py targets "$stamp-bench.json" | tee "$stamp-targets.txt" || status=1
fi
python benchmarks/cuda_check.py equal --sizes adding,copying --output "$stamp-check.json" || status=1
echo "records in $stamp-*" >&2
exit "$status"
