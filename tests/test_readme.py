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
