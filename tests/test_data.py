"""Real-data tasks: loaders on tiny fixture files (read through `datasets`, local files only),
their data sources, the learning-rate schedule / ASGD switch, presets, and the CLI end to end."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from atnbench.config import ConfigError
from atnbench.data import DataUnavailable
from atnbench.presets import resolve_preset
from atnbench.tasks.lookup import load_task_preset
from atnbench.run.runspec import resolve_run
from atnbench.store import ResultsStore
from helpers import invoke, whole_and_resumed
from atnbench.evidence.identity import run_id_of

datasets = pytest.importorskip("datasets")
WORDS = "the market fell as investors sold shares of bank stocks and bonds <unk> n't".split()


@pytest.fixture(autouse=True)
def isolated(tmp_path, monkeypatch):
    """`datasets` caches into tmp_path, never the Hub; no ATNBENCH_DATA from the environment."""
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data-root"))  # not ~/.cache/atnbench/data
    datasets.disable_progress_bars()


# --- fixtures: a few hundred characters of text, a few dozen 28 x 28 images ----------------------

def word_lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 7))) for _ in range(n)]


def write_ptb(folder, char_level=True):
    folder.mkdir(parents=True, exist_ok=True)
    for part, n, seed in (("train", 16, 0), ("valid", 5, 1), ("test", 5, 2)):
        lines = word_lines(n, seed)
        if char_level:  # Mikolov's spelling: characters separated by spaces, _ between words
            text = "\n".join(" ".join("_".join(line.split())) for line in lines)
            (folder / f"ptb.char.{part}.txt").write_text(text + "\n")
        else:
            (folder / f"ptb.{part}.txt").write_text("".join(f" {line} \n" for line in lines))
    return folder


def digit_images(n: int) -> tuple[np.ndarray, np.ndarray]:
    labels = np.arange(n) % 10
    images = np.zeros((n, 28, 28), np.uint8)
    for i, label in enumerate(labels):  # a bar whose height tells the digit
        images[i, 2 + 2 * label: 6 + 2 * label, 4:24] = 200 + i % 50
    return images, labels


def mnist_split(n: int, as_arrays: bool = False):
    images, labels = digit_images(n)
    if as_arrays:  # 28 x 28 nested lists instead of PNG images
        return datasets.Dataset.from_dict({"image": images.tolist(), "label": labels.tolist()})
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(num_classes=10)})
    return datasets.Dataset.from_dict({"image": list(images), "label": labels.tolist()}, features=features)


def write_mnist(folder, layout="parquet"):
    folder.mkdir(parents=True, exist_ok=True)
    splits = {"train": mnist_split(40, as_arrays=layout == "arrays"), "test": mnist_split(12, as_arrays=layout == "arrays")}
    if layout == "save_to_disk":
        datasets.DatasetDict(splits).save_to_disk(str(folder))
    elif layout == "hub":  # what `hf download ylecun/mnist --repo-type dataset --local-dir` writes
        (folder / "mnist").mkdir()
        for split, ds in splits.items():
            ds.to_parquet(str(folder / "mnist" / f"{split}-00000-of-00001.parquet"))
    else:
        for split, ds in splits.items():
            ds.to_parquet(str(folder / f"{split}.parquet"))
    return folder


def wikitext_rows(n: int, seed: int) -> list[str]:
    return ["" if i % 4 == 0 else f" {line} \n" for i, line in enumerate(word_lines(n, seed))]


def write_wikitext(folder, layout="hub"):
    parts = {"train": ("train", 14, 0), "validation": ("valid", 6, 1), "test": ("test", 6, 2)}
    if layout == "hub":
        (folder / "wikitext-2-v1").mkdir(parents=True)
        for split, (_, n, seed) in parts.items():
            datasets.Dataset.from_dict({"text": wikitext_rows(n, seed)}).to_parquet(
                str(folder / "wikitext-2-v1" / f"{split}-00000-of-00001.parquet"))
    else:  # the original archive's wiki.*.tokens
        folder.mkdir(parents=True)
        for split, (part, n, seed) in parts.items():
            (folder / f"wiki.{part}.tokens").write_text("".join(row if row else "\n" for row in wikitext_rows(n, seed)))
    return folder


def write_imdb(folder):
    folder.mkdir(parents=True)
    rng = random.Random(3)
    good, bad = "great wonderful loved best film".split(), "awful boring hated worst film".split()
    for split, n in (("train", 40), ("test", 10)):
        labels = [i % 2 for i in range(n)]
        texts = [" ".join(rng.choice(good if y else bad) for _ in range(rng.randint(2, 9))) + "<br /><br />Don't!"
                 for y in labels]
        datasets.Dataset.from_dict({"text": texts, "label": labels}).to_parquet(str(folder / f"{split}.parquet"))
    return folder


# --- loaders ----------------------------------------------------------------------------------

def test_ptb_char_loader_yields_character_ids_and_a_stable_cached_vocabulary(tmp_path):
    from atnbench.data.ptb import load_ptb_char

    folder = write_ptb(tmp_path / "ptb")
    ids, vocab = load_ptb_char({"data_dir": str(folder)})
    assert set(ids) == {"train", "validation", "test"}
    for stream in ids.values():
        assert stream.dtype == torch.int64 and stream.dim() == 1 and 0 <= stream.min() and stream.max() < len(vocab)
    assert vocab == sorted(vocab) and "<eos>" in vocab and "_" in vocab
    first = word_lines(16, 0)[0]
    decoded = [vocab[i] for i in ids["train"][: len("_".join(first.split())) + 1]]
    assert decoded == list("_".join(first.split())) + ["<eos>"]
    cached = json.loads((folder / "ptb-char.vocab.json").read_text())
    assert cached["tokens"] == vocab
    again_ids, again = load_ptb_char({"data_dir": str(folder)})  # from the cached vocabulary
    assert again == vocab and all(torch.equal(ids[s], again_ids[s]) for s in ids)
    (folder / "ptb-char.vocab.json").unlink()  # rebuilt: the same, as it is sorted
    assert load_ptb_char({"data_dir": str(folder)})[1] == vocab
    # an edited cache (QA: its tokens reversed, its fingerprint kept) gave other numbers under the same
    # run id; the tokens' digest kept beside them tells, and the vocabulary is built again from the data
    edited = json.loads((folder / "ptb-char.vocab.json").read_text())
    edited["tokens"].reverse()
    (folder / "ptb-char.vocab.json").write_text(json.dumps(edited))
    again_ids, again = load_ptb_char({"data_dir": str(folder)})
    assert again == vocab and all(torch.equal(ids[s], again_ids[s]) for s in ids)
    assert json.loads((folder / "ptb-char.vocab.json").read_text())["tokens"] == vocab  # and written again


def test_a_file_rewritten_with_its_old_mtime_is_read_anew(tmp_path):
    """QA: `datasets` keys its cache of a local file by path and mtime; a file rewritten with its
    old mtime (cp -p, rsync -t) handed a run the rows cached from its earlier bytes, past the
    SHA-256 checks of the data root and of --data-dir's id."""
    import os

    from atnbench.data.ptb import load_ptb_char

    folder = write_ptb(tmp_path / "ptb")
    valid = folder / "ptb.char.valid.txt"
    first = load_ptb_char({"data_dir": str(folder)})[0]["validation"]
    stamp = valid.stat()
    valid.write_text(valid.read_text().split("\n", 1)[1])  # its first line cut, its mtime put back
    os.utime(valid, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    cut = load_ptb_char({"data_dir": str(folder)})[0]["validation"]
    assert len(cut) < len(first)


def test_a_folder_name_with_glob_characters_is_taken_literally(tmp_path):
    """QA: "r[12]/ptb" was a pattern: the files of r1/ptb were read (under r[12]'s content id)."""
    from atnbench.data.ptb import load_ptb_char

    write_ptb(tmp_path / "r1" / "ptb")
    (tmp_path / "r1" / "ptb" / "ptb.char.valid.txt").write_text("x y\n")
    literal = write_ptb(tmp_path / "r[12]" / "ptb")
    ids, vocab = load_ptb_char({"data_dir": str(literal)})
    assert "x" not in vocab and len(ids["validation"]) > 3


def test_a_split_named_twice_in_options_data_files_is_refused(tmp_path):
    """QA: `--data-files` refused it, a config file's options.data_files kept the last one."""
    from atnbench.data.ptb import load_ptb_char

    folder = write_ptb(tmp_path / "ptb")
    files = {"train": str(folder / "ptb.char.train.txt"), "validation": str(folder / "ptb.char.valid.txt"),
             "test": str(folder / "ptb.char.test.txt"), "TEST": str(folder / "ptb.char.valid.txt")}
    with pytest.raises(DataUnavailable, match=r"data_files names the test split twice \('TEST'\)"):
        load_ptb_char({"data_files": files})


def test_a_vocabulary_cache_that_cannot_be_written_leaves_no_temporary_file(tmp_path):
    from atnbench.data.ptb import load_ptb_char

    folder = write_ptb(tmp_path / "ptb")
    (folder / "ptb-char.vocab.json").mkdir()  # a folder where the cache goes
    load_ptb_char({"data_dir": str(folder)})
    assert not [path.name for path in folder.iterdir() if ".tmp" in path.name]


def test_ptb_word_level_files_give_the_same_characters(tmp_path):
    from atnbench.data.ptb import load_ptb_char

    chars, char_vocab = load_ptb_char({"data_dir": str(write_ptb(tmp_path / "char"))})
    words, word_vocab = load_ptb_char({"data_dir": str(write_ptb(tmp_path / "word", char_level=False))})
    assert word_vocab == char_vocab and all(torch.equal(chars[s], words[s]) for s in chars)


def test_explicit_data_files_and_a_stale_vocabulary_is_rebuilt(tmp_path):
    from atnbench.data.ptb import load_ptb_char

    folder = write_ptb(tmp_path / "ptb")
    files = {"train": str(folder / "ptb.char.train.txt"), "val": str(folder / "ptb.char.valid.txt"),
             "test": str(folder / "ptb.char.test.txt")}
    ids, vocab = load_ptb_char({"data_files": files})
    assert "z" not in vocab
    (folder / "ptb.char.train.txt").write_text("z z _ z\n" + (folder / "ptb.char.train.txt").read_text())
    ids2, vocab2 = load_ptb_char({"data_files": files})
    assert "z" in vocab2 and vocab2 == sorted(vocab2)


@pytest.mark.parametrize("layout", ["parquet", "hub", "save_to_disk", "arrays"])
def test_mnist_loader_reads_every_local_layout(tmp_path, layout):
    from atnbench.data.mnist import load_mnist

    data = load_mnist({"data_dir": str(write_mnist(tmp_path / "mnist", layout))})
    images, labels = digit_images(40)
    x, y = data["train"]
    assert x.shape == (40, 784) and x.dtype == torch.float32 and y.shape == (40,) and y.dtype == torch.int64
    assert torch.allclose(x, torch.from_numpy(images.reshape(40, 784) / 255.0).float())
    assert torch.equal(y, torch.from_numpy(labels)) and data["test"][0].shape == (12, 784)


def test_wikitext_hub_layout_and_original_token_files_agree(tmp_path):
    from atnbench.data.wikitext import load_wikitext2

    hub_ids, hub_vocab = load_wikitext2({"data_dir": str(write_wikitext(tmp_path / "a", "hub"))})
    txt_ids, txt_vocab = load_wikitext2({"data_dir": str(write_wikitext(tmp_path / "b", "tokens"))})
    assert hub_vocab == txt_vocab == sorted(txt_vocab) and "<eos>" in hub_vocab
    assert all(torch.equal(hub_ids[s], txt_ids[s]) for s in hub_ids)
    rows = wikitext_rows(14, 0)
    assert hub_ids["train"].numel() == sum(len(row.split()) + 1 for row in rows)  # words + <eos> per line
    assert (tmp_path / "a" / "wikitext-2-v1.vocab.json").is_file()


def test_imdb_loader_tokenizes_and_ranks_the_vocabulary(tmp_path):
    from atnbench.data.imdb import load_imdb, tokenize

    assert tokenize("Great film!<br /><br />Don't") == ["great", "film", "!", "don't"]
    data, vocab = load_imdb({"data_dir": str(write_imdb(tmp_path / "imdb"))})
    assert vocab[:2] == ["<pad>", "<unk>"] and "film" in vocab and "<br" not in "".join(vocab)
    reviews, labels = data["train"]
    assert len(reviews) == 40 and labels == [i % 2 for i in range(40)]
    assert all(isinstance(i, int) and 2 <= i < len(vocab) for review in reviews for i in review)
    assert load_imdb({"data_dir": str(tmp_path / "imdb")})[1] == vocab


def test_atnbench_data_environment_folder(tmp_path, monkeypatch):
    from atnbench.data.ptb import load_ptb_char

    write_ptb(tmp_path / "root" / "ptb")
    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "root"))
    assert len(load_ptb_char({})[1]) > 10


