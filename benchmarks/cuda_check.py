"""On a CUDA GPU: the Triton path against the loop at the paper's sizes, and issue 33's targets.

    python benchmarks/cuda_check.py equal --output check.json    # values and gradients, every norm, LSTM and GRU
    python benchmarks/cuda_check.py equal --sizes adding          # one size only (the loop on a GPU is slow)
    python benchmarks/cuda_check.py targets bench.json           # the speed targets, from `atnbench bench --device cuda`

``equal``: each norm x cell at the adding and copying sizes (ptb-char's too with ``--ptb``) in
float32 (to 1e-4 of each tensor's scale, as a long float32 recurrence allows) and float64 (1e-9),
outputs, final states, every gradient and the running statistics; exit 1 if any is off.
``targets``: LN- and ATN-LSTM step <= 2x cuDNN's nn.LSTM, ATN <= 1.15x LN at every k, every
other norm <= 4x; the GRUs likewise against nn.GRU. Exit 1 if any target is missed.
``benchmarks/run_bench_cuda.sh`` runs both around the bench.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from atnbench.nn import NormGRU, NormLSTM
from atnbench.run.checkpoint import write_atomic

SIZES = {"adding": (50, 2, 60, 200), "copying": (128, 10, 68, 220), "ptb-char": (32, 50, 1000, 220)}
NORMS = [("ln", {}), ("atn", {"k": 5}), ("atn", {"k": 45}), ("bn", {}), ("bn-input", {}), ("bln", {}),
         ("atn-bn", {"k": 5})]
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}


def _run(model, x):
    x = x.clone().requires_grad_()
    out, state = model(x)
    state = [state] if isinstance(state, torch.Tensor) else [t for t in state if isinstance(t, torch.Tensor)]
    loss = (out ** 2).mean() + (out[-1] ** 2).mean() + sum((s ** 2).mean() for s in state)
    grads = torch.autograd.grad(loss, [x, *model.parameters()])
    return [out, *state, *grads, *(b for b in model.buffers() if b.is_floating_point())]


def equal(args) -> int:
    device = torch.device("cuda")
    sizes = [s for s in args.sizes.split(",") if s != "ptb-char" or args.ptb]
    rows, worst_ok = [], True
    for size in sizes:
        B, D, H, T = SIZES[size]
        for cell, cls in (("lstm", NormLSTM), ("gru", NormGRU)):
            for norm, opts in NORMS:
                for dtype in (torch.float32, torch.float64):
                    torch.manual_seed(0)
                    loop = cls(D, H, norm=norm, backend="loop", **opts).to(device, dtype)
                    fast = cls(D, H, norm=norm, backend="triton", **opts).to(device, dtype)
                    fast.load_state_dict(loop.state_dict())
                    x = torch.rand(T, B, D, generator=torch.Generator().manual_seed(1)).to(device, dtype)
                    a, b = _run(loop, x), _run(fast, x)
                    worst = max(((u - v).abs().max() / u.abs().max().clamp_min(1e-30)).item() for u, v in zip(a, b))
                    ok = worst <= TOLERANCE[dtype] and fast.last_paths == ("triton",)
                    worst_ok &= ok
                    rows.append({"size": size, "cell": cell, "norm": norm, **opts, "dtype": str(dtype),
                                 "worst_relative": worst, "ok": ok, "path": fast.last_paths[0]})
                    print(f"{size:>9} {cell} {norm:>8} {opts} {str(dtype):>13}: {worst:.2e} {'ok' if ok else 'OFF'}")
                    if args.output:  # after every case: a check stopped by its time limit keeps what it did
                        record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}
                        write_atomic(Path(args.output),
                                     lambda handle: handle.write((json.dumps(record, indent=2) + "\n").encode()))
    return 0 if worst_ok else 1


def targets(args) -> int:
    records = json.loads(Path(args.bench).read_text())
    missed = 0

    def judge(label, value, limit):
        nonlocal missed
        missed += value is None or value > limit
        print(f"  {label:<40} {value if value is None else round(value, 2)!s:>7} <= {limit}: "
              f"{'met' if value is not None and value <= limit else 'MISSED'}")

    for workload in sorted({r["workload"] for r in records}):
        print(workload)
        rows = [r for r in records if r["workload"] == workload]
        for prefix in ("", "gru-"):
            ln = next((r["train_ms"] for r in rows if r["model"] == f"{prefix}ln"), None)
            for r in rows:
                name = r["model"]
                if not name.startswith(prefix) or name.endswith(("fused", "-loop", "-ref", "-function")) or \
                        (prefix == "" and name.startswith("gru-")):
                    continue
                base = name[len(prefix):]
                k = "" if r["k"] is None else f" k={r['k']}"
                label = f"{name}{k} x fused"
                judge(label, r["ratio_fused"], 2.0 if base in ("ln", "atn") else 4.0)
                if base == "atn" and ln:
                    judge(f"{name} k={r['k']} x {prefix}ln", r["train_ms"] / ln, 1.15)
    return 1 if missed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    eq = sub.add_parser("equal")
    eq.add_argument("--output")
    eq.add_argument("--sizes", default="adding,copying", help="comma list of " + ", ".join(SIZES))
    eq.add_argument("--ptb", action="store_true", help="also ptb-char's sizes (H=1000: slow on the loop)")
    tg = sub.add_parser("targets")
    tg.add_argument("bench")
    args = parser.parse_args()
    if args.command == "equal" and set(args.sizes.split(",")) - set(SIZES):
        parser.error(f"--sizes: unknown {sorted(set(args.sizes.split(',')) - set(SIZES))}; known: {', '.join(SIZES)}")
    if args.command == "equal" and not torch.cuda.is_available():
        print("error: no CUDA GPU here", file=sys.stderr)
        return 2
    return equal(args) if args.command == "equal" else targets(args)


if __name__ == "__main__":
    sys.exit(main())
