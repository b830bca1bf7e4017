"""What the dataset loaders share: where the data comes from, one-line errors, vocabularies.

Where a loader looks, first match wins:

1. ``options["data_files"]``: explicit files per split (``{"train": PATH, "test": PATH}``;
   ``atnbench run --data-files train=a.parquet,test=b.parquet``), read with the ``datasets``
   builder their extension names (parquet, csv, json/jsonl, arrow, text);
2. ``options["data_dir"]``: a folder holding a ``datasets`` ``save_to_disk`` copy
   (``dataset_dict.json``), or the dataset's files in one of the layouts its loader lists
   (the Hub repository's own layout, as ``hf download --local-dir`` writes it, included);
3. ``<data root>/<name>`` (e.g. ``<data root>/mnist``), the same kinds of folder; the data root
   is ``$ATNBENCH_DATA``, else ``~/.cache/atnbench/data`` (``$XDG_CACHE_HOME`` respected),
   where ``atnbench data prepare`` writes;
4. the Hugging Face Hub id (or the cache of it: ``HF_HUB_OFFLINE=1`` with a filled cache works).

When none of these has the data, the loader raises ``DataUnavailable`` (a
``FileNotFoundError``) whose one-line message names the files it expects and where, and the
command that fetches them on a connected machine.

Vocabularies are sorted, so the same data always gives the same ids, and cached as JSON next to
the data (``<name>.vocab.json`` in the data folder, or beside the ``datasets`` cache files for
Hub data) together with a fingerprint of the data they were built from; a stale file is rebuilt.
"""

from __future__ import annotations

import contextlib
import glob
import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

import torch

from atnbench.errors import UserError

SOURCE_OPTIONS = ("data_dir", "data_files", "hf_id", "hf_config")  # where find_source looks, in a run's options
from atnbench.userfiles import cache_base

ENV_DATA = "ATNBENCH_DATA"
SPLIT_ALIASES = {"train": "train", "val": "validation", "valid": "validation", "validation": "validation",
                 "dev": "validation", "test": "test"}
BUILDERS = {".parquet": "parquet", ".csv": "csv", ".tsv": "csv", ".json": "json", ".jsonl": "json",
            ".arrow": "arrow", ".txt": "text", ".tokens": "text", ".raw": "text"}


class DataUnavailable(UserError, FileNotFoundError):
    """The data cannot be had; the message is one line saying what to put where."""


def _datasets():
    try:
        import datasets
    except ImportError:  # pragma: no cover - the test extra installs it
        raise DataUnavailable("real-data tasks read their data with Hugging Face `datasets`: "
                              "pip install 'atnbench[data]' (or pip install datasets)") from None
    return datasets


@contextlib.contextmanager
def _quiet_datasets():
    """No progress bars while reading local files (they would only be noise)."""
    datasets = _datasets()
    was_enabled = datasets.is_progress_bar_enabled()
    datasets.disable_progress_bars()
    try:
        yield datasets
    finally:
        if was_enabled:
            datasets.enable_progress_bars()


def canonical_split(name: str) -> str:
    try:
        return SPLIT_ALIASES[name.lower()]
    except KeyError:
        raise DataUnavailable(f"unknown split {name!r} in data_files; use train, validation (or val) and test") from None


def parse_data_files(text: str) -> dict[str, str]:
    """``train=a.parquet,test=b.parquet`` -> ``{"train": "/abs/a.parquet", "test": "/abs/b.parquet"}``."""
    files: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        split, sep, path = item.partition("=")
        if not sep or not path.strip():
            raise DataUnavailable(f"--data-files expects SPLIT=PATH[,SPLIT=PATH...], got {item!r}")
        named = canonical_split(split.strip())
        if named in files:  # the last would have won without a word (the test split scored on validation's file)
            raise DataUnavailable(f"--data-files names the {named} split twice ({item!r}); give each split one file")
        files[named] = str(Path(path.strip()).expanduser().absolute())
    return files


def data_root() -> Path:
    """Where prepared datasets live: ``$ATNBENCH_DATA``, else ``~/.cache/atnbench/data``."""
    root = os.environ.get(ENV_DATA)
    if root:
        return Path(root).expanduser()
    return cache_base() / "data"


