"""README.md opens with the two commands that set up and run; .ci/run runs the same tests."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands() -> list[str]:
    return re.findall(r"```bash\n(.+?)\n```", (ROOT / "README.md").read_text())[:2]


def test_readme_opens_with_setup_and_run_and_setup_and_test():
    run, test = readme_commands()
    for command in (run, test):
        assert "pip install torch==2.13.0" in command  # the pinned CPU build before anything else
    assert "atnbench run" in run
    assert "pytest" in test


def test_ci_runs_the_readme_test_command():
    test = readme_commands()[1]
    pytest_command = test.split("&&")[-1].strip()
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1].strip() == pytest_command
    extras = re.search(r"pip install -e '\.\[([a-z,]+)\]'", test).group(1)
    assert f"-e '.[{extras}]'" in (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci]
    for step in (part.strip() for part in test.split("&&")):
        if step.startswith("atnbench "):  # a set-up step of the README's (the C++ build) runs in CI too
            assert step in ci_lines, step


DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "results" / "README.md",
        *sorted((ROOT / "examples").glob("*/README.md"))]


def test_the_readme_is_short_and_every_link_in_the_docs_resolves():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 250
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
            if "://" not in target:
                assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)} links to missing {target}"


def _shell_commands(text: str):
    """Every `atnbench ...` command in the bash blocks (after the set-up lines), comments cut."""
    for block in re.findall(r"```(?:bash)?\n(.+?)\n```", text, re.S):
        for line in block.splitlines():
            for part in line.split("#", 1)[0].split("&&"):
                words = part.split()
                if words[:1] == ["atnbench"]:
                    yield words[1:]


def test_every_command_and_flag_the_docs_show_exists():
    """The commands in README.md and docs/ are atnbench's: each subcommand resolves and each
    --flag is one of its options (a renamed flag fails here, not in a reader's terminal)."""
    from typer.main import get_command

    from atnbench.cli import app

    root = get_command(app)
    checked = 0
    for doc in DOCS:
        for words in _shell_commands(doc.read_text()):
            command, ctx = root, root.make_context("atnbench", ["--help"], resilient_parsing=True)
            while hasattr(command, "get_command") and words and not words[0].startswith("-"):
                found = command.get_command(ctx, words[0])
                if found is None:
                    break
                command, words = found, words[1:]
            assert command is not root, f"{doc.name}: unknown command in atnbench {' '.join(words)}"
            flags = {name for param in command.params for name in getattr(param, "opts", []) + getattr(
                param, "secondary_opts", [])}
            for word in words:
                if word.startswith("--"):
                    assert word.split("=")[0] in flags, f"{doc.name}: atnbench {command.name} has no {word}"
            checked += 1
    assert checked > 40


def test_every_python_example_in_the_docs_runs():
    blocks = [(doc, code) for doc in DOCS for code in re.findall(r"```python\n(.+?)\n```", doc.read_text(), re.S)]
    assert len(blocks) >= 2
    for doc, code in blocks:
        exec(compile(code, str(doc.relative_to(ROOT)), "exec"), {})
