"""``python -m atnbench``: the same command line as ``atnbench``."""

from atnbench.cli import app

if __name__ == "__main__":
    app(prog_name="atnbench")
