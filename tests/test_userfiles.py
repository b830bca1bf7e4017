"""The one reader of users' files (atnbench/userfiles.py): the limits sit where they say, and a
file within them reads as plain YAML/JSON would. The refusals as commands see them are cases of
the bad-input matrix (tests/test_bad_input.py)."""

from __future__ import annotations

import json
import os
import time

import pytest
import yaml

from atnbench.config import ConfigError
from atnbench.userfiles import MAX_NESTING, check_file, decode, parse_json, parse_yaml, read_settings


def test_aliases_within_the_limit_read_as_plain_yaml():
    text = "base: &b {hidden: 8, lr: 1.0e-3}\nruns: [*b, *b, {<<: *b, hidden: 16}]\n"
    assert parse_yaml(text, "f") == yaml.safe_load(text)


def test_nesting_stops_at_the_limit_exactly():
    inside = "[" * MAX_NESTING + "]" * MAX_NESTING
    assert parse_yaml(inside, "f") is not None and parse_json(inside, "f") is not None
    over = "[" * (MAX_NESTING + 1) + "]" * (MAX_NESTING + 1)
    for parse in (parse_yaml, parse_json):
        with pytest.raises(ConfigError, match=f"nested deeper than {MAX_NESTING} levels"):
            parse(over, "f")


def test_an_alias_bomb_is_refused_in_time_linear_in_its_length():
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(20)]  # 9^21 values
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="its aliases expand to more than 1,000,000 values"):
        parse_yaml("\n".join(levels), "bomb.yaml")
    assert time.perf_counter() - start < 5


def test_an_alias_that_holds_itself_is_refused():
    with pytest.raises(ConfigError, match="an alias refers to the value that holds it"):
        parse_yaml("a: &a [1, *a]\n", "loop.yaml")


def test_repeated_keys_are_refused_and_unhashable_keys_said_by_yaml():
    with pytest.raises(ConfigError, match="duplicate key 'T'"):
        parse_yaml("T: 1\nT: 2\n", "f")
    with pytest.raises(ConfigError, match="invalid YAML"):
        parse_yaml("? [1, 2]\n: 3\n", "f")


@pytest.mark.parametrize("data, said", [
    ("T: 8\n".encode("utf-16"), "is UTF-16 text"),
    (b"T: 8\n\x00\x01", "is binary (it holds NUL bytes)"),
    ("T: 8\nnote: caf\xe9\n".encode("latin-1"), "byte 0xe9 at line 2, column 10"),
])
def test_text_that_is_not_utf8_is_named(data, said):
    with pytest.raises(ConfigError, match=f"f: .*{said.replace('(', '.').replace(')', '.')}"):
        decode(data, "f")
    assert decode("\ufeffT: 8\n".encode("utf-8"), "f") == "T: 8\n"  # a UTF-8 byte-order mark is dropped


def test_a_fifo_a_device_and_a_folder_are_refused_before_opening(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(os.devnull)
    for path, said in ((tmp_path / "pipe", "a named pipe"), (tmp_path / "link", "a character device (a link to"),
                       (tmp_path, "a folder")):
        with pytest.raises(ConfigError, match=said.replace("(", r"\(")):
            check_file(path)  # would block on the FIFO if it opened it
    assert check_file(tmp_path, folder_ok=True)


def test_a_json_settings_file_reads_as_json(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps({"T": 8, "norm": "atn"}))
    assert read_settings(tmp_path / "c.json") == {"T": 8, "norm": "atn"}