def test_each_shipped_real_data_run_names_the_data_root_copy_it_reads():
    """The copy a run is checked against before it reads the data root: the one its loader reads
    (ptb-word and ptb-char share a folder, not files; smnist-noise reads full MNIST unless its
    variant names the subset); a run given its own data reads none there."""
    from atnbench.data.catalog import read_from_root

    def read(task, variant=None, **options):
        preset = resolve_preset(load_task_preset(task), variant=variant)
        dataset = read_from_root(task, {**preset.get("options", {}), **options})
        return dataset and dataset.name

    assert [read(task) for task in ("ptb-char", "ptb-word", "smnist-noise", "wikitext2", "imdb")] == \
        ["ptb-char", "ptb", "mnist", "wikitext2", "imdb"]
    assert read("smnist-noise", "mnist-5k") == "mnist-5k"
    assert read("ptb-char", data_dir="elsewhere") is None and read("ptb-char", data_files="train=a.txt") is None
    assert read("adding") is None and read("copying") is None
    assert read("imdb", user_task={"problem": "sequence-classification"}) is None  # a user's task reads its own


# --- missing data: one line naming the files ------------------------------------------------------

def test_missing_files_name_what_to_put_where(tmp_path):
    from atnbench.data.mnist import load_mnist
    from atnbench.data.ptb import load_ptb_char

    (tmp_path / "empty").mkdir()
    with pytest.raises(DataUnavailable, match=r"ptb\.char\.train\.txt.*simple-examples\.tgz") as err:
        load_ptb_char({"data_dir": str(tmp_path / "empty")})
    assert "\n" not in str(err.value)
    with pytest.raises(DataUnavailable, match=r"train\.parquet.*save_to_disk"):
        load_mnist({"data_dir": str(tmp_path / "empty")})
    with pytest.raises(DataUnavailable, match="not found: .*nope.txt"):
        load_ptb_char({"data_files": {"train": str(tmp_path / "nope.txt"), "validation": "x", "test": "y"}})
    folder = write_ptb(tmp_path / "ptb")
    (folder / "ptb.char.valid.txt").write_text("")  # was `datasets`' "Instruction "validation" corresponds to no data!"
    with pytest.raises(DataUnavailable) as err:
        load_ptb_char({"data_dir": str(folder)})
    assert str(err.value) == f"char-level PTB: {folder / 'ptb.char.valid.txt'} is empty"


