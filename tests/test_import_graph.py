"""No import cycle in the package: the graph of imports between atnbench's modules, those inside
functions included (a late import is still a dependency; a module importing its own parent
package does not count: that is how packages load), has no cycle, so every module can be
imported on its own and the layers flow one way: command -> run -> model -> store -> report."""

from __future__ import annotations

import ast
from pathlib import Path

from atnbench.tasks.registry import TASK_MODULES
from atnbench.tasks.lookup import get_task

PACKAGE = Path(__file__).resolve().parent.parent / "atnbench"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """atnbench modules ``module`` imports anywhere in its file (functions, if/try blocks too)."""
    names = set()
    for node in ast.parse(path.read_text()).body:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Import):
                names.update(alias.name for alias in sub.names)
            elif isinstance(sub, ast.ImportFrom):
                base = sub.module or ""
                if sub.level:
                    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
                    base = ".".join(package[:len(package) - sub.level + 1] + ([base] if base else []))
                names.add(base)
                names.update(f"{base}.{alias.name}" for alias in sub.names)
    edges = set()
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c loads a and a.b too
            target = ".".join(parts[:i])
            if target in known and target != module and not module.startswith(target + "."):
                edges.add(target)
    return edges


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found, state, stack = [], {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                found.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_the_package_has_no_import_cycle():
    known = modules()
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert "atnbench.evidence.identity" in graph and graph["atnbench.tasks.adding"]  # the graph is real
    found = cycles(graph)
    assert not found, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in found)


def test_a_late_import_counts(tmp_path):
    """The circle of 11 files stood for a round because imports inside functions were not counted."""
    (tmp_path / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "b.py").write_text("import pkg.a\n")
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    graph = {name: imported(name, path, known) for name, path in known.items()}
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.a"]]


def test_nothing_below_the_commands_imports_them():
    known = modules()
    upward = {name: sorted(t for t in imported(name, path, known) if t.startswith("atnbench.cli"))
              for name, path in known.items() if not name.startswith("atnbench.cli") and name != "atnbench.__main__"}
    assert not {name: targets for name, targets in upward.items() if targets}


def test_the_flat_middle_stays_small():
    """A run, its evidence and a user's task each live in a package; at most 12 modules sit flat."""
    flat = sorted(path.name for path in PACKAGE.glob("*.py"))
    assert len(flat) <= 12, flat
    assert {"run", "evidence", "tasks", "nn", "store", "sweep", "report", "cli"} <= {p.name for p in PACKAGE.iterdir()}


def test_the_cycle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_every_task_is_registered_lazily_under_its_own_name():
    for name in TASK_MODULES:
        assert get_task(name).name == name


def _declared_requirements() -> set[str]:
    """The distributions pyproject.toml asks for (dependencies and every extra), names normalised."""
    import re
    import tomllib

    project = tomllib.loads((PACKAGE.parent / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *(r for extra in project["optional-dependencies"].values() for r in extra)]
    return {re.split(r"[<>=!~\[; ]", requirement, maxsplit=1)[0].lower().replace("_", "-") for requirement in wanted}


def test_every_module_the_tests_import_is_a_declared_requirement():
    """A test importing a package that only comes along with another (click came with typer,
    then only with ray) passes in CI and fails in a fresh environment."""
    import sys
    from importlib.metadata import packages_distributions

    tests = Path(__file__).resolve().parent
    scripts = [path for folder in (tests, tests.parent / "benchmarks") for path in folder.glob("*.py")]
    local = {"atnbench", *(path.stem for path in scripts)}
    distributions = packages_distributions()
    declared = _declared_requirements()
    undeclared = {}
    for path in tests.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else []
            for top in {name.split(".")[0] for name in names} - local - set(sys.stdlib_module_names):
                if not {d.lower().replace("_", "-") for d in distributions.get(top, [top])} & declared:
                    undeclared.setdefault(top, []).append(path.name)
    assert not undeclared, f"imported by tests but not declared in pyproject.toml: {undeclared}"


def test_every_command_is_thin():
    """A command parses its flags and calls one function of its package: nothing in
    atnbench/cli runs over 60 lines (the sweep command was 189)."""
    long = []
    for path in (PACKAGE / "cli").glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno - node.lineno >= 60:
                long.append(f"{path.name}:{node.name} ({node.end_lineno - node.lineno + 1} lines)")
    assert not long, long
