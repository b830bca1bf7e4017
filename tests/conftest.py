"""Shared test set-up."""

import gc

import pytest


def pytest_collection_finish(session):
    """The objects the collection made (torch, scipy, Ray, datasets: ~400,000 in a worker) moved out of
    the collector's reach, and full collections made ten times rarer: each walked every object left
    (0.1-0.2 s), 15-30 of them in a worker over the suite, ~8 CPU-s in all (measured). The objects
    live until the worker ends either way; cycles the tests leave wait a little longer."""
    gc.collect()
    gc.freeze()
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Tiny tensors: intra-op threads only add OpenMP hand-offs (and stall for milliseconds when
    the other core is busy), and results must not depend on the machine's core count.
    Restored after each module. Torch is imported here, not at the top: under xdist the controller
    loads this file too, before it starts the workers, and it never needs torch."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_terminal_summary(terminalreporter):
    """The bad-input matrix's size in the test output (issue 12 asks for the count)."""
    marker = "test_bad_input.py::test_bad_input["
    outcomes = {key: sum(1 for report in terminalreporter.stats.get(key, []) if marker in getattr(report, "nodeid", ""))
                for key in ("passed", "failed")}
    total = sum(outcomes.values())
    if total:
        terminalreporter.write_line(f"bad-input matrix: {outcomes['passed']} of {total} cases passed "
                                    f"(exit code, one stderr line, no traceback, store unchanged)")
