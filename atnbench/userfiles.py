"""The one reader of every file a user hands in: task, config, sweep and claims files (YAML or
JSON), JSON Lines imports and data files.

Each file is looked at before it is opened, so nothing hangs on it: ``os.stat`` (which follows a
symbolic link to its target) must show a regular file, since a FIFO blocks the reader until a
writer comes, ``/dev/zero`` never ends, and a folder or a socket cannot be read at all; and the
file must be within its kind's size limit (``KINDS``). Text must be UTF-8: UTF-16 (a byte-order
mark), binary (NUL bytes) and any other encoding (latin-1) are said with where the first
undecodable byte is. YAML is read with a loader that refuses repeated keys, nesting deeper
than ``MAX_NESTING`` and aliases that expand to more than ``MAX_NODES`` values (an "alias bomb"
is a few hundred bytes that expand to billions), and JSON nested deeper than ``MAX_NESTING``.
Every refusal is a ``ConfigError``: one line naming the file and the problem, exit code 2.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Union

import yaml

from atnbench.config import ConfigError

MAX_NESTING = 100  # levels of lists/mappings: atnbench's own files use fewer than 10
MAX_NODES = 1_000_000  # values of a YAML document with its aliases expanded


@dataclass(frozen=True)
class FileKind:
    """What a file is to atnbench: named in messages, and the largest it may be."""

    name: str
    max_bytes: int


MB = 1 << 20
KINDS = {  # a settings file is written by hand: megabytes of it are a mistake (and a slow parse)
    "settings": FileKind("settings file", 8 * MB),
    "records": FileKind("JSON Lines file", 64 * 1024 * MB),
    "data": FileKind("data file", 256 * 1024 * MB),
}
# what os.stat says a path is, for the ones that are not regular files
_NOT_REGULAR = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def cache_base() -> Path:
    """atnbench's folder in the user's cache: ``$XDG_CACHE_HOME/atnbench``, else ``~/.cache/atnbench``
    (prepared data sets, the code fingerprint)."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache).expanduser() / "atnbench"


def why_not_writable(folder: Union[str, Path]) -> str:
    """Why no file can be made in ``folder`` ("" when one can). Tried, not looked up: ``os.access``
    answers yes to root everywhere, also on a read-only file system or in ``/proc``."""
    import tempfile

    try:
        with tempfile.TemporaryFile(dir=folder, prefix=".atnbench-write-check-"):
            return ""
    except OSError as error:
        return error.strerror or type(error).__name__


def broken_link(path: Path) -> Optional[str]:
    """What is wrong with the outermost symbolic link on ``path`` (or ``path`` itself) that leads
    nowhere: a loop, or a link to what does not exist. ``Path.exists()`` says False for both, so a
    path through one looks new, and making it fails only later (``File exists``)."""
    for step in (*reversed(path.parents), path):
        try:
            os.stat(step)
        except OSError as error:
            if error.errno == errno.ELOOP:
                return f"{step} is a loop of symbolic links"
            if step.is_symlink():
                return f"{step} is a symbolic link to {os.readlink(step)}, which does not exist"
            return None
    return None


def kind_of(mode: int) -> Optional[str]:
    """What a file of this ``st_mode`` is when it is not a regular file ("a named pipe (FIFO)"), else None."""
    return next((name for test, name in _NOT_REGULAR if test(mode)), None if stat.S_ISREG(mode) else "not a file")


def _size(n: int) -> str:
    return f"{n / MB:,.1f} MB" if n >= MB else f"{n:,} bytes"


