"""``atnbench build``: compile the C++ fast path ahead of time (it otherwise builds on first use)."""

from __future__ import annotations

import time

import typer

from atnbench.cli.app import app, fail, out


@app.command("build")
def build_command(
    verbose: bool = typer.Option(False, "--verbose", help="Show the compiler's commands and output."),
):
    """Build the C++ fast path of NormLSTM now and say where it is (otherwise it builds on first use).

    Retries build variants that failed before. The library lives under TORCH_EXTENSIONS_DIR
    (default ~/.cache/torch_extensions), one folder per install; ATNBENCH_NO_BUILD=1 disables it.
    """
    from atnbench.nn import build, fastpath

    if build.disabled():
        fail("ATNBENCH_NO_BUILD is set: unset it to build the C++ fast path")
    start = time.perf_counter()
    try:
        built = build.load(fastpath.EXTENSION, retry=True, verbose=verbose)
    except build.BuildError as e:
        details = [str(p) for p in e.paths if p.exists()][-1:]
        fail(f"the C++ fast path could not be built: {e}" + "".join(f" (details: {p})" for p in details), code=1)
    state = "built" if built.built_now else "already built"
    out.print(f"{state} in {time.perf_counter() - start:.1f} s: {built.path} ({' '.join(built.cflags)})",
              soft_wrap=True, highlight=False)
    out.print(f"build log: {built.path.parent / 'build.log'}", soft_wrap=True, highlight=False)
