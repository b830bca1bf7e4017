"""The ``atnbench`` command line. Each command lives in its own module and registers on ``app``."""

from atnbench.cli import run as _run  # noqa: F401  (registers run, tasks, models)
from atnbench.cli import bench as _bench  # noqa: F401
from atnbench.cli import analysis as _analysis  # noqa: F401  (registers stats, invariances, gradcheck)
from atnbench.cli import report as _report  # noqa: F401  (registers report, plot)
from atnbench.cli import sweep as _sweep  # noqa: F401
from atnbench.cli import data as _data  # noqa: F401  (registers data list|prepare|verify)
from atnbench.cli.app import app

__all__ = ["app"]