def check_file(path: Union[str, Path], kind: str = "settings", folder_ok: bool = False) -> os.stat_result:
    """The stat of ``path`` when it is a regular file of at most its kind's size (a folder too
    where ``folder_ok``: a saved Hugging Face dataset); else ConfigError, before anything opens it."""
    path = Path(path)
    if "\0" in str(path):
        raise ConfigError(f"{str(path)!r}: a file name cannot hold a NUL character")
    try:
        found = os.stat(path)  # follows links: a link to /dev/zero is /dev/zero
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as error:  # a parent that is a file, no permission, a link loop
        raise ConfigError(f"{path}: cannot be read ({error.strerror or type(error).__name__})") from None
    what = kind_of(found.st_mode)
    if what == "a folder" and folder_ok:
        return found
    if what is not None:
        link = f" (a link to {os.path.realpath(path)})" if path.is_symlink() else ""
        raise ConfigError(f"{path}: is {what}{link}, not a regular file")
    limit = KINDS[kind]
    if found.st_size > limit.max_bytes:
        raise ConfigError(f"{path}: is {_size(found.st_size)}; a {limit.name} is at most {_size(limit.max_bytes)}")
    return found


def decode(data: bytes, where: str) -> str:
    """UTF-8 text (a leading byte-order mark dropped); else ConfigError naming the encoding problem."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise ConfigError(f"{where}: is UTF-16 text; save it as UTF-8")
    if b"\0" in data[:8192]:
        if _utf16_without_mark(data[:8192]):
            raise ConfigError(f"{where}: is UTF-16 text (without a byte-order mark); save it as UTF-8")
        raise ConfigError(f"{where}: is binary (it holds NUL bytes), not UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise ConfigError(f"{where}: is not UTF-8 text (byte {data[error.start]:#04x} at line {line}, column "
                          f"{column}; latin-1 or another encoding? save it as UTF-8)") from None


def _utf16_without_mark(head: bytes) -> bool:
    """Mostly Latin text in UTF-16: every other byte NUL, the rest not (Windows tools write it so)."""
    pairs = len(head) // 2
    if pairs < 2:
        return False
    for nul, other in ((head[1::2], head[0::2]), (head[0::2], head[1::2])):  # little-endian, then big-endian
        if nul[:pairs].count(0) >= 0.9 * pairs and other[:pairs].count(0) <= 0.1 * pairs:
            return True
    return False


def read_text(path: Union[str, Path], kind: str = "settings") -> str:
    """The UTF-8 text of a user's file, checked (``check_file``, ``decode``)."""
    check_file(path, kind)
    limit = KINDS[kind].max_bytes
    chunks, held = [], 0
    with open(path, "rb") as handle:  # no more than the limit, should the file grow meanwhile; read in
        while held <= limit:          # pieces: one read of the limit would ask for that much memory at once
            chunk = handle.read(min(1 << 24, limit + 1 - held))
            if not chunk:
                break
            chunks.append(chunk)
            held += len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise ConfigError(f"{path}: a {KINDS[kind].name} is at most {_size(KINDS[kind].max_bytes)}")
    return decode(data, str(path))


# --- YAML ---------------------------------------------------------------------------------------

class _Refused(yaml.YAMLError):
    def __init__(self, problem: str, mark=None):
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


class Loader(yaml.SafeLoader):
    """A SafeLoader that refuses repeated keys (plain YAML keeps the last), nesting deeper than
    MAX_NESTING (composing recurses: 5,000 levels would be a RecursionError) and aliases that
    expand past MAX_NODES values or refer to themselves."""

    def __init__(self, stream):
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_NESTING:
                raise _Refused(f"nested deeper than {MAX_NESTING} levels", self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1

    def compose_document(self):
        node = super().compose_document()
        _check_expansion(node)
        return node

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: its keys may be overridden here
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                repeated = key in seen
                seen.add(key)
            except TypeError:  # an unhashable key: the base class says so, with its line
                break
            if repeated:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _children(node) -> list:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _check_expansion(root) -> None:
    """Refuse a document whose aliases expand past MAX_NODES values, nest past MAX_NESTING or
    refer to themselves. An alias is the node it names, shared: sizes are counted once per node
    (memoized), so this takes time in the document's length, not in its expansion."""
    if root is None:
        return
    sizes: dict[int, tuple[int, int]] = {}  # node -> (values, depth), aliases expanded
    open_nodes: set[int] = set()
    stack = [(root, False)]
    while stack:  # iterative: the expansion may be deeper than Python's recursion
        node, finished = stack.pop()
        key = id(node)
        if finished:
            below = [sizes[id(child)] for child in _children(node)]
            sizes[key] = (1 + sum(n for n, _ in below), 1 + max((d for _, d in below), default=0))
            open_nodes.discard(key)
            if sizes[key][0] > MAX_NODES:
                raise _Refused(f"its aliases expand to more than {MAX_NODES:,} values", node.start_mark)
            if sizes[key][1] > MAX_NESTING:
                raise _Refused(f"its aliases nest deeper than {MAX_NESTING} levels", node.start_mark)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise _Refused("an alias refers to the value that holds it", node.start_mark)
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))


