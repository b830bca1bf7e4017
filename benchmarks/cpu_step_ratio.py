"""A training step of each model against nn.LSTM's (nn.GRU's for the GRUs) in CPU time, on a busy machine.

``atnbench bench`` times wall-clock milliseconds, which other processes on a shared machine inflate.
This check times the CPU time of the timing thread itself (``time.thread_time``), interleaved
round-robin as the bench does, one thread: the ratios stay close to an idle machine's while other
work shares the cores (caches and memory bandwidth are still shared: take them as a check, and
``benchmarks/run_bench.sh`` on an idle machine as the measurement).

    python benchmarks/cpu_step_ratio.py                       # adding: bln, bn, atn-bn, gru-bln against the fused cells
    python benchmarks/cpu_step_ratio.py --workload copying --models bln,gru-bln --reps 30
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from atnbench.bench.timing import Candidate, train_step
from atnbench.bench.workloads import fused_of, build_model, get_workload, loss_fn


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="adding")
    parser.add_argument("--models", default="bln,bn,atn-bn,ln,gru-bln,gru-bn")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    workload = get_workload(args.workload)
    x, target = workload.make_batch(torch.device("cpu"))
    loss = loss_fn(workload)
    names = args.models.split(",")
    names = list(dict.fromkeys([fused_of(n) for n in names] + names))  # the fused baselines first
    candidates = []
    for name in names:
        k = args.k if "atn" in name else None
        model = build_model(name, workload, k, torch.device("cpu"))
        candidates.append(Candidate(name, k, model, torch.optim.RMSprop(model.parameters(), lr=1e-3), [], []))
    for r in range(args.warmup + args.reps):
        for c in candidates:
            start = time.thread_time()
            train_step(c, x, target, loss)
            if r >= args.warmup:
                c.train.append((time.thread_time() - start) * 1e3)
    median = {c.model_name: statistics.median(c.train) for c in candidates}
    rows = [{"workload": workload.name, "model": c.model_name, "k": c.k, "cpu_ms": round(median[c.model_name], 2),
             "ratio_fused": round(median[c.model_name] / median[fused_of(c.model_name)], 3)} for c in candidates]
    for row in rows:
        print(f"{row['model']:>14} {row['cpu_ms']:8.2f} ms  x{row['ratio_fused']:.3f} {fused_of(row['model'])}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
