#!/usr/bin/env bash
# On a CUDA GPU (issues 33, 42): (1) every model of the zoo against cuDNN (`atnbench bench --device
# cuda`), adding, copying and ptb-char, ATN k = 5 and 45; (2) the speed targets judged from (1);
# (3) the Triton path against the loop in float64 on the CPU, adding then copying sizes, values and
# gradients;
# (4) where a training step's GPU time goes (torch.profiler, LN and ATN k=45). Each part has a time
# limit (seconds, from the environment) sized for a lease of 15 minutes of device time, and writes
# its record as it goes: a part stopped by its limit keeps what it measured. Measured 2026-11-26 on
# an H100 and an H200: the bench builds, compiles and times ~8 models of a workload in 90-100 s, the
# check does ~15 cases in 95 s, the profile 3 tile sizes x 2 norms in ~90 s; a machine's start
# costs ~30 s of the lease. Writes benchmarks/results/<date>-<time>-cuda-<host>-{bench,check}.json,
# -targets.txt and -profile.txt. Needs Triton (`pip install -e '.[gpu]'` after the CUDA build of
# torch). Extra arguments go to the bench.
#   BENCH_S=300 CHECK_S=150 PROFILE_S=60 benchmarks/run_bench_cuda.sh
set -uo pipefail
cd "$(dirname "$0")/.."
mkdir -p benchmarks/results
stamp="benchmarks/results/$(date +%Y-%m-%d-%H%M%S)-cuda-$(hostname -s 2>/dev/null || hostname)"
status=0
timeout "${BENCH_S:-300}" atnbench bench --device cuda --workload adding,copying,ptb-char \
    --models lstm-fused,ln,atn,atn-bn,bn,bln,bn-input,gru-fused,gru-ln,gru-atn,gru-atn-bn,gru-bn,gru-bln,gru-bn-input \
    --k 5,45 --reps 10 --warmup 3 \
    --output "$stamp-bench.json" "$@" || status=$?
if [ -f "$stamp-bench.json" ]; then
  python benchmarks/cuda_check.py targets "$stamp-bench.json" | tee "$stamp-targets.txt" || status=1
fi
timeout "${CHECK_S:-150}" python benchmarks/cuda_check.py equal --sizes adding,copying --output "$stamp-check.json" || status=1
timeout "${PROFILE_S:-60}" python benchmarks/cuda_check.py profile --norms ln,atn:45 > "$stamp-profile.txt" 2>&1 || status=1
echo "records in $stamp-*" >&2
exit "$status"
