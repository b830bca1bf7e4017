"""Checkpoints of unfinished runs: where they live, how they are written and read, who writes them.

Location: a folder named after the store *file*, beside it, like SQLite's own ``-wal``/``-shm``
files: ``<store>-checkpoints/<run_id>/checkpoint.pt`` (``atnbench.db-checkpoints/3f2a…/``). Two
stores in one folder therefore never see each other's checkpoints. (Before this layout every
store of a folder shared ``<folder>/checkpoints/``; such checkpoints are not read any more: a
``--resume`` of one of those runs starts from scratch and says so.)

Writing: into a unique temporary file in the run's folder, flushed, then ``os.replace``d over
the checkpoint, so a kill at any moment leaves the old checkpoint or the new one, never a torn
file, and two writers never share a temporary name.

Reading: a checkpoint that does not load (empty, truncated, not a checkpoint, another model's)
is ``CorruptCheckpoint``. The trainer renames it aside (``checkpoint.pt.corrupt-<UTC time>``,
kept for inspection, never deleted) and starts the run from scratch, saying so in one line.

One writer per run: while a run trains, its process holds an OS lock on
``<store>-checkpoints/<run_id>.lock`` (``flock``; the kernel releases it when the holder dies,
``kill -9`` included, so a crash never blocks a later run). ``atnbench run`` refuses a run that
another process is training (``RunBusy``); a sweep waits for it and then skips it if it
finished; ``atnbench runs delete`` refuses to delete it.

Watching: ``on_save(callback)`` calls ``callback(path)`` after every checkpoint this process
writes, while in its block. A Ray task trains into a scratch store on a node that may share no
filesystem with the sweep's store; it ships each checkpoint to the driver as soon as it is in
place, so a driver killed mid-run leaves a run the next sweep resumes (``sweep.ray_backend``).

Clean-up: a run that finishes (done or diverged) deletes its checkpoint and stale temporary
files; releasing the lock removes the lock file and then the run's folder and the store's
checkpoint folder if they are empty.
"""

from __future__ import annotations

import logging
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator, Optional, Union

try:  # POSIX: flock, plus the inode check that lets a holder delete its lock file safely
    import fcntl
except ImportError:  # pragma: no cover - Windows: filelock's msvcrt lock, the lock file stays
    fcntl = None

CHECKPOINT = "checkpoint.pt"
KEYS = ("model", "optimizer", "source", "torch_rng", "state", "step", "wall_s")
TEMP_PREFIX = f".{CHECKPOINT}."
TEMP_SUFFIX = ".tmp"

log = logging.getLogger("atnbench")
PathLike = Union[str, Path]


class CorruptCheckpoint(Exception):
    """A checkpoint file that cannot be used; the message is one line naming the file."""


class RunBusy(RuntimeError):
    """Another process (``pid`` where known) is training the run ``run_id`` into the same store."""

    def __init__(self, message: str, run_id: Optional[str] = None, pid: Optional[int] = None):
        super().__init__(message)
        self.run_id, self.pid = run_id, pid


# -- where ----------------------------------------------------------------------------------------


def checkpoint_root(store_path: PathLike) -> Path:
    """The store's checkpoint folder: ``<store file>-checkpoints`` beside the store, the file a
    symbolic link names (so every name of one store shares its runs' locks and checkpoints)."""
    path = Path(os.path.realpath(Path(store_path).expanduser()))
    return path.with_name(path.name + "-checkpoints")


def checkpoint_dir(store_path: PathLike, run_id: str) -> Path:
    """One run's checkpoint folder (not created here)."""
    if not run_id or run_id in (".", "..") or "/" in run_id or "\\" in run_id:
        raise ValueError(f"run id {run_id!r} cannot name a checkpoint folder")
    return checkpoint_root(store_path) / run_id


def checkpoint_file(store_path: PathLike, run_id: str) -> Path:
    return checkpoint_dir(store_path, run_id) / CHECKPOINT


def lock_file(store_path: PathLike, run_id: str) -> Path:
    return checkpoint_dir(store_path, run_id).with_name(f"{run_id}.lock")


# -- writing and reading --------------------------------------------------------------------------


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write ``path`` through a unique temporary file in its folder and an atomic replace, with the
    mode the file had, or a new file's under the umask (mkstemp's own is 0600: a shared record no
    one else could read)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = _mode_for(path)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())  # the data reaches the disk before the name points at it
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _mode_for(path: Path) -> int:
    """The permission bits ``path`` has, or a new file's: 0666 less the umask (read where Linux
    shows it, so no thread sees the umask changed for a moment)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        pass
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def _os_error_in(error: BaseException):
    """The OSError among ``error``'s causes and contexts, or None."""
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, OSError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


_ON_SAVE: list[Callable[[Path], None]] = []  # see on_save


@contextmanager
def on_save(callback: Callable[[Path], None]) -> Iterator[None]:
    """Call ``callback(path)`` after each checkpoint ``save`` puts in place, while in the block."""
    _ON_SAVE.append(callback)
    try:
        yield
    finally:
        _ON_SAVE.remove(callback)


