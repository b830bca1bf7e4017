"""Build a C++ extension once per source and per install, safely under kills and concurrency.

``torch.utils.cpp_extension.load`` guards its build folder with a "baton" file that only a
clean exit removes: a process killed mid-build (SIGKILL, SIGTERM, power loss) leaves it behind
and every later process waits for it forever. Its folder is also named by the extension alone,
so two checkouts of the project rebuild each other's build. Here instead:

- Every build runs in a fresh private folder (``tmp-*``) that only its process uses, so torch's
  baton never has a second reader; the finished library is moved into place with an atomic
  rename, so a library in place is always complete. Folders of killed builds are removed by
  the next build.
- Builds are serialized by an OS lock (``flock`` via ``filelock``), which the kernel releases
  when its holder dies however it dies. A process that finds another building says so in one
  line and waits a bounded time (``ATNBENCH_BUILD_WAIT`` seconds, default 300).
- The folder is per install (``atnbench-<hash>``: the package's path, Python, torch, machine)
  and each library is named by a hash of its sources, flags, compiler and CPU, so checkouts
  never touch each other's builds and a changed source gets a new library.
- Each attempt, success or failure, is one line of ``build.log`` in that folder. A failed
  variant is remembered (``<name>.failed``, with the compiler's output) and not retried on
  every start; ``load(..., retry=True)`` (``atnbench build``) retries it.

The root is torch's: ``TORCH_EXTENSIONS_DIR``, default ``~/.cache/torch_extensions``.
``ATNBENCH_NO_BUILD=1`` disables the C++ extensions altogether (see ``disabled``).
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, TextIO

import filelock

PACKAGE = Path(__file__).resolve().parents[1]  # this install's atnbench folder
WAIT_S = 300.0
LIB_SUFFIX = ".pyd" if sys.platform == "win32" else ".so"  # as torch names it


@dataclass(frozen=True)
class Extension:
    """What to build: ``name`` (a C identifier) from ``sources``, with the first of ``variants``
    ((cflags, ldflags) pairs) that compiles. ``depends`` (headers) only enter the hash."""

    name: str
    sources: tuple[Path, ...]
    variants: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (((), ()),)
    depends: tuple[Path, ...] = ()
    label: str = "the C++ fast path"


@dataclass(frozen=True)
class Built:
    path: Path
    cflags: tuple[str, ...]
    built_now: bool


@dataclass
class BuildError(Exception):
    """No variant could be built or loaded: ``reason`` is one line, ``details`` the rest."""

    reason: str
    details: str = ""
    disabled: bool = False
    paths: list[Path] = field(default_factory=list)

    def __str__(self) -> str:
        return self.reason


def disabled() -> bool:
    """``ATNBENCH_NO_BUILD`` set to anything but empty or 0: no C++ extension is built or loaded."""
    return os.environ.get("ATNBENCH_NO_BUILD", "").strip() not in ("", "0")


def root() -> Path:
    """torch's extension build root, as ``torch.utils.cpp_extension.get_default_build_root`` finds
    it, without importing that module (setuptools with it: 0.1-0.3 s of every process that loads a
    built extension, on a 2-core VM), which only a build needs."""
    if os.environ.get("TORCH_EXTENSIONS_DIR"):
        return Path(os.environ["TORCH_EXTENSIONS_DIR"])
    try:
        from torch._appdirs import user_cache_dir  # what get_default_build_root calls
    except ImportError:  # a torch that moved it: ask the public function
        from torch.utils.cpp_extension import get_default_build_root

        return Path(get_default_build_root())
    return Path(os.path.realpath(user_cache_dir(appname="torch_extensions")))


def _digest(*parts: bytes) -> str:
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def _cpu_tag() -> str:
    """The CPU model and instruction-set flags (a variant may use -march=native)."""
    found: dict[str, str] = {}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key = line.split(":", 1)[0].strip()
            if key in ("model name", "flags") and key not in found:
                found[key] = line
    except OSError:
        pass
    return "\n".join(found.values()) or (platform.processor() + platform.machine())


def install_folder() -> Path:
    """This install's build folder: one per package path, Python, torch build and machine."""
    import torch

    key = _digest(str(PACKAGE).encode(), sys.version.encode(), torch.__version__.encode(),
                  str(getattr(torch.version, "git_version", "")).encode(), platform.machine().encode())
    return root() / f"atnbench-{key}"


def library_name(ext: Extension, variant: tuple) -> str:
    """``<name>_<hash>``: the hash covers the sources, the flags, the compiler and the CPU."""
    cflags, ldflags = variant
    texts = [Path(p).read_bytes() for p in (*ext.sources, *ext.depends)]
    flags = " ".join((*cflags, "|", *ldflags)).encode()
    return f"{ext.name}_{_digest(*texts, flags, os.environ.get('CXX', 'c++').encode(), _cpu_tag().encode())}"


def _log(folder: Path, line: str) -> None:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
    with open(folder / "build.log", "a") as f:
        f.write(f"{stamp} pid={os.getpid()} {line}\n")