def generator(seed: int, purpose: str) -> torch.Generator:
    """A torch generator seeded from (seed, purpose), unrelated across purposes and seeds."""
    digest = hashlib.sha256(f"atnbench-data:{int(seed)}:{purpose}".encode()).digest()
    gen = torch.Generator()
    gen.manual_seed(int.from_bytes(digest[:8], "big") >> 1)
    return gen


# --- where the data is ------------------------------------------------------------------------

class Source:
    """Where one dataset was found: its splits (``datasets.Dataset``) and a folder for caches."""

    def __init__(self, splits: dict, cache_dir: Optional[Path], origin: str):
        self.splits = splits
        self.cache_dir = cache_dir
        self.origin = origin

    def fingerprint(self) -> str:
        parts = [f"{name}:{getattr(ds, '_fingerprint', '')}:{len(ds)}" for name, ds in sorted(self.splits.items())]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16]


class Layout:
    """One way a dataset's files can sit in a folder: a glob per split, read by one builder."""

    def __init__(self, builder: str, patterns: dict[str, Sequence[str]], builder_kwargs: Optional[dict] = None,
                 description: Optional[str] = None):
        self.builder = builder
        self.patterns = patterns
        self.builder_kwargs = builder_kwargs or {}
        self.description = description

    def match(self, folder: Path) -> Optional[dict[str, list[str]]]:
        """Files per split (the first pattern with any match wins), or None if a split has none."""
        found = {}
        for split, patterns in self.patterns.items():
            for pattern in patterns:
                # the folder's own name taken literally: "[", "?" and "*" in it are no pattern
                files = sorted(f for f in glob.glob(os.path.join(glob.escape(str(folder)), pattern)) if os.path.isfile(f))
                if files:
                    found[split] = files
                    break
            else:
                return None
        return found

    def describe(self) -> str:
        return self.description or " + ".join(patterns[0] for patterns in self.patterns.values())


def parquet_layout(required: Iterable[str], subfolders: Sequence[str] = ()) -> Layout:
    """``<split>.parquet``, ``<split>-*.parquet`` or the Hub repository layout
    ``<subfolder>/<split>-00000-of-00001.parquet`` (what ``hf download --local-dir`` writes)."""
    plain = " + ".join(f"{split}.parquet" for split in required)
    hub = "".join(f" (or {' + '.join(f'{sub}/{split}-*.parquet' for split in required)}, the Hub repository's layout)"
                  for sub in subfolders[:1])
    return Layout("parquet", {split: [f"{split}.parquet", f"{split}-*.parquet",
                                      *(f"{sub}/{split}-*.parquet" for sub in subfolders)]
                              for split in required}, description=plain + hub)


def load_local_files(name: str, files: dict[str, Any], required: Sequence[str]) -> Source:
    """Explicit files per split (``options["data_files"]``), read by the builder of their extension."""
    given, files = files, {}
    for split, paths in given.items():
        named = canonical_split(split)
        if named in files:  # the last would have won without a word (test scored on validation's file)
            raise DataUnavailable(f"{name}: data_files names the {named} split twice ({split!r}); give each split one file")
        files[named] = [paths] if isinstance(paths, str) else list(paths)
    missing_splits = [split for split in required if split not in files]
    if missing_splits:
        raise DataUnavailable(f"{name}: data_files has no {', '.join(missing_splits)} split; "
                              f"give {', '.join(f'{s}=PATH' for s in required)}")
    missing = [path for paths in files.values() for path in paths if not os.path.isfile(path)]
    if missing:
        raise DataUnavailable(f"{name}: data file(s) not found: {', '.join(missing)}")
    suffixes = {Path(path).suffix.lower() for paths in files.values() for path in paths}
    builders = {BUILDERS.get(suffix) for suffix in suffixes}
    if len(builders) != 1 or None in builders:
        known = ", ".join(sorted(BUILDERS))
        raise DataUnavailable(f"{name}: data files must share one known extension ({known}); got {', '.join(sorted(suffixes))}")
    builder = builders.pop()
    first = Path(files["train"][0] if "train" in files else next(iter(files.values()))[0])
    return _build(name, builder, files, {}, cache_dir=first.parent, origin=f"files {first.parent}")