def save(path: Path, payload: dict[str, Any]) -> None:
    """Write a checkpoint. A full disk is an OSError saying so, not torch's RuntimeError about
    its zip writer's position (which chains the OSError and reads like a bug)."""
    import torch

    try:
        write_atomic(path, lambda handle: torch.save(payload, handle))
    except RuntimeError as error:
        cause = _os_error_in(error)
        if cause is None:
            raise
        raise OSError(cause.errno, f"{cause.strerror or cause} (writing the checkpoint {path})") from error
    for callback in list(_ON_SAVE):
        callback(path)


def load(path: Path, device) -> dict[str, Any]:
    """The checkpoint's contents; ``CorruptCheckpoint`` if it cannot be read as one."""
    import torch

    try:
        if path.stat().st_size == 0:
            raise CorruptCheckpoint(f"checkpoint {path} is empty")
        saved = torch.load(path, map_location=device, weights_only=False)
    except CorruptCheckpoint:
        raise
    except Exception as error:  # noqa: BLE001 - pickle, zip, EOF, OS errors: all mean "unusable"
        reason = " ".join(str(error).split()) or type(error).__name__
        raise CorruptCheckpoint(f"checkpoint {path} is unreadable ({type(error).__name__}: {reason[:160]})") from None
    if not isinstance(saved, dict) or not set(KEYS) <= set(saved):
        raise CorruptCheckpoint(f"checkpoint {path} is not an atnbench checkpoint (missing "
                                f"{', '.join(k for k in KEYS if not isinstance(saved, dict) or k not in saved)})")
    return saved


def set_aside(path: Path) -> Path:
    """Rename an unusable checkpoint out of the way (kept for inspection); returns its new path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = path.with_name(f"{path.name}.corrupt-{stamp}")
    os.replace(path, aside)
    return aside


def discard(store_path: PathLike, run_id: str) -> None:
    """Delete a finished run's checkpoint and any temporary files a killed writer left."""
    folder = checkpoint_dir(store_path, run_id)
    if not folder.is_dir():
        return
    for path in folder.iterdir():
        if path.name == CHECKPOINT or (path.name.startswith(TEMP_PREFIX) and path.name.endswith(TEMP_SUFFIX)):
            path.unlink(missing_ok=True)


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty, already gone, or someone is creating a file in it: leave it
        pass


# -- one writer per run ---------------------------------------------------------------------------


class RunLock:
    """An OS lock on one file, released by the kernel when its holder dies."""

    def __init__(self, path: Path):
        self.path = path
        self._fd: Optional[int] = None
        self._fallback = None

    def try_acquire(self) -> bool:
        if fcntl is None:  # pragma: no cover - Windows
            import filelock

            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fallback = filelock.FileLock(str(self.path))
            try:
                self._fallback.acquire(timeout=0)
                return True
            except filelock.Timeout:
                return False
        while True:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # the empty folder was just cleaned up: make it again
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                return False
            # The previous holder deletes the file before unlocking it, so we may have locked a
            # file that no longer has this name; then the lock protects nothing: try again.
            try:
                current = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                current = False
            if current:
                self._fd = fd
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                return True
            os.close(fd)

    def holder(self) -> Optional[int]:
        """The pid written by the current holder, if it can be read."""
        try:
            return int(self.path.read_text().strip())
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self._fallback is not None:  # pragma: no cover - Windows
            self._fallback.release()
            return
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still holding the lock (see try_acquire)
        fcntl.flock(self._fd, fcntl.LOCK_UN)
        os.close(self._fd)
        self._fd = None


def held_here(store_path: PathLike, run_id: str) -> bool:
    """Whether a live process on this machine may hold the run's lock, asked without locking or
    writing (a reader must not make a starting run busy). What is read is the lock file: a holder
    writes its pid there and deletes it when it lets go; one killed with -9 leaves it, naming a
    dead pid. A live pid is taken as holding it (a reused pid reads as a holder too)."""
    lock = RunLock(lock_file(store_path, run_id))
    if not lock.path.exists():
        return False
    pid = lock.holder()
    if pid is None:
        return True  # just created, its pid not yet written: being taken
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@contextmanager
def hold_run(store_path: PathLike, run_id: str, wait: bool = False,
             should_stop: Optional[Callable[[], bool]] = None, poll_s: float = 0.2,
             quiet: bool = False) -> Iterator[bool]:
    """Hold the run's lock for the block; yields whether we had to wait for another process.

    ``wait=False``: another holder means ``RunBusy`` at once. ``wait=True``: poll until it is
    free (``should_stop()`` returning True interrupts the wait with KeyboardInterrupt), saying
    so in one line unless ``quiet``. On exit the lock file goes, then the run's folder and the
    store's checkpoint folder if empty.
    """
    lock = RunLock(lock_file(store_path, run_id))
    waited = False
    while not lock.try_acquire():
        pid = lock.holder()
        by = f"another process (pid {pid})" if pid else "another process"
        if not wait:
            raise RunBusy(f"run {run_id} is being trained by {by} on {store_path}; wait for it to finish "
                          f"(its result lands in the same store) or use another --store", run_id, pid)
        if not waited and not quiet:
            log.warning(f"run {run_id} is being trained by {by}; waiting for it")
        waited = True
        if should_stop is not None and should_stop():
            raise KeyboardInterrupt
        time.sleep(poll_s)
    try:
        yield waited
    finally:
        lock.release()
        _remove_if_empty(checkpoint_dir(store_path, run_id))
        _remove_if_empty(checkpoint_root(store_path))