def _durable_move(src: Path, dst: Path) -> None:
    """Put a finished file in place so that a crash leaves either nothing or the whole file."""
    with open(src, "rb") as f:
        os.fsync(f.fileno())
    os.replace(src, dst)
    if os.name == "posix":  # the rename itself, durable
        fd = os.open(dst.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _summary(text: str) -> str:
    """One line for a failed build: the compiler's first error, else the first line of the output."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ": error:" in ln or "fatal error" in ln]
    return ((errors or lines or ["unknown error"])[0])[:300]


def _compile(ext: Extension, variant: tuple, name: str, folder: Path, verbose: bool) -> Path:
    """Compile into a private folder, then move the library into ``folder`` atomically."""
    from torch.utils.cpp_extension import load

    cflags, ldflags = variant
    work = Path(tempfile.mkdtemp(prefix="tmp-", dir=folder))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = load(name, [str(s) for s in ext.sources], extra_cflags=list(cflags),
                         extra_ldflags=list(ldflags), build_directory=str(work),
                         is_python_module=False, verbose=verbose)
        final = folder / (name + LIB_SUFFIX)
        _durable_move(Path(built), final)
        return final
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _load_library(path: Path) -> None:
    import torch

    torch.ops.load_library(str(path))


def _failures(folder: Path, names: list[str]) -> BuildError:
    """Every variant failed before: the reason of the last (the most portable) one."""
    reason = "no build variant succeeded"
    for name in names:
        failed = folder / (name + ".failed")
        if failed.exists():
            reason = _summary(failed.read_text().split("\n", 1)[-1])
    return BuildError(reason, paths=[folder / (n + ".failed") for n in names])


def _try_load(lib: Path, cflags, built_now: bool, errors: list[str]) -> Optional[Built]:
    try:
        _load_library(lib)
    except Exception as e:  # built here but does not load (e.g. a library missing now)
        errors.append(f"{lib.name} does not load: {_summary(str(e))}")
        return None
    return Built(lib, tuple(cflags), built_now)


def _existing(folder: Path, ext: Extension, names: list[str]) -> Optional[Built]:
    """The first variant already built, loaded; None if a variant before it is still to be tried."""
    errors: list[str] = []
    for name, (cflags, _) in zip(names, ext.variants):
        lib, failed = folder / (name + LIB_SUFFIX), folder / (name + ".failed")
        if lib.exists():
            built = _try_load(lib, cflags, False, errors)
            if built is not None:
                return built
        elif not failed.exists():
            return None
    if errors:
        raise BuildError(errors[-1], paths=[folder / (n + LIB_SUFFIX) for n in names])
    raise _failures(folder, names)


def _acquire(lock: filelock.FileLock, label: str, wait_s: float, err: TextIO) -> None:
    try:
        lock.acquire(timeout=0)
        return
    except filelock.Timeout:
        pass
    print(f"atnbench: another process is building {label}; waiting up to {wait_s:.0f} s "
          f"(lock {lock.lock_file})…", file=err, flush=True)
    try:
        lock.acquire(timeout=wait_s)
    except filelock.Timeout:
        raise BuildError(f"another process held the build lock {lock.lock_file} for more than "
                         f"{wait_s:.0f} s (ATNBENCH_BUILD_WAIT)") from None


def _wait_s() -> float:
    try:
        return float(os.environ.get("ATNBENCH_BUILD_WAIT", WAIT_S))
    except ValueError:
        return WAIT_S


def _build(ext: Extension, folder: Path, names: list[str], retry: bool, verbose: bool, err: TextIO) -> Built:
    """With the build lock held: the first variant that is (or now gets) built and loads."""
    for stale in folder.glob("tmp-*"):  # left by killed builds: no other build is running
        shutil.rmtree(stale, ignore_errors=True)
    announced = False
    errors: list[str] = []
    for name, variant in zip(names, ext.variants):
        cflags = variant[0]
        lib, failed = folder / (name + LIB_SUFFIX), folder / (name + ".failed")
        if retry:
            failed.unlink(missing_ok=True)
        if failed.exists():
            continue
        if not lib.exists():  # else another process built it while this one waited
            if not announced:
                print(f"atnbench: building {ext.label} (one time, ~20 s)…", file=err, flush=True)
                announced = True
            start = time.perf_counter()
            try:
                _compile(ext, variant, name, folder, verbose)
            except Exception as e:  # no compiler, a flag it lacks, ...: try the next variant
                failed.write_text(f"{' '.join(cflags)}\n{e}\n")
                _log(folder, f"failed {name} ({' '.join(cflags)}): {_summary(str(e))}")
                errors.append(_summary(str(e)))
                continue
            _log(folder, f"built {name}{LIB_SUFFIX} ({' '.join(cflags)}) in {time.perf_counter() - start:.1f} s")
        built = _try_load(lib, cflags, announced, errors)
        if built is not None:
            return built
    if errors:
        raise BuildError(errors[-1], details="\n".join(errors), paths=[folder / (n + ".failed") for n in names])
    raise _failures(folder, names)


def load(ext: Extension, *, retry: bool = False, verbose: bool = False, err: Optional[TextIO] = None) -> Built:
    """Load ``ext``'s library into this process, building it first if this install has none.

    Variants are tried in order; the first built one that loads wins. ``retry`` tries again the
    variants that failed before (otherwise remembered). Raises ``BuildError`` (a one-line
    reason) if none can be had, if ``ATNBENCH_NO_BUILD`` is set, or after waiting
    ``ATNBENCH_BUILD_WAIT`` seconds for another process's build.
    """
    if disabled():
        raise BuildError("ATNBENCH_NO_BUILD is set", disabled=True)
    folder = install_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        names = [library_name(ext, v) for v in ext.variants]
        if not retry:
            found = _existing(folder, ext, names)  # no lock: a library in place is complete
            if found is not None:
                return found
        lock = filelock.FileLock(str(folder / "build.lock"))
        _acquire(lock, ext.label, _wait_s(), err or sys.stderr)
    except OSError as e:  # an unwritable TORCH_EXTENSIONS_DIR, a missing source, ...
        raise BuildError(f"cannot build in {folder}: {e}") from None
    try:
        return _build(ext, folder, names, retry, verbose, err or sys.stderr)
    finally:
        lock.release()