def load_local_dir(name: str, folder: Path, layouts: Sequence[Layout], how_to: str) -> Source:
    """A ``save_to_disk`` folder, or the first of ``layouts`` whose files are all there."""
    folder = Path(folder).expanduser()
    if not folder.is_dir():
        raise DataUnavailable(f"{name}: data folder {folder} does not exist; {how_to}")
    if (folder / "dataset_dict.json").is_file():
        with _quiet_datasets() as datasets:
            try:
                loaded = datasets.load_from_disk(str(folder))
            except Exception as err:  # a broken or partial copy: `datasets` says it as a KeyError, ...
                reason = (f"its dataset_dict.json has no {err.args[0]!r} entry" if isinstance(err, KeyError) and err.args
                          else str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__)
                raise DataUnavailable(f"{name}: {folder} is not a whole datasets save_to_disk copy ({reason}); "
                                      f"{how_to}") from None
        return Source(dict(loaded), folder, f"save_to_disk copy {folder}")
    for layout in layouts:
        files = layout.match(folder)
        if files is not None:
            return _build(name, layout.builder, files, layout.builder_kwargs, cache_dir=folder,
                          origin=f"{layout.builder} files in {folder}")
    expected = "; or ".join(layout.describe() for layout in layouts)
    raise DataUnavailable(f"{name}: no data found in {folder}: expected a datasets save_to_disk copy "
                          f"(dataset_dict.json), or {expected}; {how_to}")


