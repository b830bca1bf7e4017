"""The ``atnbench`` command line. Each command lives in its own module and registers on ``app``.

A command imports the package that does its work (and torch with it) when it runs, not when the
command line is built: ``--help``, ``--version``, shell completion (the program runs on every
TAB) and a refused flag answer in a fraction of a second instead of torch's seconds of import.
``tests/test_cli.py`` holds every module here to that.
"""

from atnbench.cli import run as _run  # noqa: F401  (registers run, models)
from atnbench.cli import tasks as _tasks  # noqa: F401  (registers tasks, tasks new|check)
from atnbench.cli import bench as _bench  # noqa: F401
from atnbench.cli import analysis as _analysis  # noqa: F401  (registers stats, invariances, gradcheck)
from atnbench.cli import report as _report  # noqa: F401  (registers report, plot)
from atnbench.cli import sweep as _sweep  # noqa: F401
from atnbench.cli import evaluate as _evaluate  # noqa: F401
from atnbench.cli import reproduce as _reproduce  # noqa: F401
from atnbench.cli import runs as _runs  # noqa: F401  (registers the runs sub-commands)
from atnbench.cli import store_cmd as _store_cmd  # noqa: F401  (registers store export/import/merge)
from atnbench.cli import build as _build  # noqa: F401
from atnbench.cli import data as _data  # noqa: F401  (registers data list|prepare|verify)
from atnbench.cli import canary as _canary  # noqa: F401
from atnbench.cli import verify as _verify  # noqa: F401
from atnbench.cli.app import app

__all__ = ["app"]
