"""Task presets: the shipped YAML files, layering, search order and validation errors."""

import textwrap
from pathlib import Path

import pytest

from atnbench import presets
from atnbench.config import ConfigError, build_config
from atnbench.presets import find_preset_file, list_task_presets, resolve_preset, search_dirs
from atnbench.tasks.lookup import load_task_preset

REPO = Path(__file__).resolve().parents[1]

MINIMAL = """\
task: adding
citation: "test"
default_T: 50
defaults: {hidden: 8, k: 3, steps_per_epoch: 10, epochs: 2}
per_T:
  60: {k: 7}
  70: {epochs: 3}
  80: {steps: 5}
variants:
  wide: {hidden: 16, k: 9}
  short: {steps: 4}
  slow: {steps_per_epoch: 100}
"""


def write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def away(tmp_path, monkeypatch):
    """Run from an empty folder, so only the package's own presets are found."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- shipped presets ---------------------------------------------------------------------------

def test_every_task_has_a_preset(away):
    from atnbench.tasks import task_names

    assert list_task_presets() == task_names()


@pytest.mark.parametrize("name", ["adding", "copying", "denoise"])
def test_shipped_presets_build_valid_configs(away, name):
    preset = load_task_preset(name)
    assert preset.task == name and preset.citation and preset.source.parent == REPO / "tasks"
    for T in [preset.default_T, *preset.per_T]:
        for variant in [None, *preset.variants]:
            config = build_config(resolve_preset(preset, T, variant))
            assert (config.task, config.T, config.variant) == (name, T, variant)


@pytest.mark.parametrize("name, T, expected", [
    ("adding", 100, dict(hidden=60, batch_size=50, optimizer="rmsprop", lr=1e-3, k=25, steps=20_000)),
    ("adding", 200, dict(k=5, steps=20_000)),
    ("copying", 100, dict(hidden=68, batch_size=128, optimizer="rmsprop", lr=2e-4, momentum=0.9, k=45, steps=4000)),
    ("copying", 200, dict(k=45, steps=4000)),
    ("denoise", 100, dict(hidden=100, batch_size=128, optimizer="adam", lr=1e-2, k=20, steps=10_000)),
    ("denoise", 200, dict(k=60, steps=10_000)),
])
def test_shipped_presets_match_the_paper(away, name, T, expected):
    resolved = resolve_preset(load_task_preset(name), T)
    assert {key: resolved[key] for key in expected} == expected
    assert resolved["steps"] // resolved["eval_every"] <= 100  # validation stays cheap


# Each protocol pinned to its source; the quotes are what tasks/*.yaml cite.
# copy_problem.py (github.com/vasily789/atn): "--lr', type=float, default=2e-4",
# "--iterations', type=int, default=4000", "torch.optim.RMSprop(model.parameters(), lr=args.lr,
# momentum=0.9)"; the paper, Sect. 4.1.1: "an RMSProp [22] optimizer with a learning rate of
# 10^-4" and "trained for 40 epochs" (no momentum).
COPYING_CODE = dict(optimizer="rmsprop", lr=2e-4, momentum=0.9, steps=4000, hidden=68, batch_size=128, k=45)
COPYING_TEXT = dict(optimizer="rmsprop", lr=1e-4, momentum=0.0, steps=4000, hidden=68, batch_size=128, k=45)
# ptb/main.py + ptb/model.py: "--max_length', type = int, default = '20'", "--when' ... default=[-1]",
# "args.tied = True" with the one layer "ninp if tie_weights" wide (--emsize default=200);
# Sect. 4.2.2: "a hidden size of 1000", "decay by a factor of 10 at epoch 80 and 90", "k value of 10".
PTB_CODE = dict(hidden=200, k=20, lr=1e-2, clip=3.0, batch_size=32, steps=150 * 720)
PTB_TEXT = dict(hidden=1000, k=10, lr=1e-2, clip=3.0, batch_size=32, steps=150 * 720)


@pytest.mark.parametrize("task, variant, expected", [
    ("copying", None, COPYING_CODE),
    ("copying", "paper-text", COPYING_TEXT),
    ("copying", "released-code", COPYING_CODE),  # the old name of what is now the default
    ("ptb-char", None, PTB_CODE),
    ("ptb-char", "paper-text", PTB_TEXT),
])
def test_protocols_are_pinned_to_their_sources(away, task, variant, expected):
    resolved = resolve_preset(load_task_preset(task), None, variant)
    assert {key: resolved[key] for key in expected} == expected
    schedule = (resolved.get("options") or {}).get("lr_schedule")
    if task == "ptb-char":  # the code never decays the learning rate; the text does at 80 and 90
        assert schedule == ({"milestones": [80, 90], "gamma": 0.1} if variant else None)


def test_an_alias_names_the_variant_it_became(away):
    from atnbench.run.runspec import resolve_run

    old = resolve_run("copying", {"norm": "ln"}, variant="released-code")
    assert old == resolve_run("copying", {"norm": "ln"})  # one run id, whatever the name
    assert old.variant is None
    assert resolve_run("copying", {"norm": "ln"}, variant="paper-text").variant == "paper-text"


def test_alias_mistakes_name_the_key(tmp_path):
    bad = MINIMAL + "aliases:\n  old: nope\n"
    with pytest.raises(ConfigError, match=r"'aliases\.old': expected null \(the defaults\) or a variant name"):
        load_task_preset(write(tmp_path, "mini.yaml", bad))
    clash = MINIMAL + "aliases:\n  wide: null\n"
    with pytest.raises(ConfigError, match=r"'aliases\.wide'"):
        load_task_preset(write(tmp_path, "mini2.yaml", clash))


# --- layering ----------------------------------------------------------------------------------

@pytest.fixture
def minimal(tmp_path):
    return load_task_preset(write(tmp_path, "mini.yaml", MINIMAL))


def test_defaults_then_per_T_then_variant(minimal):
    assert resolve_preset(minimal)["T"] == 50
    assert resolve_preset(minimal, 50)["k"] == 3
    assert resolve_preset(minimal, 60)["k"] == 7
    wide = resolve_preset(minimal, 60, "wide")
    assert (wide["k"], wide["hidden"], wide["variant"]) == (9, 16, "wide")


def test_epochs_become_steps(minimal):
    assert resolve_preset(minimal, 50)["steps"] == 20
    assert resolve_preset(minimal, 70)["steps"] == 30  # per_T epochs replace default epochs
    assert resolve_preset(minimal, 80)["steps"] == 5  # per_T steps replace default epochs
    assert resolve_preset(minimal, 50, "short")["steps"] == 4
    assert resolve_preset(minimal, 50, "slow")["steps"] == 200  # the final steps_per_epoch counts
    assert "epochs" not in resolve_preset(minimal, 50)


def test_unknown_variant_names_the_known_ones(minimal):
    with pytest.raises(ConfigError, match=r"mini\.yaml.*unknown variant 'fast'; known variants: short, slow, wide"):
        resolve_preset(minimal, 50, "fast")


def test_T_below_the_task_minimum(minimal):
    with pytest.raises(ConfigError, match="too short"):
        resolve_preset(minimal, 1)


# --- search order ------------------------------------------------------------------------------

def test_working_folder_overrides_the_package(tmp_path, monkeypatch):
    local = write(tmp_path / "tasks", "adding.yaml", MINIMAL)
    monkeypatch.chdir(tmp_path)
    assert load_task_preset("adding").source.resolve() == local.resolve()
    assert load_task_preset("adding").default_T == 50


def test_an_edited_preset_file_is_read_again(tmp_path):
    """Presets are read once per version of the file (a sweep resolves one for every run), and
    an edit is a new version."""
    path = write(tmp_path, "mini.yaml", MINIMAL)
    first = load_task_preset(path)
    assert load_task_preset(path) is first  # the same version: not parsed again
    write(tmp_path, "mini.yaml", MINIMAL.replace("default_T: 50", "default_T: 125"))
    assert load_task_preset(path).default_T == 125 and first.default_T == 50


def test_an_existing_path_wins(tmp_path, monkeypatch):
    write(tmp_path / "tasks", "adding.yaml", MINIMAL)
    monkeypatch.chdir(tmp_path)
    explicit = REPO / "tasks" / "adding.yaml"
    assert load_task_preset(explicit).source == explicit
    assert load_task_preset(str(explicit)).default_T == 100


def test_package_data_before_source_tree(tmp_path, monkeypatch):
    checkout = tmp_path / "checkout"
    write(checkout, "pyproject.toml", "")
    write(checkout / "tasks", "adding.yaml", MINIMAL)
    data = write(checkout / "atnbench" / "preset_data" / "tasks", "adding.yaml", MINIMAL)
    monkeypatch.setattr(presets, "PACKAGE_DIR", checkout / "atnbench")
    monkeypatch.chdir(tmp_path)
    assert search_dirs("tasks") == [tmp_path / "tasks", checkout / "atnbench/preset_data/tasks", checkout / "tasks"]
    assert find_preset_file("tasks", "adding") == data
    data.unlink()
    assert find_preset_file("tasks", "adding") == checkout / "tasks" / "adding.yaml"


def test_site_packages_parent_is_not_searched(tmp_path, monkeypatch):
    monkeypatch.setattr(presets, "PACKAGE_DIR", tmp_path / "site-packages" / "atnbench")
    assert tmp_path / "site-packages" / "sweeps" not in search_dirs("sweeps")


def test_missing_presets_and_bad_kinds(away):
    with pytest.raises(ConfigError, match="no tasks preset named 'nope'.*known: adding, copying, denoise"):
        load_task_preset("nope")
    with pytest.raises(ConfigError, match="nope.yaml: no such preset file"):
        load_task_preset("nope.yaml")
    with pytest.raises(ValueError, match="unknown preset kind"):
        find_preset_file("models", "adding")


# --- validation errors: one line naming the file and the key -----------------------------------

@pytest.mark.parametrize("text, key", [
    (MINIMAL + "optimiser: adam\n", "'optimiser': unknown top-level key"),
    (MINIMAL.replace("hidden: 8,", "hiden: 8,"), "'defaults.hiden': unknown setting"),
    (MINIMAL.replace("60: {k: 7}", "60: {kk: 7}"), "'per_T.60.kk': unknown setting"),
    (MINIMAL.replace("short: {steps: 4}", "short: {step: 4}"), "'variants.short.step': unknown setting"),
    (MINIMAL.replace("hidden: 8,", "T: 8,"), "'defaults.T': unknown setting"),
    (MINIMAL.replace("hidden: 8,", "lr: 1e-3,"), "'defaults.lr': expected float, got '1e-3' (YAML reads"),
    (MINIMAL.replace("hidden: 8,", "hidden: eight,"), "'defaults.hidden': expected int, got 'eight'"),
    (MINIMAL.replace("hidden: 8,", "clip: yes,"), "'defaults.clip': expected float or null, got True"),
    (MINIMAL.replace("hidden: 8,", "steps: 8,"), "'defaults.epochs': give epochs or steps, not both"),
    (MINIMAL.replace("task: adding", "task: adder"), "'task': unknown task 'adder'"),
    (MINIMAL.replace("default_T: 50", ""), "'default_T': missing"),
    (MINIMAL.replace("  60:", "  sixty:"), "'per_T.sixty': expected a positive integer T"),
    (MINIMAL + "default_T: 60\n", "duplicate key 'default_T'"),
    (MINIMAL.replace("{hidden: 8,", "{hidden: 8"), "invalid YAML at line 4"),
    ("- just\n- a list\n", "expected a mapping of keys (key: value lines) at the top level, got a list"),
    ("", "is empty (or only comments); expected a mapping of keys"),
    ("# only a comment\n", "is empty (or only comments); expected a mapping of keys"),
    ("adding\n", "at the top level, got a single text value"),
])
def test_validation_errors(tmp_path, text, key):
    path = write(tmp_path, "bad.yaml", text)
    with pytest.raises(ConfigError) as err:
        load_task_preset(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and key in message and "\n" not in message
