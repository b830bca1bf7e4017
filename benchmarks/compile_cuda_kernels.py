"""Compile every Triton kernel variant the GPU fast path launches for an NVIDIA GPU, without one.

The tests run the kernels in Triton's interpreter, which does not compile them; this compiles
them as a GPU would (Triton's own compiler and ptxas, shipped in its wheel) for a target of your
choice, default sm_90 (H100):

    python benchmarks/compile_cuda_kernels.py              # every norm x LSTM/GRU, float32 and float64
    python benchmarks/compile_cuda_kernels.py --arch 80

It records the launches of a tiny forward and backward of each model in the interpreter (a child
process), then compiles each distinct (kernel, argument types, constants) for the target. Exit 1
if any fails. Takes minutes (each variant compiles in ~5-20 s).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import time

NORMS = ["ln", "atn", "bn", "bn-input", "bln", "atn-bn"]
PER_STEP = ("t", "step", "chunk")


def record() -> None:
    """(child, interpreter on) Print every distinct launch's kernel, argument types and constants."""
    import torch

    from atnbench.nn import NormGRU, NormLSTM
    from atnbench.nn.gpu import sequence, step

    seen = {}

    def recorder(module, name):
        kernel = getattr(module, name)

        class Launch:
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    types = []
                    for arg_name, a in zip(kernel.arg_names, args):
                        if isinstance(a, torch.Tensor):
                            types.append((arg_name, "*" + {torch.float32: "fp32", torch.float64: "fp64"}[a.dtype], None))
                        elif a is None or (isinstance(a, int) and a == 1 and arg_name not in PER_STEP):
                            # Triton makes these constants (a step index that is 1 too, but that
                            # variant differs in nothing that could fail: not compiled separately)
                            types.append((arg_name, "constexpr", a))
                        elif isinstance(a, int):
                            types.append((arg_name, "i32", None))
                        else:
                            types.append((arg_name, "fp32", None))
                    consts = {k: v for k, v in kwargs.items() if k != "num_warps"}
                    key = json.dumps([module.__name__, name, types, consts, kwargs.get("num_warps", 4)])
                    seen[key] = True
                    return kernel[grid](*args, **kwargs)
                return launch

        setattr(module, name, Launch())

    for name in ("lstm_forward", "gru_forward", "lstm_backward", "gru_backward"):
        recorder(step, name)
    for name in ("forward", "backward", "history_gradient"):
        recorder(sequence, name)
    for cls, norm, dtype, train in itertools.product((NormLSTM, NormGRU), NORMS, (torch.float32, torch.float64),
                                                     (True, False)):
        model = cls(3, 4, norm=norm, k=2, backend="triton", bln_population=(True, True, True, True)).to(dtype)
        model.train(train)
        x = torch.randn(3, 2, 3, dtype=dtype, requires_grad=True)
        out, state = model(x)
        if model.windowed:  # a window state carried (on h_n): its gradient too
            out2, _ = model(x, state)
            out = out + out2
        out.sum().backward()
    print(json.dumps(list(seen)))


def compile_all(launches: list[str], arch: int, only: list[str]) -> int:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    import atnbench.nn.gpu.sequence  # noqa: F401
    import atnbench.nn.gpu.step  # noqa: F401

    failed = 0
    for i, launch in enumerate(launches, 1):
        module, name, types, consts, warps = json.loads(launch)
        if only and not any(part in f"{module}.{name}" for part in only):
            continue
        kernel = getattr(sys.modules[module], name)
        signature = {arg: kind for arg, kind, _ in types}
        constants = {(kernel.arg_names.index(arg),): value for arg, kind, value in types if kind == "constexpr"}
        for arg, value in consts.items():
            signature[arg] = "constexpr"
            constants[(kernel.arg_names.index(arg),)] = value
        start = time.time()
        try:
            triton.compile(ASTSource(kernel, signature, constants), target=GPUTarget("cuda", arch, 32),
                           options={"num_warps": warps})
            status = "ok"
        except Exception as e:  # report every failure, then the count
            failed += 1
            status = f"FAILED: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
        print(f"[{i}/{len(launches)}] {name} {consts} {time.time() - start:.1f} s {status}", flush=True)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, default=90, help="compute capability x 10 (80: A100, 90: H100)")
    parser.add_argument("--kernels", default="", help="comma list: compile only kernels whose module.name "
                        "contains one of these (e.g. sequence)")
    parser.add_argument("--record", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.record:
        record()
        return 0
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    child = subprocess.run([sys.executable, __file__, "--record"], env=env, capture_output=True, text=True)
    if child.returncode:
        print(child.stderr, file=sys.stderr)
        return 1
    launches = json.loads(child.stdout.strip().splitlines()[-1])
    os.environ.pop("TRITON_INTERPRET", None)
    return compile_all(launches, args.arch, [k for k in args.kernels.split(",") if k])


if __name__ == "__main__":
    sys.exit(main())