def parse_yaml(text: str, where: str) -> Any:
    """A YAML document read with ``Loader``; ConfigError naming ``where`` and the line."""
    try:
        return yaml.load(text, Loader=Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML{at}: {problem}") from None


def read_yaml(path: Union[str, Path]) -> Any:
    return parse_yaml(read_text(path), str(path))


# --- JSON ---------------------------------------------------------------------------------------

def parse_json(text: str, where: str) -> Any:
    """A JSON value nested at most MAX_NESTING deep; ConfigError naming ``where`` otherwise."""
    try:
        value = json.loads(text)
    except RecursionError:  # the C scanner recurses per level: 100,000 levels end here
        raise ConfigError(f"{where}: not JSON we read (nested deeper than {MAX_NESTING} levels)") from None
    except json.JSONDecodeError as error:
        # msg is the reason alone, some ending in "at" ("Unterminated string starting at"): the place after a colon
        raise ConfigError(f"{where}: not JSON ({error.msg}: line {error.lineno}, column {error.colno})") from None
    if nesting(value) > MAX_NESTING:
        raise ConfigError(f"{where}: not JSON we read (nested deeper than {MAX_NESTING} levels)")
    if _SURROGATE_ESCAPE.search(text):  # "\ud800" alone: JSON allows it, no UTF-8 text (a store) holds it
        bad = _lone_surrogate(value)
        if bad is not None:
            raise ConfigError(f"{where}: text {bad!r} holds half of a UTF-16 surrogate pair (a \\uD800-\\uDFFF escape "
                              f"alone), which is no character")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> Optional[str]:
    """The first string (key or value) in a parsed value that holds a lone surrogate, else None."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return item
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return None


def nesting(value: Any) -> int:
    """How deep lists and mappings nest in a parsed value (0 for a number or a string)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        if deepest > MAX_NESTING:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def read_settings(path: Union[str, Path]) -> Any:
    """A settings file: JSON where its name ends in .json, else YAML (JSON is YAML too)."""
    text = read_text(path)
    return parse_json(text, str(path)) if Path(path).suffix == ".json" else parse_yaml(text, str(path))


def file_digest(path) -> str:
    """SHA-256 of a file's bytes ("missing:PATH" or "not-a-file:PATH" where it is not a readable
    file), cached by (path, size, modification time): a sweep hashes each data file once per process."""
    return _digest_of(str(path), *file_stat(path))


@functools.lru_cache(maxsize=256)
def _digest_of(path: str, size: int, mtime_ns: int) -> str:
    if size < 0:
        return f"missing:{path}"
    if not Path(path).is_file():  # a FIFO or a device would never end; reading the data refuses it
        return f"not-a-file:{path}"
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def file_stat(path) -> tuple[int, int]:
    """(size, modification time in ns) of a file, (-1, -1) if it cannot be read: what says a
    cached reading of it is still good."""
    try:
        stat = Path(path).stat()
    except OSError:
        return (-1, -1)
    return (stat.st_size, stat.st_mtime_ns)
