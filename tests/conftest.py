"""Shared test set-up."""

import pytest


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
