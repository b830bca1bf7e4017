"""On a CUDA GPU: the Triton path against the loop at the paper's sizes, issue 33's targets, a profile.

    python benchmarks/cuda_check.py equal --output check.json    # values and gradients, every norm, LSTM and GRU
    python benchmarks/cuda_check.py equal --sizes adding          # one size only
    python benchmarks/cuda_check.py targets bench.json           # the speed targets, from `atnbench bench --device cuda`
    python benchmarks/cuda_check.py profile --norms ln,atn        # the GPU kernels of a training step, by time

``equal``: each norm x cell at the adding and copying sizes (ptb-char's too with ``--ptb``): the
reference is the plain loop in float64 on the CPU (the loop is launch-bound on a GPU, and the
CPU's float64 is the paper's equations to 1e-10 in CI); outputs, final states, every gradient
and the running statistics. The Triton path in float64 must equal it to 1e-9 of each tensor's
scale. In float32 a long recurrence carries rounding of ~1e-4 whatever the order of its sums, so
the Triton path's float32 must be as close to the float64 reference as the loop's own float32
is: within ``ROUNDING_FACTOR`` times the loop's error, or 1e-4, whichever is larger. Exit 1 if
any case is off.
``targets``: LN- and ATN-LSTM step <= 2x cuDNN's nn.LSTM, ATN <= 1.15x LN at every k, every
other norm <= 4x; the GRUs likewise against nn.GRU. Exit 1 if any target is missed.
``profile``: one NormLSTM layer's training step (forward, loss, backward) at a workload's sizes
under torch.profiler, CUDA graphs as in a run; prints each GPU kernel's total time.
``benchmarks/run_bench_cuda.sh`` runs the bench, then all three.
"""

from __future__ import annotations

import argparse
import itertools
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
# float32: the Triton path's distance from the float64 reference may be this many times the
# loop's own float32 distance (the two sum in different orders; neither is the exact one).
ROUNDING_FACTOR = 4.0


def _run(model, x):
    x = x.clone().requires_grad_()
    out, state = model(x)
    state = [state] if isinstance(state, torch.Tensor) else [t for t in state if isinstance(t, torch.Tensor)]
    loss = (out ** 2).mean() + (out[-1] ** 2).mean() + sum((s ** 2).mean() for s in state)
    grads = torch.autograd.grad(loss, [x, *model.parameters()])
    return [out, *state, *grads, *(b for b in model.buffers() if b.is_floating_point())]


def tolerance(dtype, loop_error: float) -> float:
    """How far from the float64 reference a Triton result of ``dtype`` may be, given the loop's own
    float32 distance from it."""
    if dtype == torch.float64:
        return TOLERANCE[dtype]
    return max(TOLERANCE[dtype], ROUNDING_FACTOR * loop_error)


def _distance(reference, other) -> float:
    """The worst over tensors of max |difference| / max |reference|."""
    return max(((u - v.to(u)).abs().max() / u.abs().max().clamp_min(1e-30)).item() for u, v in zip(reference, other))


def equal(args) -> int:
    gpu, cpu = torch.device("cuda"), torch.device("cpu")
    sizes = [s for s in args.sizes.split(",") if s != "ptb-char" or args.ptb]
    rows, all_ok = [], True
    for size in sizes:
        B, D, H, T = SIZES[size]
        for (norm, opts), (cell, cls) in itertools.product(NORMS, (("lstm", NormLSTM), ("gru", NormGRU))):
            torch.manual_seed(0)
            loop = cls(D, H, norm=norm, backend="loop", **opts).to(cpu, torch.float64)
            weights = {name: value.clone() for name, value in loop.state_dict().items()}  # before the run moves them
            x = torch.rand(T, B, D, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
            reference = _run(loop, x)
            loop32 = cls(D, H, norm=norm, backend="loop", **opts).to(cpu, torch.float32)
            loop32.load_state_dict(weights)
            loop_error = _distance(reference, _run(loop32, x.float()))
            for dtype in (torch.float32, torch.float64):
                fast = cls(D, H, norm=norm, backend="triton", **opts).to(gpu, dtype)
                fast.load_state_dict(weights)
                error = _distance(reference, _run(fast, x.to(gpu, dtype)))
                limit = tolerance(dtype, loop_error)
                ok = error <= limit and fast.last_paths == ("triton",)
                all_ok &= ok
                rows.append({"size": size, "cell": cell, "norm": norm, **opts, "dtype": str(dtype),
                             "error": error, "limit": limit, "loop_float32_error": loop_error, "ok": ok,
                             "path": fast.last_paths[0]})
                print(f"{size:>9} {cell} {norm:>8} {opts} {str(dtype):>13}: {error:.2e} (limit {limit:.1e}, "
                      f"loop float32 {loop_error:.1e}) {'ok' if ok else 'OFF'}", flush=True)
                if args.output:  # after every case: a check stopped by its time limit keeps what it did
                    record = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                              "reference": "loop, float64, CPU", "rows": rows}
                    write_atomic(Path(args.output),
                                 lambda handle: handle.write((json.dumps(record, indent=2) + "\n").encode()))
    return 0 if all_ok else 1