def test_unreachable_hub_says_which_command_fetches_the_data(monkeypatch):
    from atnbench.data.wikitext import load_wikitext2

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'Salesforce/wikitext' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(DataUnavailable) as err:
        load_wikitext2({})
    message = str(err.value)
    assert "\n" not in message and "OfflineModeIsEnabled" in message
    assert "load_dataset('Salesforce/wikitext', 'wikitext-2-v1').save_to_disk('wikitext-2')" in message


def test_a_hub_copy_out_of_reach_is_said_in_the_projects_words_only(tmp_path, monkeypatch):
    """The run's line was the loader's, then Python's "(FileNotFoundError: Dataset
    Salesforce/wikitext is not cached in None)" after it (QA)."""
    def uncached(*args, **kwargs):
        try:
            raise FileNotFoundError("Dataset Salesforce/wikitext is not cached in None")
        except FileNotFoundError as cause:
            raise ConnectionError("Couldn't reach 'Salesforce/wikitext' on the Hub (OfflineModeIsEnabled)") from cause

    monkeypatch.setattr(datasets, "load_dataset", uncached)
    result = invoke("run", "wikitext2", "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip().endswith("ATNBENCH_DATA to the folder holding wikitext-2/")
    assert "FileNotFoundError" not in result.stderr and not (tmp_path / "r.db").exists()


@pytest.mark.parametrize("manifest, reason", [("{}", "its dataset_dict.json has no 'splits' entry"),
                                              ('{"splits": ["train"]}', "No such files: ")])
def test_a_broken_save_to_disk_copy_is_named_as_such(tmp_path, manifest, reason):
    """A dataset_dict.json without its splits ended the line in Python's words: `'splits'` (QA)."""
    folder = tmp_path / "wikitext-2"
    folder.mkdir()
    (folder / "dataset_dict.json").write_text(manifest)
    result = invoke("run", "wikitext2", "--data-dir", folder, "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.startswith(f"error: wikitext2 data (--data-dir {folder}): WikiText-2: {folder} is not a "
                                    f"whole datasets save_to_disk copy ({reason}")


@pytest.mark.parametrize("task, expected", [("ptb-char", "ptb.char.train.txt"), ("smnist-noise", "train.parquet"),
                                            ("wikitext2", "wikitext-2-v1/train-*.parquet"),
                                            ("imdb", "plain_text/train-*.parquet")])
def test_cli_missing_data_is_one_line_and_exit_2(tmp_path, task, expected):
    (tmp_path / "empty").mkdir()
    result = invoke("run", task, "--data-dir", tmp_path / "empty", "--store", tmp_path / "r.db")
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2 and len(lines) == 1 and "Traceback" not in result.output
    assert expected in lines[0]


def test_cli_data_flags_are_for_real_data_tasks(tmp_path):
    result = invoke("run", "adding", "--data-dir", tmp_path, "--store", tmp_path / "r.db")
    assert result.exit_code == 2 and "real-data tasks" in result.output
    bad = invoke("run", "ptb-char", "--data-files", "train", "--store", tmp_path / "r.db")
    assert bad.exit_code == 2 and "SPLIT=PATH" in bad.output
    # QA: the last of two files for one split won without a word (test scored on validation's file)
    twice = invoke("run", "ptb-char", "--data-files", "train=a.txt,test=b.txt,val=c.txt,validation=d.txt",
                   "--store", tmp_path / "r.db")
    assert twice.exit_code == 2 and not (tmp_path / "r.db").exists()
    assert twice.stderr.strip() == ("error: --data-files names the validation split twice ('validation=d.txt'); "
                                    "give each split one file")


# --- data sources --------------------------------------------------------------------------------

def lm_config(tmp_path, **overrides):
    folder = write_ptb(tmp_path / "ptb") if not (tmp_path / "ptb").exists() else tmp_path / "ptb"
    values = dict(T=7, hidden=8, batch_size=3, steps=12, eval_every=3, k=3, options={"data_dir": str(folder)})
    values.update(overrides)
    return resolve_run("ptb-char", values)


def test_lm_source_reads_the_stream_in_carried_segments(tmp_path):
    from atnbench.tasks.source import make_source
    from atnbench.tasks import get_task

    config = lm_config(tmp_path)
    source = make_source(get_task("ptb-char"), config, torch.device("cpu"))
    assert source.splits == ("val", "test") and source.vocab_size == source.output_size == len(source.vocab)
    assert source.input_size == 200  # the preset's embedding option survives --data-dir
    columns = source.train
    batches = [source.train_batch() for _ in range(source.steps_per_epoch)]
    assert [b.carry for b in batches] == [False] + [True] * (len(batches) - 1)
    assert source.epoch == 1.0 and source.train_batch().carry is False
    xs = torch.cat([b.x for b in batches])
    ys = torch.cat([b.y for b in batches])
    assert torch.equal(xs, columns[:-1]) and torch.equal(ys, columns[1:])  # every token once, targets shifted
    assert batches[0].x.shape == (7, 3) and batches[0].x.dtype == torch.int64
    evals = list(source.eval_batches("val"))
    assert [b.carry for b in evals][:2] == [False, True]
    assert sum(b.y.numel() for b in evals) == (source.eval_data["val"].shape[0] - 1) * 3


def test_smnist_source_noise_permutation_and_rows(tmp_path):
    from atnbench.tasks.source import make_source
    from atnbench.tasks import get_task

    folder = write_mnist(tmp_path / "mnist")
    task = get_task("smnist-noise")

    def source(T=784, **options):
        config = resolve_run("smnist-noise", dict(T=T, batch_size=5, val_samples=3, options={"data_dir": str(folder), **options}))
        return make_source(task, config, torch.device("cpu"))

    plain = source()
    batch = plain.train_batch()
    assert batch.x.shape == (784, 5, 1) and batch.x.dtype == torch.float32 and batch.y.shape == (5,)
    assert len(plain.data["val"][1]) == 3 and len(plain.data["train"][1]) == 36  # 4 held out, 3 scored
    clean = torch.from_numpy(digit_images(12)[0].reshape(12, 784) / 255.0).float()
    noise = plain.data["test"][0].squeeze(-1) - clean
    assert noise.var().item() == pytest.approx(0.1, rel=0.05)
    assert torch.equal(source().data["test"][0], plain.data["test"][0])  # fixed noise: same seed, same data
    rows = source(T=28, noise_var=0.0)
    assert rows.train_batch().x.shape == (28, 5, 28) and rows.input_size == 28
    assert torch.allclose(rows.data["test"][0].reshape(12, 784), clean)
    permuted, again = source(noise_var=0.0, permute=True), source(noise_var=0.0, permute=True)
    order = permuted.data["test"][0].squeeze(-1)
    assert torch.equal(order, again.data["test"][0].squeeze(-1)) and not torch.equal(order, clean)
    assert torch.equal(order.sort(dim=1).values, clean.sort(dim=1).values)  # the same pixels, reordered
    with pytest.raises(ConfigError, match="must divide 784"):
        source(T=100)


def test_a_setting_the_task_cannot_take_is_not_called_a_problem_of_the_data(tmp_path, monkeypatch):
    """`run smnist-noise --T 20` said "smnist-noise data (the data root ...; `atnbench data verify`
    checks it): T=20 must divide 784", pointing at the data, which `data verify` passed (QA)."""
    from helpers import invoke

    monkeypatch.setenv("ATNBENCH_DATA", str(tmp_path / "no-data"))  # before any file is read
    result = invoke("run", "smnist-noise", "--T", "20", "--iters", "2", "--store", tmp_path / "s.db")
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == "error: smnist-noise: T=20 must divide 784 (784 = one pixel per step; 28 = row by row)"


def test_imdb_source_pads_on_the_right_with_lengths_and_takes_a_fraction(tmp_path):
    from atnbench.tasks.imdb import pad_right
    from atnbench.tasks.source import make_source
    from atnbench.tasks import get_task

    ids, lengths = pad_right([[5, 6], [1, 2, 3, 4], []], 3)
    assert ids.tolist() == [[5, 6, 0], [2, 3, 4], [0, 0, 0]] and lengths.tolist() == [2, 3, 1]
    folder = write_imdb(tmp_path / "imdb")
    config = resolve_run("imdb", dict(T=6, batch_size=4, variant="bln-20pct", options={"data_dir": str(folder)}))
    assert config.options["train_fraction"] == 0.2 and config.options["embedding"] == 128
    source = make_source(get_task("imdb"), config, torch.device("cpu"))
    assert len(source.data["train"][1]) == 8 and len(source.data["test"][1]) == 10  # 20% of 40; whole test
    batch = source.train_batch()
    assert batch.x.shape == (6, 4) and batch.x.dtype == torch.int64 and batch.y.shape == (4,)
    assert batch.lengths.shape == (4,) and 1 <= int(batch.lengths.min()) and int(batch.lengths.max()) <= 6
    assert len(set(source.lengths["train"].tolist())) > 1  # the reviews have different lengths
    for row, n in zip(batch.x.t(), batch.lengths):
        assert row[n:].eq(0).all() and row[:n].ne(0).all()  # tokens first, then <pad>
    assert all(len(b.lengths) == len(b.y) for b in source.eval_batches("test"))
    assert source.vocab_size > 2 and source.input_size == 128


@pytest.mark.parametrize("norm", ("ln", "atn", "bn", "atn-bn"))
def test_imdb_model_reads_each_review_alone(tmp_path, norm):
    """The IMDB task passes lengths to the model: in evaluation (population statistics for the
    batch norms, trained on a padded batch) the batch's scores and loss equal those of each
    review run alone, unpadded."""
    from atnbench.tasks import get_task
    from atnbench.tasks.source import make_source
    from atnbench.run.train import build_model, run_model, task_loss

    folder = write_imdb(tmp_path / "imdb")
    config = resolve_run("imdb", dict(T=12, batch_size=6, hidden=8, norm=norm, options={"data_dir": str(folder)}))
    task = get_task("imdb")
    source = make_source(task, config, torch.device("cpu"))
    torch.manual_seed(0)
    model = build_model(config, source).double()
    batch = source.train_batch()
    assert len(set(batch.lengths.tolist())) > 1
    run_model(model.train(), batch, None)  # a training pass: population statistics from valid steps
    model.eval()
    logits, _ = run_model(model, batch, None)
    loss = task_loss(task, logits, batch.y, batch.lengths)
    alone = []
    for b, n in enumerate(batch.lengths.tolist()):
        out, _ = model(batch.x[:n, b:b + 1])
        alone.append(out[-1, 0])
    alone = torch.stack(alone)
    assert torch.allclose(logits.gather(0, (batch.lengths - 1).view(1, -1, 1).expand(1, -1, 2))[0], alone,
                          rtol=0, atol=1e-10)
    assert loss.item() == pytest.approx(torch.nn.functional.cross_entropy(alone, batch.y).item(), abs=1e-10)


# --- learning-rate schedule and the ASGD switch ----------------------------------------------------

class Counting:
    epoch = 0.0


def scheduled(options, lr=1.0, budget=1.0):
    from atnbench.run import schedule

    model = torch.nn.Linear(2, 1)
    config = resolve_run("adding", dict(T=4, lr=lr, optimizer="sgd", options=options), budget=budget)
    source = Counting()
    return model, source, schedule.wrap(config, torch.optim.SGD(model.parameters(), lr=lr), model.parameters(), source)


def test_lr_drops_at_the_milestone_epochs():
    model, source, opt = scheduled({"lr_schedule": {"milestones": [2, 3], "gamma": 0.1}})
    lrs = []
    for epoch in (0.5, 1.99, 2.0, 2.5, 3.0, 7.0):
        source.epoch = epoch
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        lrs.append(opt.param_groups[0]["lr"])
    assert lrs == pytest.approx([1.0, 1.0, 0.1, 0.1, 0.01, 0.01])
    _, source, shrunk = scheduled({"lr_schedule": {"milestones": [2, 3]}}, budget=0.5)
    assert shrunk.milestones == [1.0, 1.5]


def test_nonmonotone_switch_to_asgd_and_averaged_evaluation():
    from atnbench.run import schedule

    model, _, opt = scheduled({"asgd_switch": {"nonmono": 2}})
    losses = [5.0, 4.0, 3.0, 3.5, 2.9, 3.2]  # 3.2 > min(5, 4, 3): the switch
    for i, loss in enumerate(losses):
        schedule.evaluated(opt, loss)
        assert isinstance(opt.inner, torch.optim.ASGD) == (i == 5)
    weights = []
    for _ in range(3):
        opt.zero_grad()
        model(torch.ones(1, 2)).sum().backward()
        opt.step()
        weights.append(model.weight.detach().clone())
    with schedule.eval_weights(opt):  # torch's ASGD (as AWD-LSTM's) averages the iterates after the first
        assert torch.allclose(model.weight, torch.stack(weights[1:]).mean(0))
    assert torch.equal(model.weight, weights[-1])
    restored = scheduled({"asgd_switch": {"nonmono": 2}})[2]
    restored.load_state_dict(opt.state_dict())
    assert isinstance(restored.inner, torch.optim.ASGD) and restored.history == opt.history


# --- end to end ----------------------------------------------------------------------------------

def run_and_read(store, *args):
    """`atnbench run ARGS --store STORE --json`, then the run's record, stored row and curve."""
    result = invoke("run", *args, "--store", store, "--json")
    assert result.exit_code == 0, result.output
    record = json.loads(result.stdout)
    with ResultsStore(store, create=False) as results:
        return record, results.get_run(record["run_id"]), results.curve(record["run_id"])


def test_cli_ptb_char_run_records_bpc(tmp_path):
    folder = write_ptb(tmp_path / "ptb")
    store = tmp_path / "r.db"
    record, row, curve = run_and_read(store, "ptb-char", "--data-dir", folder, "--T", "10", "--hidden", "8",
                                      "--batch-size", "4", "--iters", "6", "--eval-every", "3", "--k", "3")
    assert record["status"] == "done" and record["metric"] == "bpc"
    assert row.config["options"]["data_dir"] == str(folder) and row.config["options"]["embedding"] == 200
    assert [p.step for p in curve] == [3, 6]
    for p in curve:
        assert p.metrics["val_bpc"] == pytest.approx(p.val_loss / math.log(2))
        assert p.metrics["test_bpc"] == pytest.approx(p.metrics["test_loss"] / math.log(2))
    assert row.summary["val_bpc"] == min(p.metrics["val_bpc"] for p in curve)
    chosen = min(curve, key=lambda p: p.val_loss)  # the test split never selects: at validation's pick
    assert row.summary["test_bpc"] == chosen.metrics["test_bpc"] and row.summary["best_step"] == chosen.step


def test_cli_smnist_noise_run_records_accuracy(tmp_path):
    folder = write_mnist(tmp_path / "mnist")
    store = tmp_path / "r.db"
    record, row, curve = run_and_read(store, "smnist-noise", "--data-dir", folder, "--T", "28", "--hidden", "8",
                                      "--batch-size", "6", "--iters", "4", "--eval-every", "2", "--val-samples", "4")
    assert row.status == "done" and row.summary["metric"] == "accuracy"
    assert row.config["eps"] == 1.0 and row.config["bias_inside"] is False and row.config["k"] == 10
    for p in curve:
        assert 0 <= p.metrics["val_accuracy"] <= 1 and 0 <= p.metrics["test_accuracy"] <= 1
        assert p.metrics["test_accuracy"] * 12 == pytest.approx(round(p.metrics["test_accuracy"] * 12))
    assert row.summary["test_accuracy"] == min(curve, key=lambda p: p.val_loss).metrics["test_accuracy"]
    assert row.summary["baseline"] == pytest.approx(math.log(10))


def test_cli_wikitext2_and_imdb_runs(tmp_path):
    wiki = invoke("run", "wikitext2", "--data-dir", write_wikitext(tmp_path / "wt"), "--T", "6", "--hidden", "8",
                  "--batch-size", "2", "--iters", "3", "--eval-every", "3", "--lr", "1", "--k", "2",
                  "--store", tmp_path / "r.db", "--json")
    assert wiki.exit_code == 0, wiki.output
    record = json.loads(wiki.stdout)
    assert record["val_ppl"] == pytest.approx(math.exp(record["min_val_loss"])) and record["test_ppl"] > 1
    imdb = invoke("run", "imdb", "--data-dir", write_imdb(tmp_path / "imdb"), "--T", "8", "--hidden", "8",
                  "--batch-size", "4", "--iters", "3", "--eval-every", "3", "--store", tmp_path / "r.db", "--json")
    assert imdb.exit_code == 0, imdb.output
    assert 0 <= json.loads(imdb.stdout)["test_accuracy"] <= 1


def test_wikitext2_model_has_awd_lstm_shape(tmp_path):
    from atnbench.tasks import get_task
    from atnbench.tasks.source import make_source
    from atnbench.run.train import build_model

    config = resolve_run("wikitext2", dict(T=5, hidden=12, batch_size=2, k=2,
                                           options={"data_dir": str(write_wikitext(tmp_path / "wt")), "embedding": 6}))
    source = make_source(get_task("wikitext2"), config, torch.device("cpu"))
    model = build_model(config, source)
    sizes = [(rnn.input_size, rnn.hidden_size) for rnn in model.rnns]
    assert sizes == [(6, 12), (12, 12), (12, 6)] and model.head.weight is model.embed.weight
    batch = source.train_batch()
    logits, state = model(batch.x)
    assert logits.shape == (5, 2, source.vocab_size) and len(state) == 3


def test_resumed_carried_state_lm_run_equals_uninterrupted(tmp_path):
    # 12 steps over ~2 passes, the state (ATN window included) carried across segments, the lr
    # dropping at epoch 1: the checkpoint must restore position, state and schedule exactly.
    config = lm_config(tmp_path, norm="atn", options={"data_dir": str(tmp_path / "ptb"),
                                                      "lr_schedule": {"milestones": [1], "gamma": 0.1}})
    whole, whole_curve, resumed, resumed_curve = whole_and_resumed(config, tmp_path, kill_at=8)
    assert resumed["status"] == "done" and resumed_curve == whole_curve
    assert resumed["test_bpc"] == whole["test_bpc"]


# --- presets ------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    # the authors' released ptb/main.py (tasks/ptb-char.yaml; the text's 1000 units and k=10 are variant paper-text)
    ("ptb-char", dict(T=220, hidden=200, layers=1, batch_size=32, optimizer="adam", lr=1e-2, clip=3.0, k=20,
                      steps=150 * 720)),
    ("wikitext2", dict(T=70, hidden=1150, layers=3, batch_size=32, optimizer="sgd", lr=30.0, momentum=0.0,
                       clip=0.25, k=25, steps=500 * 933)),
    ("ptb-word", dict(T=70, hidden=1150, layers=3, batch_size=20, optimizer="sgd", lr=30.0, clip=0.25,
                      steps=500 * 664)),
    ("smnist-noise", dict(T=784, eps=1.0, bias_inside=False, k=10)),
    ("imdb", dict(optimizer="adam", eps=1e-4, batch_size=25)),
])
def test_real_data_presets_follow_the_papers(name, expected):
    resolved = resolve_preset(load_task_preset(name))
    assert {key: resolved[key] for key in expected} == expected
    options = resolved["options"]
    if name == "ptb-char":  # the code never decays the learning rate; the text does at epochs 80 and 90
        assert "lr_schedule" not in options
        text = resolve_preset(load_task_preset(name), variant="paper-text")
        assert text["options"]["lr_schedule"] == {"milestones": [80, 90], "gamma": 0.1}
        assert (text["hidden"], text["k"]) == (1000, 10)
    if name == "wikitext2":
        assert options["asgd_switch"] == {"nonmono": 5} and options["embedding"] == 400
        assert options["hf_config"] == "wikitext-2-v1"  # Table 5's tokenized WikiText-2 by default
        raw = resolve_preset(load_task_preset(name), variant="raw")["options"]
        assert raw["hf_config"] == "wikitext-2-raw-v1" and raw["embedding"] == 400
        assert resolve_preset(load_task_preset(name), variant="tokenized")["options"] == options
    if name == "smnist-noise":
        assert options["noise_var"] == 0.1
        assert resolve_preset(load_task_preset(name), variant="permuted")["options"] == {"noise_var": 0.1, "permute": True}
        subset = resolve_preset(load_task_preset(name), variant="mnist-5k")
        assert subset["options"]["dataset"] == "mnist-5k" and subset["steps_per_epoch"] == 3600 // 64
    if name == "ptb-word":  # AWD-LSTM's PTB dropouts
        assert (options["dropouti"], options["dropouth"], options["dropout"]) == (0.4, 0.25, 0.4)


def test_resumed_run_after_the_asgd_switch_equals_uninterrupted(tmp_path):
    # lr 30 on a tiny corpus: the validation loss rises early, the switch fires before the
    # step-12 checkpoint, so the resumed run must rebuild ASGD and its running average.
    config = resolve_run("wikitext2", dict(T=6, hidden=8, batch_size=2, steps=16, eval_every=2, k=2, lr=30.0,
                                           options={"data_dir": str(write_wikitext(tmp_path / "wt")),
                                                    "asgd_switch": {"nonmono": 1}}))

    def at_the_kill(store):
        saved = torch.load(store.checkpoint_dir(run_id_of(config)) / "checkpoint.pt", weights_only=False)
        assert saved["step"] == 12 and saved["optimizer"]["switched_at"] is not None

    whole, whole_curve, resumed, resumed_curve = whole_and_resumed(config, tmp_path, 13, at_the_kill)
    assert resumed_curve == whole_curve and resumed["val_ppl"] == whole["val_ppl"]
