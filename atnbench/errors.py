"""What the user can fix, apart from what is a bug.

A :class:`UserError` (a value out of range, an unknown name, an unusable file the user named)
is reported as one line and exit code 2. Any other exception reaching the command line is a bug
in atnbench: exit code 1, a one-line summary and a file holding the traceback
(``atnbench.cli.app``). It derives from ``ValueError`` so code that catches ``ValueError`` around
a check (to try another reading of a value) keeps working.
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user can fix; the message is one readable line saying what and how."""


# Optional packages a user's data may need, and the extra of atnbench that installs each.
EXTRAS = {"pyarrow": "tables", "datasets": "data"}


def needs_package(package: str) -> str:
    """"needs pyarrow: pip install 'atnbench[tables]'", the end of a one-line error."""
    return f"needs {package}: pip install 'atnbench[{EXTRAS[package]}]'"