def profile(args) -> int:
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from atnbench.nn.gpu import graph, ops

    B, D, H, T = SIZES[args.size]
    device = torch.device("cuda")
    x = torch.rand(T, B, D, device=device)
    tiles = [int(t) for t in args.tile.split(",")] if args.tile else [ops.TILE]
    windows = [int(t) for t in args.window_tile.split(",")] if args.window_tile else [ops.WINDOW_TILE]
    for tile, window in zip(tiles, windows * len(tiles) if len(windows) == 1 else windows):  # main checks the counts
        ops.TILE, ops.WINDOW_TILE = tile, window
        graph.CACHE.graphs.clear()  # a graph captured under other tiles would be replayed as it is
        for name in args.norms.split(","):
            norm, _, k = name.partition(":")
            opts = {"k": int(k)} if k else {}
            model = NormLSTM(D, H, norm=norm, backend="triton", **opts).to(device)

            def train_step():
                out, _ = model(x)
                (out ** 2).mean().backward()

            for _ in range(3):  # compiles the kernels, captures the graphs
                train_step()
            torch.cuda.synchronize()
            with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(args.steps):
                    train_step()
                torch.cuda.synchronize()
            print(f"\n== {args.size} NormLSTM norm={name}: {args.steps} training steps, tile {tile}, "
                  f"window tile {window} ==", flush=True)
            print(prof.key_averages().table(sort_by="device_time_total", row_limit=args.rows,
                                            max_name_column_width=60), flush=True)
    return 0


def targets(args) -> int:
    try:
        records = json.loads(Path(args.bench).read_text())
    except (OSError, ValueError) as error:  # a CSV (`bench -o x.csv`), a missing file
        print(f"error: {args.bench}: not the JSON records of `atnbench bench -o FILE.json` ({error})", file=sys.stderr)
        return 2
    missed = 0

    def judge(label, value, limit):
        nonlocal missed
        missed += value is None or value > limit
        shown = "-" if value is None else f"{value:.3f}"  # 1.154 is no "1.15 <= 1.15"
        print(f"  {label:<40} {shown:>7} <= {limit}: {'met' if value is not None and value <= limit else 'MISSED'}")

    fused = {(r["workload"], r["model"]): r["train_ms"] for r in records if r["model"] in ("lstm-fused", "gru-fused")}

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
                # records before ratio_fused (2026-11-22): against the same cell's fused kernel, computed
                ref = fused.get((workload, "gru-fused" if prefix else "lstm-fused"))
                ratio = r.get("ratio_fused", r["train_ms"] / ref if ref else None)
                judge(label, ratio, 2.0 if base in ("ln", "atn") else 4.0)
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
    pr = sub.add_parser("profile")
    pr.add_argument("--size", default="adding", choices=sorted(SIZES))
    pr.add_argument("--norms", default="ln,atn:45", help="comma list of NORM or NORM:K")
    pr.add_argument("--steps", type=int, default=5)
    pr.add_argument("--rows", type=int, default=14)
    pr.add_argument("--tile", default="", help="comma list: elements per program of the step kernels "
                    "(default: ops.TILE, the package's), one profile each")
    pr.add_argument("--window-tile", default="", help="comma list (one, or one per --tile): elements per "
                    "program of ATN's input term (default: ops.WINDOW_TILE)")
    args = parser.parse_args()
    if args.command == "equal" and set(args.sizes.split(",")) - set(SIZES):
        parser.error(f"--sizes: unknown {sorted(set(args.sizes.split(',')) - set(SIZES))}; known: {', '.join(SIZES)}")
    if args.command == "profile" and args.window_tile and args.window_tile.count(",") not in (0, args.tile.count(",")):
        parser.error("--window-tile: one value, or one per --tile value")
    if args.command in ("equal", "profile") and not torch.cuda.is_available():
        print("error: no CUDA GPU here", file=sys.stderr)
        return 2
    return {"equal": equal, "targets": targets, "profile": profile}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
