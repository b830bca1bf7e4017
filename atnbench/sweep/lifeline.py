"""A sweep's worker process never outlives the sweep, and it obeys SIGTERM.

Why: a worker waiting for its next run (blocked in ProcessPoolExecutor's call queue) cannot see
the sweep die: the queue's pipe stays open because every worker holds its write end. After a
``kill -9`` of the sweep its workers trained the runs they had been handed, then sat idle for
good, ignoring SIGTERM (their handler only asked the run in progress to stop).

In each worker (``Lifeline.install`` in the pool's initializer):

- SIGINT stops the run in progress at its next training step (recorded failed/"interrupted",
  its checkpoint kept, so the same sweep command resumes it) and nothing else: Ctrl-C reaches the
  whole process group, and the sweep coordinates the stop.
- SIGTERM does the same and ends the worker: at once if it has no run in progress, else as soon
  as that run has stopped and been recorded.
- The sweep's death counts as SIGTERM: on Linux the kernel sends one when the worker's parent
  dies (``prctl(PR_SET_PDEATHSIG)``; the parent is multiprocessing's fork server, which ends
  with the sweep); everywhere a watchdog thread notices within ``poll_s`` that the sweep is gone
  (``multiprocessing.parent_process()``: a pipe the sweep holds open, whichever process forked
  the worker, so a sweep that dies while its worker starts is noticed too). A run that
  cannot stop at a step soon (the one-time C++ build, a long evaluation) is cut off after
  ``ORPHAN_GRACE_S``: its row then stays 'running', which the sweep resumes like an interrupted run.

A worker ends with ``os._exit``: normal interpreter exit would wait for queue threads writing
to pipes that nobody reads any more. If the sweep still lives, the events queue is flushed first
(bounded), so no worker dies holding its write lock.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

EXIT_CODE = 128 + signal.SIGTERM
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
FLUSH_S = 2.0  # at most this long to hand the sweep the last progress events before exiting
ORPHAN_GRACE_S = 60.0  # an orphaned worker's run that has not stopped by then is cut off


def signal_on_parent_death(signum: int = signal.SIGTERM) -> bool:
    """Ask the Linux kernel to send ``signum`` to this process when its parent dies; False where
    that is not available (the watchdog alone then notices)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class Lifeline:
    """This worker's tie to the sweep process, the one that started it (``multiprocessing.parent_process()``).

    ``stop_run``: the run in progress should stop at its next step (SIGINT, SIGTERM, the sweep's
    death). ``ending``: the worker exits as soon as no run is in progress (SIGTERM, the sweep's
    death). Runs are bracketed by ``running()``.
    """

    def __init__(self, poll_s: float = 0.2, flush: Optional[Callable[[], None]] = None):
        self.parent = multiprocessing.parent_process()
        self.poll_s, self.flush = poll_s, flush
        self.stop_run = False
        self.ending = False
        self.busy = False
        self.idle_since = time.monotonic()

    def install(self) -> None:
        signal.signal(signal.SIGINT, self._on_interrupt)
        signal.signal(signal.SIGTERM, self._on_terminate)
        signal_on_parent_death(signal.SIGTERM)  # asked after the handler is in place
        threading.Thread(target=self._watch, name="atnbench-lifeline", daemon=True).start()

    def parent_alive(self) -> bool:
        return self.parent is not None and self.parent.is_alive()

    @contextmanager
    def running(self) -> Iterator[None]:
        """Bracket one run: while inside, SIGTERM stops the run instead of ending the worker."""
        self.busy = True
        try:
            yield
        finally:
            self.idle_since = time.monotonic()
            self.busy = False

    def _on_interrupt(self, signum, frame) -> None:
        self.stop_run = True

    def _on_terminate(self, signum, frame) -> None:
        self.stop_run = self.ending = True
        if not self.busy:
            self._exit()

    def _watch(self) -> None:
        orphaned_at = None
        while True:
            if orphaned_at is None and not self.parent_alive():
                orphaned_at = time.monotonic()
                self.stop_run = self.ending = True
            # A run that just ended is handed back to the sweep by the main thread right after
            # running() exits: give it one poll interval before ending the process under it.
            if self.ending and not self.busy and time.monotonic() - self.idle_since >= self.poll_s:
                self._exit()
            if orphaned_at is not None and time.monotonic() - orphaned_at >= ORPHAN_GRACE_S:
                self._exit()
            time.sleep(self.poll_s)

    def _exit(self) -> None:
        if self.flush is not None and self.parent_alive():
            flusher = threading.Thread(target=self.flush, daemon=True)
            flusher.start()
            flusher.join(FLUSH_S)
        os._exit(EXIT_CODE)