def _contents_key(files: dict[str, list[str]]) -> str:
    """A digest of which bytes feed which split."""
    digest = hashlib.sha256()
    for split in sorted(files):
        for path in files[split]:
            digest.update(f"{split}\0{path}\0".encode())
            with open(path, "rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()[:16]


def _build(name: str, builder: str, files: dict[str, list[str]], kwargs: dict, cache_dir: Path, origin: str) -> Source:
    # named here: `datasets` calls an empty split "Instruction 'validation' corresponds to no data!"
    empty = [path for paths in files.values() for path in paths if Path(path).is_file() and not Path(path).stat().st_size]
    if empty:
        raise DataUnavailable(f"{name}: {', '.join(empty)} {'is' if len(empty) == 1 else 'are'} empty")
    with _quiet_datasets() as datasets:
        # `datasets` keys its cache of a local file by path and mtime only: a file rewritten with its
        # old mtime (cp -p, rsync -t, tar) would hand a run the rows cached from other bytes
        cache = Path(datasets.config.HF_DATASETS_CACHE) / "atnbench-local" / _contents_key(files)
        try:
            # escaped: `datasets` reads data_files as glob patterns ("r[12]/x.txt" read r1/x.txt)
            literal = {split: [glob.escape(path) for path in paths] for split, paths in files.items()}
            loaded = datasets.load_dataset(builder, data_files=literal, cache_dir=str(cache), **kwargs)
        except Exception as err:  # a malformed file: name it, in one line
            first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            raise DataUnavailable(f"{name}: cannot read {builder} files {', '.join(sum(files.values(), []))}: {first}") from None
    return Source(dict(loaded), cache_dir, origin)


def _hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hub's host answers at all: offline, ``datasets`` retries each request for half a
    minute and logs every try, before the one error this module turns into a line. Behind a proxy
    (``HTTPS_PROXY`` and the like) only a request through it could tell: taken as reachable."""
    import socket
    import urllib.request
    from urllib.parse import urlparse

    import huggingface_hub.constants as hub

    url = urlparse(hub.ENDPOINT)
    if urllib.request.getproxies() and not urllib.request.proxy_bypass(url.hostname or ""):
        return True
    try:
        socket.create_connection((url.hostname, url.port or (443 if url.scheme == "https" else 80)), timeout).close()
        return True
    except (OSError, ValueError):
        return False


@contextlib.contextmanager
def _offline_unless_reachable(datasets):
    """``HF_HUB_OFFLINE`` for the block where the Hub cannot be reached (the cache is still read)."""
    import huggingface_hub.constants as hub

    if hub.HF_HUB_OFFLINE or _hub_reachable():
        yield
        return
    before = datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE
    datasets.config.HF_HUB_OFFLINE = hub.HF_HUB_OFFLINE = True
    try:
        yield
    finally:
        datasets.config.HF_HUB_OFFLINE, hub.HF_HUB_OFFLINE = before


def load_hub(name: str, repo_id: str, config: Optional[str], how_to: str) -> Source:
    """The dataset from the Hugging Face Hub or its local cache (``HF_HUB_OFFLINE=1`` works; where
    the Hub cannot be reached it is set for the call, so the cache answers at once)."""
    datasets = _datasets()
    try:
        with _offline_unless_reachable(datasets):
            loaded = datasets.load_dataset(repo_id, config) if config else datasets.load_dataset(repo_id)
    except Exception as err:  # offline without a cache, no such repo, ...: say what to do instead
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = f"{repo_id!r}" + (f" (config {config!r})" if config else "")
        raise DataUnavailable(f"{name}: cannot load {where} from the Hugging Face Hub or its cache ({reason}); "
                              f"{how_to}") from None
    splits = dict(loaded)
    cache_dir = None
    for ds in splits.values():
        files = getattr(ds, "cache_files", None) or []
        if files:
            cache_dir = Path(files[0]["filename"]).parent
            break
    return Source(splits, cache_dir, f"hub {repo_id}" + (f"/{config}" if config else ""))


def find_source(name: str, options: dict, *, subdir: str, layouts: Sequence[Layout], required: Sequence[str],
                hub: Optional[tuple[str, Optional[str]]], how_to: str) -> Source:
    """Resolve a dataset's location in the documented order (module docstring)."""
    if options.get("data_files"):
        files = options["data_files"]
        if isinstance(files, str):
            files = parse_data_files(files)
        return load_local_files(name, files, required)
    if options.get("data_dir"):
        return load_local_dir(name, Path(options["data_dir"]), layouts, how_to)
    root = data_root()
    if (root / subdir).is_dir():
        return load_local_dir(name, root / subdir, layouts, how_to)
    hf_id = options.get("hf_id") or (hub[0] if hub else None)
    if hf_id:
        config = options.get("hf_config", hub[1] if hub and hf_id == hub[0] else None)
        return load_hub(name, hf_id, config, how_to)
    raise DataUnavailable(f"{name}: no data location given; {how_to}")


def check_splits(name: str, source: Source, required: Sequence[str], how_to: str) -> None:
    missing = [split for split in required if split not in source.splits]
    if missing:
        raise DataUnavailable(f"{name}: {source.origin} has no {', '.join(missing)} split "
                              f"(has {', '.join(sorted(source.splits)) or 'none'}); {how_to}")


def column(name: str, ds, candidates: Sequence[str]) -> str:
    for candidate in candidates:
        if candidate in ds.column_names:
            return candidate
    raise DataUnavailable(f"{name}: expected a column named {' or '.join(candidates)}; "
                          f"the data has {', '.join(ds.column_names)}")


# --- vocabularies -------------------------------------------------------------------------------

def _tokens_digest(tokens: list) -> str:
    return hashlib.sha256(json.dumps(tokens, ensure_ascii=False).encode()).hexdigest()


def cached_vocab(source: Source, filename: str, fingerprint: str, build: Callable[[], list[str]]) -> list[str]:
    """The vocabulary in ``<cache folder>/<filename>`` if it was built from this data and its tokens
    are the ones written (their SHA-256 is kept beside them: an edited or damaged list would give
    other numbers under the same run id), else ``build()`` (sorted by the caller) written there.
    An unwritable folder only skips the cache."""
    path = source.cache_dir / filename if source.cache_dir is not None else None
    if path is not None and path.is_file():
        try:
            saved = json.loads(path.read_text())
            tokens = saved.get("tokens")
            if saved.get("fingerprint") == fingerprint and isinstance(tokens, list) and \
                    saved.get("tokens_sha256") == _tokens_digest(tokens):
                return tokens
        except (OSError, ValueError, AttributeError):
            pass  # unreadable, torn or not this file's shape: rebuild
    tokens = build()
    if path is not None:
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        try:
            tmp.write_text(json.dumps({"fingerprint": fingerprint, "origin": source.origin, "size": len(tokens),
                                       "tokens_sha256": _tokens_digest(tokens), "tokens": tokens},
                                      ensure_ascii=False))
            os.replace(tmp, path)
        except OSError:
            pass
        finally:
            tmp.unlink(missing_ok=True)
    return tokens


def vocab_fingerprint(source: Source, *settings: Any) -> str:
    blob = json.dumps([source.fingerprint(), *settings], default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
