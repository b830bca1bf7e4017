"""The bad-input matrix: every command, fed what a careless or hostile user would type.

Each case asserts the documented exit code, exactly one line on stderr (naming the problem),
no traceback, and that nothing changed on disk: the results store keeps its bytes and row
counts (it is kept in rollback-journal mode, so even opening it for writing would change its
header), and no file appears or changes beside it (no store, checkpoint or output created).
Every case fails in validation, before any training, so the matrix takes seconds; it runs
in-process through typer's CliRunner, plus a few real processes for the console script.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest


from atnbench.store import ResultsStore
from helpers import invoke, valid_record

USAGE, FAILED = 2, 1
TINY_SWEEP = ("description: tiny\ntask: adding\nbase: {T: 8, steps: 2, hidden: 8, batch_size: 4, val_samples: 8, "
              "eval_every: 1}\ngrid: {norm: [ln, atn]}\n")
BIG = "1000000000"

# {good}: a store with finished runs; {garbage} {empty} {folder} {under} {truncated} {dropped}
# {missing}: unusable or absent stores; {dir}: a folder; {file}: a plain file; {cfg:NAME}: a
# config file (CONFIGS); {sweep}: a tiny sweep file; {badsweep}: a sweep file with a bad value;
# {jsonl}: a valid record (RECORD); {jsonl:NAME}: a JSON Lines file that is no export (JSONL).
CONFIGS = {
    "twenty": "T: twenty\n",
    "lr_text": "lr: 1e-3\n",
    "unknown": "hiden: 3\n",
    "list": "- T: 8\n",
    "yaml": "T: [8\n",
    "k0": "k: 0\n",
    "options": "options: [1, 2]\n",
    "clip_inf": "clip: .inf\n",
    "lr_nan": "lr: .nan\n",
    "affine_text": "affine: maybe\n",
    "batch_float": "batch_size: 2.5\n",
    "epochs_negative": "epochs: -1\n",
    "int_key": "123: 4\n",
    "T_bool": "T: true\n",
    "hidden_big": "hidden: 100000\n",
    "json_bad": "{not json",
    "iters_and_steps": "iters: 5\nsteps: 6\n",
    "batch_dash_bad": "batch-size: 2.5\n",
    "seed": "seed: 3\n",
    "data_dir": "data-dir: /nowhere\n",
    "lr_huge": "lr: 1.0e+308\n",
    "seed_huge": "seed: 4294967296\n",
    "k_huge": "k: 1000000000000000000000\n",
    "momentum_one": "momentum: 1\n",
}
RECORD = valid_record()
JSONL = {  # store import reads every line before it writes anything: each of these imports nothing
    "cut": '{"run_id": "ab\n',  # a file cut off in its last line
    "garbage": "this is not JSON\n",
    "newer": json.dumps({**RECORD, "schema_version": 99}) + "\n",
    "schema_text": json.dumps({**RECORD, "schema_version": "two"}) + "\n",
    "list": "[1, 2, 3]\n",
    "string": '"run0"\n',
    "missing": json.dumps({"run_id": "new0"}) + "\n",
    "status": json.dumps({**RECORD, "status": "finished"}) + "\n",
    "run_id": json.dumps({**RECORD, "run_id": 7}) + "\n",
    "config": json.dumps({**RECORD, "config": "adding"}) + "\n",
    "curve": json.dumps({**RECORD, "curve": {"step": 1}}) + "\n",
    "second_line": json.dumps(RECORD) + "\n{half a line\n",
}
STORES = ["garbage", "folder", "under", "truncated", "dropped"]
READ_STORES = STORES + ["empty", "missing"]
SMALL = ["--T", "8", "--hidden", "8", "--batch-size", "4", "--iters", "2", "--val-samples", "8"]

CASES = [
    # -- atnbench run ------------------------------------------------------------------------
    ("run", [], USAGE, "Missing argument"),
    ("run", ["nosuchtask"], USAGE, "unknown task"),
    ("run", ["adding", "extra"], USAGE, "unexpected extra argument"),
    ("run", ["adding", "--nosuch"], USAGE, "No such option"),
    ("run", ["adding", "--T"], USAGE, "requires an argument"),
    ("run", ["adding", "--norm", "magic"], USAGE, "unknown norm"),
    ("run", ["adding", "--cell", "transformer"], USAGE, "unknown cell"),
    ("run", ["adding", "--init", "xavier"], USAGE, "unknown init"),
    ("run", ["adding", "--optimizer", "lbfgs"], USAGE, "unknown optimizer"),
    ("run", ["adding", "--variant", "nope"], USAGE, "variant"),
    ("run", ["adding", "--k", "0"], USAGE, "k must be >= 1"),
    ("run", ["adding", "--k", "-3"], USAGE, "k must be >= 1"),
    ("run", ["adding", "--k", "two"], USAGE, "'--k'"),
    ("run", ["adding", "--T", "0"], USAGE, "too short"),
    ("run", ["adding", "--T", "-5"], USAGE, "too short"),
    ("run", ["adding", "--T", "abc"], USAGE, "'--T'"),
    ("run", ["adding", "--T", "1.5"], USAGE, "'--T'"),
    ("run", ["denoise", "--T", "5"], USAGE, "too short"),
    ("run", ["adding", "--T", BIG], USAGE, "needs ~"),
    ("run", ["adding", "--hidden", "0"], USAGE, "hidden must be >= 1"),
    ("run", ["adding", "--hidden", "100000"], USAGE, "needs ~"),
    ("run", ["adding", "--layers", "0"], USAGE, "layers must be >= 1"),
    ("run", ["adding", "--layers", "100000"], USAGE, "needs ~"),
    ("run", ["adding", "--batch-size", "0"], USAGE, "batch_size (--batch-size) must be >= 1"),
    ("run", ["adding", "--batch-size", BIG], USAGE, "needs ~"),
    ("run", ["adding", "--val-samples", "0"], USAGE, "val_samples (--val-samples) must be >= 1"),
    ("run", ["adding", "--val-samples", BIG], USAGE, "needs ~"),
    ("run", ["adding", "--iters", "0"], USAGE, "steps (--iters) must be >= 1"),
    ("run", ["adding", "--iters", "-3"], USAGE, "steps (--iters) must be >= 1"),
    ("run", ["adding", "--eval-every", "0"], USAGE, "eval_every (--eval-every) must be >= 1"),
    ("run", ["adding", "--lr", "-0.1"], USAGE, "lr must be > 0"),
    ("run", ["adding", "--lr", "0"], USAGE, "lr must be > 0"),
    ("run", ["adding", "--lr", "inf"], USAGE, "finite"),
    ("run", ["adding", "--lr", "nan"], USAGE, "finite"),
    ("run", ["adding", "--lr", "-inf"], USAGE, "finite"),
    ("run", ["adding", "--lr", "fast"], USAGE, "'--lr'"),
    ("run", ["adding", "--eps", "-1"], USAGE, "eps must be >= 0"),
    ("run", ["adding", "--eps", "nan"], USAGE, "finite"),
    ("run", ["adding", "--momentum", "-0.5"], USAGE, "momentum must be >= 0"),
    ("run", ["adding", "--momentum", "inf"], USAGE, "finite"),
    ("run", ["adding", "--clip", "0"], USAGE, "clip must be > 0"),
    ("run", ["adding", "--clip", "-1"], USAGE, "clip must be > 0"),
    ("run", ["adding", "--clip", "nan"], USAGE, "finite"),
    ("run", ["adding", "--epochs", "inf"], USAGE, "finite"),
    ("run", ["adding", "--epochs", "nan"], USAGE, "finite"),
    ("run", ["adding", "--epochs", "0"], USAGE, "epochs must be > 0"),
    ("run", ["adding", "--epochs", "-1"], USAGE, "epochs must be > 0"),
    ("run", ["adding", "--budget", "0"], USAGE, "budget"),
    ("run", ["adding", "--budget", "2"], USAGE, "budget"),
    ("run", ["adding", "--budget", "nan"], USAGE, "finite"),
    ("run", ["adding", "--budget", "-inf"], USAGE, "finite"),
    ("run", ["adding", "--seed", "abc"], USAGE, "'--seed'"),
    ("run", ["adding", "--seed", "-1"], USAGE, "seed must be >= 0, got -1"),  # as --seeds
    ("run", ["adding", "--threads", "0"], USAGE, "--threads must be between 1 and 1024"),  # as sweep, stats, bench
    ("run", ["adding", "--checkpoint-every", "0"], USAGE, "'--checkpoint-every'"),
    ("run", ["adding", "--device", "quantum"], USAGE, "quantum"),
    ("run", ["adding", "--data-dir", "{dir}"], USAGE, "generates its data"),
    ("run", ["adding", "--data-files", "train=x"], USAGE, "generates its data"),
    ("run", ["adding", "--permute"], USAGE, "generates its data"),
    ("run", ["adding", *SMALL, "--output", "{dir}"], USAGE, "is a folder"),
    ("run", ["adding", *SMALL, "--output", "{file}/r.json"], USAGE, "is a file, not a folder"),
    ("run", ["adding", *SMALL, "--output", "{dir}/new/"], USAGE, "ends with '/', a folder"),  # not a file 'new'
    ("run", ["adding", *SMALL, "--output", "{dir}/r.CSV"], USAGE, "which a .csv file would not hold"),  # JSON in a .csv
    ("run", ["adding", "--config", "{missing_file}"], USAGE, "config file not found"),
    ("run", ["adding", "--config", "{dir}"], USAGE, "is a folder"),
    ("run", ["adding", "--config", "{binary}"], USAGE, "binary.yaml: is binary (it holds NUL bytes), not UTF-8 text"),
    ("run", ["adding", "--config", "{cfg:twenty}"], USAGE, "T: expected a whole number, got 'twenty'"),
    ("run", ["adding", "--config", "{cfg:lr_text}"], USAGE, "write 1.0e-3"),
    ("run", ["adding", "--config", "{cfg:unknown}"], USAGE, "unknown config key(s): hiden"),
    ("run", ["adding", "--config", "{cfg:list}"], USAGE, "expected a mapping"),
    ("run", ["adding", "--config", "{cfg:yaml}"], USAGE, "invalid YAML at line 2"),
    ("run", ["adding", "--config", "{cfg:k0}"], USAGE, "k must be >= 1"),
    ("run", ["adding", "--config", "{cfg:options}"], USAGE, "options"),
    ("run", ["adding", "--config", "{cfg:clip_inf}"], USAGE, "finite"),
    ("run", ["adding", "--config", "{cfg:lr_nan}"], USAGE, "finite"),
    ("run", ["adding", "--config", "{cfg:affine_text}"], USAGE, "affine: expected true or false"),
    ("run", ["adding", "--config", "{cfg:batch_float}"], USAGE, "expected a whole number"),
    ("run", ["adding", "--config", "{cfg:epochs_negative}"], USAGE, "epochs must be > 0"),
    ("run", ["adding", "--config", "{cfg:int_key}"], USAGE, "unknown config key(s): 123"),
    ("run", ["adding", "--config", "{cfg:T_bool}"], USAGE, "expected a whole number"),
    ("run", ["adding", "--config", "{cfg:hidden_big}"], USAGE, "needs ~"),
    ("run", ["adding", "--config", "{cfg_json:json_bad}"], USAGE, "cfg-json_bad.json: not JSON (Expecting property name"),
    ("run", ["adding", "--config", "{cfg:iters_and_steps}"], USAGE, "iters and steps say the same thing"),
    ("run", ["adding", "--config", "{cfg:batch_dash_bad}"], USAGE, "expected a whole number"),
    ("run", ["adding", "--config", "{cfg:data_dir}"], USAGE, "adding generates its data"),
    ("run", ["adding", "--format", "yaml"], USAGE, "unknown --format 'yaml'"),
    ("run", ["adding", "--json", "--format", "json"], USAGE, "--json and --format json say the same thing"),
    *[("run", ["adding", *SMALL, "--store", "{%s}" % store], USAGE, "store") for store in STORES],
    # -- atnbench sweep ------------------------------------------------------------------------
    ("sweep", [], USAGE, "give a sweep name"),
    ("sweep", ["no-such-sweep"], USAGE, "no-such-sweep"),
    ("sweep", ["{missing_file}.yaml"], USAGE, "missing"),
    ("sweep", ["{badsweep}"], USAGE, "k must be >= 1"),
    ("sweep", ["{cfg:yaml}"], USAGE, "YAML"),
    ("sweep", ["{sweep}", "--budget", "0"], USAGE, "--budget"),
    ("sweep", ["{sweep}", "--budget", "2"], USAGE, "--budget"),
    ("sweep", ["{sweep}", "--budget", "nan"], USAGE, "finite"),
    ("sweep", ["{sweep}", "--backend", "slurm"], USAGE, "unknown --backend"),
    ("sweep", ["{sweep}", "--address", "head:6379"], USAGE, "--address is for --backend ray"),
    ("sweep", ["{sweep}", "--workers", "0"], USAGE, "--workers must be >= 1"),
    ("sweep", ["{sweep}", "--threads", "0"], USAGE, "--threads must be between 1 and 1024"),
    ("sweep", ["{sweep}", "--config", "{dir}"], USAGE, "is a folder"),
    ("sweep", ["{sweep}", "--config", "{cfg:unknown}"], USAGE, "unknown config key(s): hiden"),
    ("sweep", ["{sweep}", "--config", "{cfg:seed}"], USAGE, "not a config file's seed"),
    ("sweep", ["{sweep}", "--init", "nosuch"], USAGE, "init"),
    ("sweep", ["{sweep}", "--data-dir", "{dir}"], USAGE, "generates its data"),
    ("sweep", ["{sweep}", "--seed", "a,b"], USAGE, "seed"),
    ("sweep", ["{sweep}", "--format", "csv"], USAGE, "unknown --format 'csv'"),
    ("sweep", ["{sweep}", "--seeds", "a,b"], USAGE, "seed"),
    ("sweep", ["{sweep}", "--seeds", ""], USAGE, "seed"),
    ("sweep", ["{sweep}", "--norm", "bn"], USAGE, "has no run with --norm bn (it holds --norm ln, --norm atn)"),
    ("sweep", ["{sweep}", "--norm", "nosuch"], USAGE, "unknown norm 'nosuch'"),
    ("sweep", ["{sweep}", "--lr", "inf"], USAGE, "finite"),
    ("sweep", ["{sweep}", "--lr", "-1"], USAGE, "lr must be > 0"),
    ("sweep", ["{sweep}", "--eps", "nan"], USAGE, "finite"),
    ("sweep", ["{sweep}", "--iters", "0"], USAGE, "must be >= 1"),
    ("sweep", ["{sweep}", "--hidden", "0"], USAGE, "hidden must be >= 1"),
    ("sweep", ["{sweep}", "--hidden", "100000"], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--T", BIG], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--device", "quantum"], USAGE, "quantum"),
    ("sweep", ["{sweep}", "--nosuch"], USAGE, "No such option"),
    *[("sweep", ["{sweep}", "--store", "{%s}" % store], USAGE, "store") for store in STORES],
    # -- atnbench sweep --dry-run (reads the store, never writes it) ---------------------------
    *[("sweep", ["{sweep}", "--dry-run", "--store", "{%s}" % store], USAGE, "store")
      for store in STORES + ["empty"]],
    ("sweep", ["{sweep}", "--dry-run", "--budget", "nan"], USAGE, "finite"),
    ("sweep", ["{sweep}", "--dry-run", "--k", "0"], USAGE, "k must be >= 1"),
    ("sweep", ["--list", "--budget", "2"], USAGE, "--budget"),
    # -- atnbench report -----------------------------------------------------------------------
    *[("report", ["--store", "{%s}" % store], USAGE, "store") for store in READ_STORES],
    ("report", ["--store", "{good}", "--task", "denoise"], USAGE, "no finished runs match"),
    ("report", ["--store", "{good}", "--T", "999"], USAGE, "no finished runs match"),
    ("report", ["--store", "{good}", "--sweep", "nope"], USAGE, "no sweep named"),
    ("report", ["--store", "{good}", "--norm", "magic"], USAGE, "unknown norm"),
    ("report", ["--store", "{good}", "--since", "yesterday-ish"], USAGE, "ISO-8601"),
    ("report", ["--store", "{good}", "--format", "docx"], USAGE, "docx"),
    ("report", ["--store", "{good}", "--output", "{dir}"], USAGE, "is a folder"),
    ("report", ["--store", "{good}", "--output", "{file}/report.md"], USAGE, "is a file, not a folder"),
    ("report", ["--store", "{good}", "--output", "{dir}/new/"], USAGE, "ends with '/', a folder"),
    ("report", ["--store", "{good}", "--out-dir", "{file}"], USAGE, "is a file; give a folder"),  # was --plots
    ("report", ["--store", "{good}", "--T", "abc"], USAGE, "'--T'"),
    ("report", ["--store", "{good}", "extra"], USAGE, "unexpected extra argument"),
    # -- atnbench plot -------------------------------------------------------------------------
    *[("plot", ["--store", "{%s}" % store], USAGE, "store") for store in READ_STORES],
    ("plot", ["--store", "{good}", "--out-dir", "{file}"], USAGE, "is a file; give a folder"),
    ("plot", ["--store", "{good}", "--out-dir", "-"], USAGE, "--out-dir -: files go into a folder here, not to standard output"),
    ("report", ["--store", "{good}", "--out-dir", "-"], USAGE, "--out-dir -: files go into a folder here, not to standard output"),
    # a loop of symbolic links: Path.exists() says False, and making a folder there failed later with exit 1
    ("report", ["--store", "{good}", "--out-dir", "{loop}/figures"], USAGE, "loop-a is a loop of symbolic links"),
    ("data", ["prepare", "ptb-char", "--to", "{loop}"], USAGE, "loop-a is a loop of symbolic links"),
    ("run", ["adding", *SMALL, "--store", "{loop}/r.db"], USAGE, "loop-a/r.db cannot exist: /"),
    # a link to nothing: making the folder failed at the end with "File exists", and -o wrote after the training
    ("report", ["--store", "{good}", "--out-dir", "{dangling}"], USAGE, "dangling is a symbolic link to "),
    ("run", ["adding", *SMALL, "--output", "{dangling}"], USAGE, "which does not exist"),
    ("run", ["adding", *SMALL, "--store", "{dangling}"], USAGE, "dangling is a symbolic link to "),
    ("data", ["prepare", "ptb-char", "--to", "-"], USAGE, "--to -: files go into a folder here"),
    ("plot", ["--store", "{good}", "--task", "copying"], USAGE, "no finished runs match"),
    ("plot", ["--store", "{good}", "--since", "last tuesday"], USAGE, "ISO-8601"),
    # -- atnbench stats ------------------------------------------------------------------------
    ("stats", ["--k", "0"], USAGE, "--k values must be >= 1"),
    ("stats", ["--k", "five"], USAGE, "--k takes whole numbers"),
    ("stats", ["--k", ","], USAGE, "--k needs at least one value"),
    ("stats", ["--iters", "-1"], USAGE, "--iters must be >= 0"),
    ("stats", ["--T", "0"], USAGE, "greater than or equal to 1"),
    ("stats", ["--T", BIG], USAGE, "needs ~"),
    ("stats", ["--hidden", "0"], USAGE, "hidden must be >= 1"),
    ("stats", ["--batch-size", "0"], USAGE, "must be >= 1"),
    ("stats", ["--hidden", "100000"], USAGE, "needs ~"),
    ("stats", ["--out-dir", "{file}"], USAGE, "is a file; give a folder"),
    ("stats", ["--threads", "0"], USAGE, "--threads must be between 1 and 1024"),
    ("stats", ["--device", "quantum"], USAGE, "quantum"),
    ("stats", ["--from-run", "nosuchrun", "--store", "{good}"], USAGE, "nosuchrun"),
    ("stats", ["--store", "{good}"], USAGE, "stats reads a store only with --from-run"),
    *[("stats", ["--from-run", "abc", "--store", "{%s}" % store], USAGE, "store") for store in READ_STORES],
    # -- atnbench invariances ------------------------------------------------------------------
    ("invariances", ["--seed", "abc"], USAGE, "'--seed'"),
    ("invariances", ["extra"], USAGE, "unexpected extra argument"),
    ("invariances", ["--nosuch"], USAGE, "No such option"),
    # -- atnbench gradcheck --------------------------------------------------------------------
    ("gradcheck", ["--k", "0"], USAGE, "--k values must be >= 1"),
    ("gradcheck", ["--k", "x"], USAGE, "--k takes whole numbers"),
    ("gradcheck", ["--T", "0"], USAGE, "--T must be >= 1"),
    ("gradcheck", ["--n", "0"], USAGE, "--n must be >= 1"),
    ("gradcheck", ["--eps", "-1"], USAGE, "--eps must be >= 0"),
    ("gradcheck", ["--eps", "nan"], USAGE, "finite"),
    ("gradcheck", ["--tol", "nan"], USAGE, "finite"),
    ("gradcheck", ["--tol", "inf"], USAGE, "finite"),
    ("gradcheck", ["--tol", "-1"], USAGE, "--tol must be >= 0"),
    ("gradcheck", ["--T", BIG], USAGE, "needs ~"),
    ("gradcheck", ["--n", "1000000"], USAGE, "needs ~"),
    # -- atnbench bench ------------------------------------------------------------------------
    ("bench", ["--workload", "sorting"], USAGE, "sorting"),
    ("bench", ["--workload", ","], USAGE, "--workload needs at least one value"),
    ("bench", ["--models", "transformer"], USAGE, "transformer"),
    ("bench", ["--k", "0"], USAGE, "--k values must be >= 1"),
    ("bench", ["--k", "x"], USAGE, "--k takes whole numbers"),
    ("bench", ["--reps", "0"], USAGE, "--reps must be >= 1"),
    ("bench", ["--warmup", "-1"], USAGE, "--warmup must be >= 0"),
    ("bench", ["--threads", "0"], USAGE, "--threads must be between 1 and 1024"),
    ("bench", ["--json", "--csv"], USAGE, "choose one of --json and --csv"),
    ("bench", ["--output", "{dir}"], USAGE, "is a folder"),
    ("bench", ["--output", "{file}/b.json"], USAGE, "is a file, not a folder"),
    ("bench", ["--output", "{dir}/new/"], USAGE, "ends with '/', a folder"),
    ("bench", ["--T", "0"], USAGE, "--T and --batch must be >= 1"),
    ("bench", ["--batch", "0"], USAGE, "--T and --batch must be >= 1"),
    ("bench", ["--T", BIG], USAGE, "needs ~"),
    ("bench", ["--device", "quantum"], USAGE, "quantum"),
    # -- atnbench report --verdicts -------------------------------------------------------------
    ("report", ["--store", "{good}", "--verdicts", "--baseline-margin", "-0.1"], USAGE, "--baseline-margin"),
    ("report", ["--store", "{good}", "--verdicts", "--baseline-margin", "1.5"], USAGE, "--baseline-margin"),
    ("report", ["--store", "{good}", "--verdicts", "--baseline-margin", "nan"], USAGE, "--baseline-margin"),
    ("report", ["--store", "{good}", "--verdicts", "--baseline-margin", "lots"], USAGE, "'--baseline-margin'"),
    ("report", ["--store", "{good}", "--verdicts", "--format", "csv"], USAGE, "--verdicts: choose --format"),
    ("report", ["--store", "{good}", "--verdicts", "--format", "latex"], USAGE, "--verdicts: choose --format"),
    ("report", ["--store", "{good}", "--verdicts", "--output", "{dir}/r.csv"], USAGE, "--verdicts: choose --format"),
    # -- atnbench runs list|show|compare|delete|export (a prefix: "run" matches run0..run2) ---------
    *[("runs", ["list", "--store", "{%s}" % store], USAGE, "store") for store in READ_STORES],
    *[("runs", [verb, *ids, "--store", "{%s}" % store], USAGE, "store")  # the same open_store as list
      for verb, ids in (("show", ["run0"]), ("compare", ["run0", "run1"]), ("export", []))
      for store in ("dropped", "missing")],
    ("runs", ["nosuch"], USAGE, "No such command"),
    ("runs", ["list", "--store", "{good}", "--status", "finished"], USAGE, "unknown status 'finished'"),
    ("runs", ["list", "--store", "{good}", "--ids", "-f", "json"], USAGE, "--ids prints one run id a line"),  # QA: ignored
    ("runs", ["list", "--store", "{good}", "--sweep", "nope"], USAGE, "no sweep named 'nope'"),
    ("runs", ["list", "--store", "{good}", "--norm", "xn"], USAGE, "bln, lstm, gru (lstm, gru: one plain cell)"),
    # a task no one knows and no run of the store has: a typo, as in report (not "no runs match", exit 0)
    ("runs", ["list", "--store", "{good}", "--task", "addng"], USAGE, "unknown task 'addng'"),
    ("runs", ["export", "--store", "{good}", "--task", "addng"], USAGE, "unknown task 'addng'"),
    ("store", ["export", "{dir}/out.jsonl", "--store", "{good}", "--task", "addng"], USAGE, "unknown task 'addng'"),
    ("runs", ["list", "--store", "{good}", "--since", "last tuesday"], USAGE, "ISO-8601"),
    ("runs", ["list", "--store", "{good}", "--since", "3x"], USAGE, "give an age (30m, 12h, 7d, 2w) or an ISO-8601"),
    ("runs", ["show", "--store", "{good}"], USAGE, "Missing argument"),
    ("runs", ["show", "nosuchrun", "--store", "{good}"], USAGE, "no run 'nosuchrun'"),
    ("runs", ["show", "run", "--store", "{good}"], USAGE, "matches 3 runs"),
    ("runs", ["show", "", "--store", "{good}"], USAGE, "no run ''"),
    ("runs", ["show", "run0", "--store", "{good}", "--points", "many"], USAGE, "'--points'"),
    ("runs", ["compare", "run0", "--store", "{good}"], USAGE, "at least two"),
    ("runs", ["compare", "run0", "run0", "--store", "{good}"], USAGE, "at least two"),
    ("runs", ["compare", "run0", "nosuchrun", "--store", "{good}"], USAGE, "no run 'nosuchrun'"),
    ("runs", ["compare", "run0", "run", "--store", "{good}"], USAGE, "matches 3 runs"),
    ("runs", ["compare", "run0", "run1", "--store", "{good}", "--plot", "{dir}/cmp.txt"], USAGE, ".png, .svg or .pdf"),
    ("runs", ["compare", "run0", "run1", "--store", "{good}", "--plot", "{file}/cmp.png"], USAGE, "is a file, not a folder"),
    ("runs", ["compare", "run0", "run1", "--store", "{good}", "--plot", "{dir}/x.png/.."], USAGE, "--plot"),
    *[("runs", ["delete", "run0", "--yes", "--store", "{%s}" % store], USAGE, "store") for store in READ_STORES],
    ("runs", ["delete", "--yes", "--store", "{good}"], USAGE, "Missing argument"),
    ("runs", ["delete", "nosuchrun", "--yes", "--store", "{good}"], USAGE, "no run 'nosuchrun'"),
    ("runs", ["delete", "run0", "run", "--yes", "--store", "{good}"], USAGE, "matches 3 runs"),
    ("runs", ["delete", "run0", "--store", "{good}"], FAILED, "nothing deleted"),  # no answer: nothing deleted
    ("runs", ["export", "--store", "{good}", "--format", "xml"], USAGE, "unknown --format 'xml'"),
    ("runs", ["export", "--store", "{good}", "--output", "{dir}"], USAGE, "is a folder"),
    ("runs", ["export", "--store", "{good}", "--output", "{file}/runs.csv"], USAGE, "is a file, not a folder"),
    ("runs", ["export", "--store", "{good}", "--output", "{dir}/new/"], USAGE, "ends with '/', a folder"),
    ("runs", ["export", "--store", "{good}", "--output", "-"], USAGE, "without --output the command prints"),
    # a file named for one format filled with another (QA: `run` refused JSON in a .csv, these wrote it)
    ("runs", ["export", "--store", "{good}", "-f", "json", "-o", "{dir}/runs.csv"], USAGE,
     "runs.csv: a .csv file holds csv, and --format json would write json into it; give --format csv"),
    ("report", ["--store", "{good}", "-f", "csv", "-o", "{dir}/report.json"], USAGE,
     "report.json: a .json file holds json, and --format csv would write csv into it"),
    ("report", ["--store", "{good}", "-f", "json", "-o", "{dir}/report.tex"], USAGE, "a .tex file holds latex"),
    ("runs", ["export", "--store", "{good}", "-f", "json", "-o", "{dir}/runs.md"], USAGE,  # not "give --format markdown"
     "a .md file holds markdown, and --format json would write json into it; give a file whose name says json"),
    ("runs", ["export", "--store", "{good}", "-o", "{dir}/runs.md"], USAGE, "runs export writes csv or json, which a .md"),
    ("report", ["--store", "{good}", "-o", "-"], USAGE, "without --output the command prints"),
    ("runs", ["export", "--store", "{good}", "--status", "finished"], USAGE, "unknown status 'finished'"),
    ("runs", ["export", "--store", "{good}", "--sweep", "nope", "-o", "{dir}/runs.csv"], USAGE, "no sweep named"),
    # -- atnbench store export|import|merge --------------------------------------------------------
    *[("store", ["export", "{dir}/out.jsonl", "--store", "{%s}" % store], USAGE, "store") for store in ("truncated", "missing")],
    ("store", ["export", "--store", "{good}"], USAGE, "Missing argument"),
    ("store", ["export", "{dir}", "--store", "{good}"], USAGE, "is a folder"),
    ("store", ["export", "{file}/out.jsonl", "--store", "{good}"], USAGE, "is a file, not a folder"),
    ("store", ["export", "{dir}/new/", "--store", "{good}"], USAGE, "ends with '/', a folder"),
    # a store is its SQLite file: `trail/` and `-` were created as files named `trail` and `-`
    ("store", ["merge", "{dir}/new/", "{good}"], USAGE, "ends with '/', a folder; give the path of the database"),
    ("store", ["merge", "-", "{good}"], USAGE, "- is not a results store"),
    ("store", ["import", "{jsonl}", "--store", "-"], USAGE, "- is not a results store"),
    ("run", ["adding", *SMALL, "--store", "{dir}/new/"], USAGE, "ends with '/', a folder; give the path of the database"),
    ("runs", ["list", "--store", "-"], USAGE, "- is not a results store"),
    # a bad --studies is refused before the runs' file is written (it was written, or replaced, first)
    ("store", ["export", "{dir}/out.jsonl", "--studies", "{good}", "--store", "{good}"], USAGE, "--studies"),
    ("store", ["export", "{dir}/out.jsonl", "--studies", "{dir}", "--store", "{good}"], USAGE, "is a folder"),
    ("store", ["export", "-", "--studies", "-", "--store", "{good}"], USAGE, "- is not the terminal here"),
    ("store", ["export", "{dir}/out.jsonl", "--studies", "{dir}/out.jsonl", "--store", "{good}"], USAGE,
     "the runs' file too"),
    # spelled another way (`..`): it was written over the runs' export, exit 0
    ("store", ["export", "{dir}/out.jsonl", "--studies", "{dir}/../adir/out.jsonl", "--store", "{good}"], USAGE,
     "the runs' file too"),
    ("store", ["export", "{dir}/out.jsonl", "--studies", "{dir}/new/", "--store", "{good}"], USAGE,
     "ends with '/', a folder"),
    ("store", ["export", "{dir}/out.jsonl", "--store", "{good}", "--status", "finished"], USAGE, "unknown status"),
    ("store", ["export", "{dir}/out.jsonl", "--store", "{good}", "--sweep", "nope"], USAGE, "no sweep named 'nope'"),
    *[("store", ["import", "{jsonl}", "--store", "{%s}" % store], USAGE, "store") for store in ("garbage", "folder", "dropped")],
    ("store", ["import", "--store", "{good}"], USAGE, "Missing argument"),
    ("store", ["import", "{missing_file}.jsonl", "--store", "{good}"], USAGE, "no such file"),
    ("store", ["import", "{dir}", "--store", "{good}"], USAGE, "is a folder"),
    ("store", ["import", "{jsonl_binary}", "--store", "{good}"], USAGE, "line 1: not UTF-8 text"),
    ("store", ["import", "{jsonl:garbage}", "--store", "{good}"], USAGE, "line 1: not JSON"),
    ("store", ["import", "{jsonl:cut}", "--store", "{good}"], USAGE,  # QA: "starting at at line 1"
     "jsonl-cut.jsonl line 1: not JSON (Unterminated string starting at: line 1, column 12)"),
    ("store", ["import", "{jsonl:newer}", "--store", "{good}"], USAGE, "newer than this atnbench"),
    ("store", ["import", "{jsonl:schema_text}", "--store", "{good}"], USAGE, "is not a number"),
    ("store", ["import", "{jsonl:list}", "--store", "{good}"], USAGE, "an array, not an object"),
    ("store", ["import", "{jsonl:missing}", "--store", "{good}"], USAGE, "missing status, config"),
    ("store", ["import", "{jsonl:status}", "--store", "{good}"], USAGE, "unknown status 'finished'"),
    ("store", ["import", "{jsonl:config}", "--store", "{good}"], USAGE, "config is not an object"),
    ("store", ["import", "{jsonl:curve}", "--store", "{good}"], USAGE, "curve and sweeps must be lists"),
    ("store", ["import", "{jsonl:run_id}", "--store", "{good}"], USAGE, "run_id is not a non-empty string"),
    ("store", ["import", "{jsonl:string}", "--store", "{good}"], USAGE, "a string, not an object"),
    ("store", ["import", "{jsonl:second_line}", "--store", "{good}"], USAGE, "line 2: not JSON"),
    ("store", ["import", "{jsonl:garbage}", "--store", "{missing}"], USAGE, "line 1: not JSON"),  # nothing created
    ("store", ["merge", "{dir}/all.db"], USAGE, "Missing argument"),
    ("store", ["merge", "{dir}/all.db", "{missing}"], USAGE, "no results store at"),
    ("store", ["merge", "{dir}/all.db", "{dir}"], USAGE, "is a folder; give the path of the database file"),
    *[("store", ["merge", "{dir}/all.db", "{%s}" % store], USAGE, "store") for store in ("garbage", "empty")],
    *[("store", ["merge", "{%s}" % store, "{good}"], USAGE, "store") for store in ("folder", "truncated")],
    ("store", ["merge", "{good}", "{good}"], USAGE, "is the output store"),
    ("store", ["merge", "{dir}/all.db", "{good}", "{good}"], USAGE, "name each store once"),
    # -- atnbench evaluate ----------------------------------------------------------------------
    *[("evaluate", ["run0", "--store", "{%s}" % store], USAGE, "store") for store in ("garbage", "empty", "missing")],
    ("evaluate", ["--store", "{good}"], USAGE, "Missing argument"),
    ("evaluate", ["nosuchrun", "--store", "{good}"], USAGE, "no run 'nosuchrun'"),
    ("evaluate", ["run", "--store", "{good}"], USAGE, "matches 3 runs"),
    ("evaluate", ["run0", "--store", "{good}"], USAGE, "has no best model in"),
    ("evaluate", ["run2", "--store", "{good}", "--weights", "final"], USAGE, "is not finished"),
    ("evaluate", ["run0", "--store", "{good}", "--weights", "worst"], USAGE, "unknown weights 'worst'"),
    ("evaluate", ["run0", "--store", "{good}", "--device", "quantum"], USAGE, "quantum"),
    # -- atnbench reproduce (every case fails before any part starts) ------------------------------
    ("reproduce", ["--dry-run", "--only", "table9"], USAGE, "--only: unknown part(s) table9"),
    ("reproduce", ["--dry-run", "--budget", "0"], USAGE, "--budget must be in (0, 1], got 0"),
    ("reproduce", ["--dry-run", "--budget", "nan"], USAGE, "--budget"),
    ("reproduce", ["--dry-run", "--budget", "table9=1"], USAGE, "unknown part 'table9'"),
    ("reproduce", ["--dry-run", "--budget", "0.5,table1-copying=2"], USAGE, "--budget must be in (0, 1], got 2"),
    ("reproduce", ["--dry-run", "--budget", "half"], USAGE, "'half' is not a number"),
    ("reproduce", ["--dry-run", "--seeds", "a,b"], USAGE, "--seeds"),
    ("reproduce", ["--dry-run", "--seeds", ""], USAGE, "--seeds"),
    ("reproduce", ["--dry-run", "--threads", "0"], USAGE, "--threads must be between 1 and 1024"),  # as sweep, stats, bench
    ("reproduce", ["--dry-run", "--workers", "0"], USAGE, "--workers must be >= 1"),
    ("reproduce", ["--dry-run", "--backend", "slurm"], USAGE, "unknown --backend"),
    ("reproduce", ["--dry-run", "--address", "head:6379"], USAGE, "--address is for --backend ray"),
    ("reproduce", ["--dry-run", "--device", "quantum"], USAGE, "quantum"),
    ("reproduce", ["--dry-run", "--out-dir", "{file}"], USAGE, "is a file; give a folder"),
    ("reproduce", ["--dry-run", "--out-dir", "{file}/report"], USAGE, "is a file, not a folder"),
    ("reproduce", ["--dry-run", "--only", "table4-ptb-char"], USAGE, "no part can run here"),
    *[("reproduce", ["--dry-run", "--store", "{%s}" % store], USAGE, "store") for store in ("garbage", "empty")],
    *[("reproduce", ["--report-only", "--out-dir", "{dir}/report", "--store", "{%s}" % store], USAGE, "store")
      for store in ("dropped", "missing")],
    # without --dry-run: refused before the first part's sweep starts (or creates a store)
    ("reproduce", ["--workers", "0"], USAGE, "--workers must be >= 1"),
    ("reproduce", ["--backend", "slurm"], USAGE, "unknown --backend"),
    ("reproduce", ["--out-dir", "{file}"], USAGE, "is a file; give a folder"),
    *[("reproduce", ["--store", "{%s}" % store], USAGE, "store") for store in ("under", "truncated")],
    *([("reproduce", ["--dry-run", "--backend", "ray"], USAGE, "needs Ray")]
      if importlib.util.find_spec("ray") is None else []),
    # -- atnbench data list|prepare|verify (nothing downloaded, nothing written) -------------------
    ("data", ["list", "--root", "{file}"], USAGE, "is a file; give a folder"),
    ("data", ["list", "extra"], USAGE, "unexpected extra argument"),
    ("data", ["prepare"], USAGE, "Missing argument"),
    ("data", ["prepare", "nosuch", "--to", "{dir}"], USAGE, "unknown dataset 'nosuch'"),
    ("data", ["prepare", "ptb", "--from", "hub", "--to", "{dir}"], USAGE, "cannot be prepared from 'hub'"),
    ("data", ["prepare", "ptb", "--from", "nosuch", "--to", "{dir}"], USAGE, "cannot be prepared from 'nosuch'"),
    ("data", ["prepare", "ptb-char", "--to", "{file}"], USAGE, "is a file; give a folder"),
    ("data", ["prepare", "ptb-char", "--to", "{file}/data"], USAGE, "is a file, not a folder"),
    ("data", ["verify", "nosuch", "--root", "{dir}"], USAGE, "unknown dataset 'nosuch'"),
    ("data", ["verify", "--root", "{file}"], USAGE, "is a file; give a folder"),
    ("data", ["verify", "--root", "{dir}"], USAGE, "no dataset found"),
    ("data", ["verify", "ptb", "--root", "{dir}"], FAILED, "no copy in"),  # asked for by name: a failed check
    # -- atnbench build (argument errors only: nothing is compiled) ----------------------------------
    ("build", ["extra"], USAGE, "unexpected extra argument"),
    ("build", ["--nosuch"], USAGE, "No such option"),
    ("build", ["--verbose=3"], USAGE, "--verbose"),
    # -- atnbench tasks / models / the top level -----------------------------------------------
    ("tasks", ["extra"], USAGE, "No such command 'extra'"),
    ("tasks", ["--nosuch"], USAGE, "No such option"),
    ("models", ["extra"], USAGE, "unexpected extra argument"),
    ("models", ["--nosuch"], USAGE, "No such option"),
    ("nosuch", [], USAGE, "No such command"),
    ("--nosuch", [], USAGE, "No such option"),
]

# Round two (issue 29): what used to end in a traceback, a hang, an unhelpful line or a silent
# accept. {corrupt}: a store whose run bad0 kept damaged best weights and another model's final
# ones; {huge}: a store whose run big0 is far too big to rebuild; {data}: garbled data files;
# {garbled_root}: a data root whose PTB copy is not text.
OVER_INT64, OVER_SEED = "1" + "0" * 21, str(2**32)
UNWRITABLE = "/proc/atnbench-no-such-dir"  # even root cannot create files in /proc
CASES += [
    # -- 1. tracebacks: overflowing numbers, out-of-range seeds, damaged kept weights --------------
    ("run", ["adding", "--lr", "1e308"], USAGE, "lr must be <= 3.40282e+38, got 1e+308"),
    ("run", ["adding", "--lr", "1e39"], USAGE, "lr must be <= 3.40282e+38"),
    ("run", ["adding", "--config", "{cfg:lr_huge}"], USAGE, "cfg-lr_huge.yaml: lr must be <= 3.40282e+38"),
    ("sweep", ["{sweep}", "--dry-run", "--lr", "1e308"], USAGE, "lr must be <= 3.40282e+38"),
    ("run", ["adding", "--seed", OVER_SEED], USAGE, f"seed must be <= 4294967295, got {OVER_SEED}"),
    ("run", ["adding", "--seed", OVER_INT64], USAGE, "seed must be <= 4294967295"),
    ("run", ["adding", "--config", "{cfg:seed_huge}"], USAGE, "seed must be <= 4294967295"),
    ("stats", ["--seed", OVER_SEED], USAGE, "seed must be <= 4294967295"),
    ("invariances", ["--seed", OVER_SEED], USAGE, "seed must be <= 4294967295"),
    ("invariances", ["--seed", "-1"], USAGE, "seed must be >= 0, got -1"),
    ("gradcheck", ["--seed", OVER_INT64], USAGE, "seed must be <= 4294967295"),
    ("sweep", ["{sweep}", "--dry-run", "--seeds", OVER_SEED], USAGE, "--seeds: seeds go from 0 to 4294967295"),
    ("sweep", ["{sweep}", "--dry-run", "--seeds", f"0-{OVER_INT64}"], USAGE, "--seeds: seeds go from 0 to"),
    ("sweep", ["{sweep}", "--dry-run", "--seeds", "5-3"], USAGE, "low <= high"),
    ("reproduce", ["--dry-run", "--seeds", f"1,{OVER_SEED}"], USAGE, "--seeds: seeds go from 0 to 4294967295"),
    ("run", ["adding", "--k", OVER_INT64], USAGE, f"--k {OVER_INT64} is out of range: whole numbers go up to"),
    ("run", ["adding", "--iters", OVER_INT64], USAGE, "--iters 1000000000000000000000 is out of range"),
    ("run", ["adding", "--config", "{cfg:k_huge}"], USAGE, "k must be <= 9223372036854775807"),
    ("run", ["adding", "--epochs", "1e308"], USAGE, "epochs must be at most"),
    ("run", ["adding", "--epochs", "0.0001"], USAGE, "epochs 0.0001 is less than one step (2000 steps per epoch)"),
    ("sweep", ["{sweep}", "--dry-run", "--eval-every", OVER_INT64], USAGE, "--eval-every 1000000000000000000000 is out"),
    ("report", ["--store", "{good}", "--T", OVER_INT64], USAGE, "--T 1000000000000000000000 is out of range"),
    ("runs", ["list", "--store", "{good}", "--T", "-" + OVER_INT64], USAGE, "is out of range"),
    ("runs", ["export", "--store", "{good}", "--T", OVER_INT64], USAGE, "is out of range"),
    ("report", ["--store", "{good}", "--since", "99999999999d"], USAGE, "--since 99999999999d: too long ago"),
    ("runs", ["list", "--store", "{good}", "--since", "9999999999999w"], USAGE, "too long ago"),
    ("gradcheck", ["--k", OVER_INT64], USAGE, "--k values must be <= 9223372036854775807"),
    ("bench", ["--k", OVER_INT64], USAGE, "--k values must be <= 9223372036854775807"),
    ("stats", ["--k", f"5,{OVER_INT64}"], USAGE, "--k values must be <= 9223372036854775807"),
    *[(command, [*args, "--threads", "100000"], USAGE, "--threads must be between 1 and 1024, got 100000")
      for command, args in (("run", ["adding"]), ("sweep", ["{sweep}", "--dry-run"]), ("stats", []), ("bench", []),
                            ("reproduce", ["--dry-run"]))],
    ("evaluate", ["bad0", "--store", "{corrupt}"], USAGE, "run bad0: its kept best weights are unreadable"),
    ("evaluate", ["bad0", "--store", "{corrupt}", "--weights", "final"], USAGE, "its kept final weights are unreadable"),
    ("stats", ["--from-run", "bad0", "--store", "{corrupt}", "--out-dir", "{dir}/stats"], USAGE,
     "run bad0: its kept best weights are unreadable"),
    # -- 2. hangs: sizes refused by the memory estimate before anything is built; plans capped ------
    ("evaluate", ["big0", "--store", "{huge}"], USAGE, "the model of run big0 needs ~"),
    ("stats", ["--from-run", "big0", "--store", "{huge}", "--out-dir", "{dir}/stats"], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--dry-run", "--layers", BIG], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--dry-run", "--hidden", "100000"], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--dry-run", "--batch-size", BIG], USAGE, "needs ~"),
    ("run", ["adding", "--layers", BIG, "--hidden", "1"], USAGE, "needs ~"),
    ("sweep", ["{sweep}", "--dry-run", "--seeds", "0-1000000"], USAGE, "names 1,000,001 seeds; a plan holds at most 1,000"),
    ("sweep", ["{sweep}", "--seeds", "0-100000"], USAGE, "a plan holds at most 1,000 runs"),
    ("sweep", ["{sweep}", "--dry-run", "--seeds", "0-999"], USAGE, "sweep tiny is 2,000 runs"),
    ("reproduce", ["--dry-run", "--seeds", "0-100000"], USAGE, "a plan holds at most 1,000 runs"),
    ("reproduce", ["--dry-run", "--seeds", "0-99"], USAGE, "the reproduce plan is"),
    ("reproduce", ["--seeds", "0-99"], USAGE, "the reproduce plan is"),
    # -- 3. unhelpful messages: one line naming the flag or the file ---------------------------------
    ("run", ["adding", "--variant", "--store", "{good}"], USAGE, "--variant needs a value, got the option --store"),
    ("runs", ["show", "run0", "--points", "--store", "{good}"], USAGE, "--points needs a value, got the option --store"),
    ("runs", ["show", "run0", "--points", "-1", "--store", "{good}"], USAGE, "--points must be >= 0"),
    ("reproduce", ["--dry-run", "--budget", ","], USAGE, "--budget: no budget in ','"),
    ("reproduce", ["--dry-run", "--budget", "=0.5"], USAGE, "--budget: unknown part ''"),
    ("reproduce", ["--dry-run", "--only", ","], USAGE, "--only: no part in ','"),
    ("run", ["ptb-char", "--data-files", "train={data}/bin.txt,validation={data}/ok.txt,test={data}/ok.txt"], USAGE,
     "bin.txt: is not UTF-8 text (byte 0xff at offset 0)"),
    ("run", ["ptb-char", "--data-files", "train={data}/ok.txt,validation={data}/empty.txt,test={data}/ok.txt"], USAGE,
     "/data/empty.txt: is empty"),
    ("run", ["ptb-char", "--data-files", "train={data}/blank.txt,validation={data}/ok.txt,test={data}/ok.txt"], USAGE,
     "blank.txt: holds only white space"),
    ("run", ["ptb-char", "--data-files", "train={data}/bad.parquet,validation={data}/bad.parquet,"
                                         "test={data}/bad.parquet"], USAGE, "bad.parquet: is not a Parquet file"),
    ("run", ["ptb-char", "--data-files", "train={data}/bad.json,validation={data}/bad.json,test={data}/bad.json"], USAGE,
     "bad.json: is not JSON (line 2:"),
    ("run", ["smnist-noise", "--data-files", "train={data}/short.csv,test={data}/short.csv"], USAGE,
     "short.csv: row 3 has 1 field(s), the header 3"),
    ("run", ["ptb-char", "--data-files", "train={data}/nosuffix,validation={data}/ok.txt,test={data}/ok.txt"], USAGE,
     "nosuffix: no suffix a reader knows"),
    ("run", ["ptb-char", "--data-files", "train={data},validation={data}/ok.txt,test={data}/ok.txt"], USAGE,
     "is a folder, not a file"),
    ("run", ["wikitext2", "--data-dir", "{data}/saved"], USAGE, "saved/dataset_dict.json: is not JSON"),
    ("run", ["smnist-noise", "--data-dir", "{data}/mnist"], USAGE, "mnist/test.csv: row 3 has 1 field(s), the header 3"),
    ("run", ["smnist-noise", "--data-files", "train={data}/narrow.csv,test={data}/narrow.csv"], USAGE,
     "smnist-noise data (--data-files): MNIST: expected 28 x 28 = 784 pixels per image, got 2"),
    ("sweep", ["{ptb_sweep}", "--data-files", "train={data}/ok.txt,validation={data}/empty.txt,test={data}/ok.txt"],
     USAGE, "empty.txt: is empty"),
    ("data", ["verify", "--root", "{garbled_root}"], FAILED, "ptb.char.train.txt: is not UTF-8 text"),
    ("data", ["verify", "ptb-char", "--root", "{garbled_root}"], FAILED, "ptb-char: FAILED in"),
    *([(command, [*args, flag, f"{UNWRITABLE}/{name}"], USAGE, f"{flag} {UNWRITABLE}/{name}: cannot write into /proc")
       for command, args, flag, name in (
           ("run", ["adding", *SMALL], "--output", "r.json"), ("bench", ["--T", "4"], "--output", "b.json"),
           ("report", ["--store", "{good}"], "--output", "r.md"), ("report", ["--store", "{good}"], "--out-dir", "figs"),
           ("plot", ["--store", "{good}"], "--out-dir", "figs"), ("stats", ["--iters", "1"], "--out-dir", "stats"),
           ("runs", ["export", "--store", "{good}"], "--output", "r.csv"),
           ("runs", ["compare", "run0", "run1", "--store", "{good}"], "--plot", "c.png"),
           ("reproduce", ["--dry-run"], "--out-dir", "report"), ("data", ["prepare", "ptb-char"], "--to", "data"))]
      + [("store", ["export", f"{UNWRITABLE}/x.jsonl", "--store", "{good}"], USAGE, "cannot write into /proc")]
      if Path("/proc/self").is_dir() else []),
    # -- 4. questionable accepts, refused ------------------------------------------------------------
    ("reproduce", ["--dry-run", "--budget", "0.25,0.5"], USAGE, "--budget: two budgets for every part (0.25 and 0.5)"),
    ("reproduce", ["--dry-run", "--budget", "table1-copying=1,table1-copying=0.5"], USAGE,
     "--budget: two budgets for table1-copying (1 and 0.5)"),
    ("reproduce", ["--dry-run", "--budget", "0.5,table2-adding=0.25,0.5"], USAGE, "two budgets for every part"),
    ("run", ["adding", "--momentum", "2"], USAGE, "momentum must be < 1, got 2.0"),
    ("run", ["adding", "--momentum", "1"], USAGE, "momentum must be < 1, got 1.0"),
    ("run", ["adding", "--config", "{cfg:momentum_one}"], USAGE, "cfg-momentum_one.yaml: momentum must be < 1"),
    ("sweep", ["{sweep}", "--dry-run", "--momentum", "1.5"], USAGE, "momentum must be < 1"),
    ("run", ["adding", "--bias-inside", "--bias-outside"], USAGE, "--bias-inside and --bias-outside both given; give one"),
    ("run", ["adding", "--no-affine", "--affine"], USAGE, "--affine and --no-affine both given; give one"),
    ("run", ["adding", "--keep-model", "--no-keep-model"], USAGE, "--keep-model and --no-keep-model both given"),
    ("run", ["smnist-noise", "--permute", "--no-permute"], USAGE, "--permute and --no-permute both given"),
    ("sweep", ["{sweep}", "--dry-run", "--bias-outside", "--bias-inside"], USAGE, "--bias-inside and --bias-outside both"),
    ("sweep", ["{sweep}", "--dry-run", "--affine", "--no-affine"], USAGE, "--affine and --no-affine both given"),
    ("runs", ["show", "run0", "--chart", "--no-chart", "--store", "{good}"], USAGE, "--chart and --no-chart both given"),
    ("stats", ["--from-run", "run0", "--k", "5", "--T", "50", "--store", "{good}"], USAGE,
     "--k, --T would be ignored with --from-run; give one or the other"),
    ("stats", ["--from-run=run0", "--seed=3", "--store", "{good}"], USAGE, "--seed would be ignored with --from-run"),
    ("reproduce", ["--dry-run", "--report-only"], USAGE, "--report-only would be ignored with --dry-run"),
    ("sweep", ["{sweep}", "--list"], USAGE, "--list shows every sweep; give it no name"),
]

# Round three (issue 40): the files a user hands in and the store as an output. {fifo}: a named
# pipe; {zero_link}: a link to /dev/zero; {latin1} {utf16} {alias_bomb} {deep_yaml}: settings
# files; {deep_json}: a config nested 100,000 deep; {huge_file}: a 9 MB task file in {outside};
# {mytasks}: user tasks whose data files are wrong in one way each (_round_three_world).
DEEP = 100_000
JSONL.update({  # top-level columns of a record say what its config says, typed as the config types them
    "top_norm": json.dumps({**RECORD, "norm": "atn"}) + "\n",
    "top_task": json.dumps({**RECORD, "task": "copying"}) + "\n",
    "top_T_true": json.dumps({**RECORD, "T": True}) + "\n",
    "top_seed_float": json.dumps({**RECORD, "seed": 1.0}) + "\n",
    "top_seed_huge": json.dumps({**RECORD, "seed": 2**70}) + "\n",
    "top_budget": json.dumps({**RECORD, "budget": 0.5}) + "\n",
    "config_T_true": json.dumps({**RECORD, "config": {**RECORD["config"], "T": True}}) + "\n",
    "config_seed_float": json.dumps({**RECORD, "config": {**RECORD["config"], "seed": 1.0}}) + "\n",
    "config_seed_huge": json.dumps({**RECORD, "config": {**RECORD["config"], "seed": 2**70}}) + "\n",
    "deep": "[" * DEEP + "]" * DEEP + "\n",
})
NOT_REGULAR = "not a regular file"


def _check(name: str) -> tuple:
    return ("tasks", ["check", name, "--include", "{mytasks}"])


CASES += [
    # -- one reader: kind, size, encoding, depth, aliases (config, task, claims, JSON Lines, data) ---
    ("run", ["adding", "--config", "{fifo}"], USAGE, "fifo.yaml: is a named pipe (FIFO), not a regular file"),
    ("run", ["adding", "--config", "{zero_link}"], USAGE, "is a character device (a link to /dev/zero), not a regular"),
    ("run", ["adding", "--config", "{latin1}"], USAGE, "latin1.yaml: is not UTF-8 text (byte 0xe9 at line 1, column 4; latin-1"),
    ("run", ["adding", "--config", "{utf16}"], USAGE, "utf16.yaml: is UTF-16 text; save it as UTF-8"),
    ("run", ["adding", "--config", "{alias_bomb}"], USAGE, "its aliases expand to more than 1,000,000 values"),
    ("run", ["adding", "--config", "{deep_yaml}"], USAGE, "deep.yaml: invalid YAML at line 1, column 101: nested deeper"),
    ("run", ["adding", "--config", "{deep_json}"], USAGE, "deep.json: not JSON we read (nested deeper than 100 levels)"),
    ("run", ["adding", "--config", "{huge_file}"], USAGE, "huge.yaml: is 9.0 MB; a settings file is at most 8.0 MB"),
    ("sweep", ["{fifo}", "--dry-run"], USAGE, "fifo.yaml: is a named pipe (FIFO)"),
    ("sweep", ["{alias_bomb}", "--dry-run"], USAGE, "its aliases expand to more than"),
    ("report", ["--store", "{good}", "--claims", "{fifo}"], USAGE, "fifo.yaml: is a named pipe (FIFO)"),
    ("report", ["--store", "{good}", "--claims", "{zero_link}"], USAGE, "is a character device (a link to /dev/zero)"),
    ("report", ["--store", "{good}", "--claims", "{utf16}"], USAGE, "is UTF-16 text"),
    ("report", ["--store", "{good}", "--claims", "{latin1}"], USAGE, "is not UTF-8 text (byte 0xe9"),
    ("report", ["--store", "{good}", "--claims", "{binary}"], USAGE, "is binary (it holds NUL bytes)"),
    ("report", ["--store", "{good}", "--claims", "{alias_bomb}"], USAGE, "its aliases expand to more than"),
    ("report", ["--store", "{good}", "--claims", "{deep_yaml}"], USAGE, "nested deeper than 100 levels"),
    *[(*_check(name), USAGE, said) for name, said in (
        ("pipe", "pipe.yaml: is a named pipe (FIFO), not a regular file"),
        ("latin1", "latin1.yaml: is not UTF-8 text (byte 0xe9 at line 1"),
        ("utf16", "utf16.yaml: is UTF-16 text"),
        ("binary", "binary.yaml: is binary (it holds NUL bytes), not UTF-8 text"),
        ("bomb", "bomb.yaml: invalid YAML at line"),
        ("deep", "deep.yaml: invalid YAML at line 1, column 101: nested deeper than 100 levels"))],
    ("tasks", ["check", "huge", "--include", "{outside}"], USAGE, "huge.yaml: is 9.0 MB; a settings file is at most"),
    ("tasks", ["check", "ptb-char"], USAGE, "ptb-char is a shipped task (`atnbench tasks` lists them)"),  # QA: "no task file"
    ("store", ["import", "{fifo}", "--store", "{good}"], USAGE, "fifo.yaml: is a named pipe (FIFO)"),
    ("store", ["import", "{zero_link}", "--store", "{good}"], USAGE, "is a character device (a link to /dev/zero)"),
    ("store", ["import", "{jsonl:deep}", "--store", "{good}"], USAGE, "line 1: not JSON we read (nested deeper than 100"),
    ("tasks", ["new", "x", "--from", "{fifo}", "--dir", "{dir}/new"], USAGE, "fifo.yaml: is a named pipe (FIFO)"),
    ("run", ["ptb-char", "--data-files", "train={pipe_txt},validation={pipe_txt},test={pipe_txt}"], USAGE,
     "pipe.txt: is a named pipe (FIFO), not a regular file"),
    ("tasks", ["new", "x", "--from", "{zero_link}", "--dir", "{dir}/new"], USAGE, "is a character device"),
    # -- the store as an output: never replaced, nor a device or a FIFO --------------------------------
    ("store", ["export", "{good}", "--store", "{good}"], USAGE, "good.db is the results store"),
    ("store", ["export", "{good_symlink}", "--store", "{good}"], USAGE, "is the results store"),
    ("store", ["export", "{good_hardlink}", "--store", "{good}"], USAGE, "is the results store"),
    ("runs", ["export", "--store", "{good}", "--output", "{good_symlink}"], USAGE, "is the results store"),
    ("report", ["--store", "{good}", "--output", "{good_hardlink}"], USAGE, "is the results store"),
    ("store", ["export", "{fifo}", "--store", "{good}"], USAGE, f"fifo.yaml is a named pipe (FIFO), {NOT_REGULAR}"),
    *([("store", ["export", device, "--store", "{good}"], USAGE, f"export to {device} is a character device, {NOT_REGULAR}")
       for device in ("/dev/null", "/dev/full") if Path(device).exists()]
      + [("run", ["adding", *SMALL, "--output", "/proc/version"], USAGE, "--output /proc/version: cannot write into /proc")]
      if Path("/proc/version").exists() else []),
    # -- store import: the top-level columns against the config; no coercion; 64 bits --------------
    ("store", ["import", "{jsonl:top_norm}", "--store", "{good}"], USAGE,
     "norm: 'atn' at the top level, 'ln' in config.norm"),
    ("store", ["import", "{jsonl:top_task}", "--store", "{good}"], USAGE, "task: 'copying' at the top level, 'adding'"),
    ("store", ["import", "{jsonl:top_budget}", "--store", "{good}"], USAGE, "budget: 0.5 at the top level, None in"),
    ("store", ["import", "{jsonl:top_T_true}", "--store", "{good}"], USAGE, "T: must be a number, got True"),
    ("store", ["import", "{jsonl:top_seed_float}", "--store", "{good}"], USAGE, "seed: must be a whole number ≥ 0, got 1.0"),
    ("store", ["import", "{jsonl:top_seed_huge}", "--store", "{good}"], USAGE,
     "seed: 1180591620717411303424 does not fit a 64-bit integer"),
    ("store", ["import", "{jsonl:config_T_true}", "--store", "{good}"], USAGE, "config.T: must be a number, got True"),
    ("store", ["import", "{jsonl:config_seed_float}", "--store", "{good}"], USAGE, "config.seed: must be a whole number"),
    ("store", ["import", "{jsonl:config_seed_huge}", "--store", "{good}"], USAGE, "does not fit a 64-bit integer"),
    # -- data files of a user task: every mistake one line naming file, field, column, row ---------
    *[(*_check(name), USAGE, said) for name, said in (
        ("complex-x", "complex_x.npz: data.x: array 'x' holds complex numbers"),
        ("complex-y", "complex_y.npz: data.y: array 'y' holds complex numbers"),
        ("mixed-labels", "mixed.npz: data.y ('y'): class labels of several kinds (text '1', a number 1, true/false True)"),
        ("empty-ids", "empty_ids.csv: data.id: 27 row(s) have an empty 'id' cell (the first: row 4)"),
        ("short-steps", "short_steps.parquet: data.y row 1: a per-step target needs one value per step (3), got 1"),
        ("looks-nct", "nct.npz: data.x: shape (8, 3, 40) reads as 3 steps of 40 channels; if it is (N, channels, T) "
                      "(aeon's layout) set data.layout: NCT"),
        ("text-time", "text_time.csv: data.time: column 'time' holds 't0' (row 1), neither a number nor an ISO 8601 date"),
        ("twice-time", "twice_time.csv: data.time: sequence 0 has time 0 twice (row 2)"),
        ("dated", "dated.parquet: data.x: column 'when' holds dates or times"),
        ("words", "words.csv: data.x: column 'v' holds non-numbers ('abc' in row 2)"),
        ("inf", "inf.csv: data.x: row 1, column 't1': non-finite value inf"),
        ("e400", "e400.csv: data.x: row 2, column 't0': non-finite value inf"),
        # inside float32's range, but not once standardized by the training split / once squared by the loss:
        # `tasks check` said ok and every run "diverged" at step 1
        ("standardized-past", "(big.npz, unit.npz): the val split: a value 3.3e+38 (channel 0) standardizes to 3.36805e+39"),
        ("square-past", "value 1e+20: its squared error is past float32's range"),
        ("zero-labels", "zero_labels.csv: column 'label' holds '1' and '01', which read as the same number 1"),
        ("aeon-lengths", "if it is (N, channels, T) (aeon's layout) set data.layout: NCT"),
        ("mixed-kinds", "(they are text where the training split's are a number: write the labels alike"),
        ("nan-label", "nan_label.csv: data.y row 3: target is NaN"),
        ("nan-long-label", "nan_long_label.csv: data.y: row 5 has no target"),
        ("missing-x", "long.csv: data.x: no column 'nosuch'"),
        ("wide-y", "wide_y.npz: data.y ('y'): sequence 1's class label is ndarray of shape (2,)"),
        ("dict-y", "dict_y.parquet: data.y ('y'): sequence 1's class label is dict with keys ['a', 'b']"),
        ("huge-token", "the token embedding of this task's data needs ~over 1000 TB"),
        ("no-channels", "no_channels.npz: data.x: the sequences have no channels (shape (8, 5, 0))"),
        ("nul", "nul.yaml: key 'data.train': a file name cannot hold a NUL character"),
        ("pickled", "pickled.npz: array 'x' holds Python objects: object arrays are read with pickle, which runs any code"),
        ("pickled-npy", "pickled_x.npy: holds Python objects"),
        ("fifo-data", "fifo.npz: is a named pipe (FIFO), not a regular file"),
        ("zero-data", "zero.csv: is a character device (a link to /dev/zero), not a regular file"),
        ("nct-table", "long.csv: data.layout: NCT is for NumPy arrays"))],
    ("run", ["pickled", "--include", "{mytasks}", "--store", "{dir}/s.db"], USAGE, "holds Python objects"),
    ("run", ["looks-nct", "--include", "{mytasks}", "--store", "{dir}/s.db"], USAGE, "set data.layout: NCT"),
]


class _Unpickled:
    """An object array element whose unpickling creates a file: the snapshot would show it."""

    def __init__(self, target: str):
        self.target = target

    def __reduce__(self):
        return (open, (self.target, "w"))


TASKS = {  # name -> task file (data files: _round_three_world)
    "complex-x": "problem: sequence-classification\ndata: {train: complex_x.npz}\n",
    "complex-y": "problem: sequence-regression\ndata: {train: complex_y.npz}\n",
    "mixed-labels": "problem: sequence-classification\ndata: {train: mixed.npz}\nallow_pickle: true\n",
    "empty-ids": "problem: sequence-classification\ndata: {train: empty_ids.csv, y: label, layout: long}\n",
    "short-steps": "problem: step-classification\ndata: {train: short_steps.parquet}\n",
    "looks-nct": "problem: sequence-classification\ndata: {train: nct.npz}\n",
    "text-time": "problem: sequence-classification\ndata: {train: text_time.csv, y: label, layout: long}\n",
    "twice-time": "problem: sequence-classification\ndata: {train: twice_time.csv, y: label, layout: long}\n",
    "dated": "problem: sequence-classification\ndata: {train: dated.parquet, y: label}\n",
    "words": "problem: sequence-classification\ndata: {train: words.csv, y: label, layout: long}\n",
    "inf": "problem: sequence-classification\ndata: {train: inf.csv, y: label}\n",
    "e400": "problem: sequence-classification\ndata: {train: e400.csv, y: label}\n",
    "standardized-past": "problem: sequence-classification\ndata: {train: unit.npz, validation: big.npz}\n",
    "square-past": "problem: sequence-regression\ndata: {train: far_target.npz}\n",
    "zero-labels": "problem: sequence-classification\ndata: {train: zero_labels.csv, y: label}\n",
    "aeon-lengths": "problem: sequence-classification\ndata: {train: aeon_lengths.npz, lengths: lengths}\n",
    "mixed-kinds": "problem: sequence-classification\ndata: {train: zero_labels_one_way.csv, validation: "
                   "text_labels.npz, y: label}\n",
    "nan-label": "problem: sequence-classification\ndata: {train: nan_label.csv, y: label}\n",
    "nan-long-label": "problem: sequence-classification\ndata: {train: nan_long_label.csv, y: label, layout: long}\n",
    "missing-x": "problem: sequence-classification\ndata: {train: long.csv, y: label, layout: long, x: [v, nosuch]}\n",
    "wide-y": "problem: sequence-classification\ndata: {train: wide_y.npz}\n",
    "dict-y": "problem: sequence-classification\ndata: {train: dict_y.parquet, y: y}\n",
    "huge-token": "problem: sequence-classification\ninputs: tokens\ndata: {train: huge_token.npz}\n",
    "no-channels": "problem: sequence-classification\ndata: {train: no_channels.npz}\n",
    "nul": 'problem: sequence-classification\ndata: {train: "d\\0.npz"}\n',
    "pickled": "problem: sequence-classification\ndata: {train: pickled.npz}\n",
    "pickled-npy": "problem: sequence-classification\ndata: {train: {x: pickled_x.npy, y: y.npy}}\n",
    "fifo-data": "problem: sequence-classification\ndata: {train: fifo.npz}\n",
    "zero-data": "problem: sequence-classification\ndata: {train: zero.csv}\n",
    "nct-table": "problem: sequence-classification\ndata: {train: long.csv, y: label, layout: NCT}\n",
}


def _csv(path: Path, header: str, rows: list) -> None:
    path.write_text(header + "\n" + "".join(",".join(map(str, row)) + "\n" for row in rows))


def _round_three_world(root: Path, outside: Path) -> dict[str, Path]:
    import numpy as np
    import pandas as pd

    paths = {"fifo": root / "fifo.yaml", "zero_link": root / "zero.yaml", "latin1": root / "latin1.yaml",
             "utf16": root / "utf16.yaml", "alias_bomb": root / "bomb.yaml", "deep_yaml": root / "deep.yaml",
             "deep_json": root / "deep.json", "huge_file": outside / "huge.yaml", "outside": outside,
             "mytasks": root / "mytasks", "good_symlink": root / "good-link.db", "good_hardlink": root / "good-hard.db"}
    os.mkfifo(paths["fifo"])
    paths["pipe_txt"] = root / "pipe.txt"  # a shipped task's data file (--data-files) that is a FIFO
    os.mkfifo(paths["pipe_txt"])
    paths["zero_link"].symlink_to("/dev/zero")
    paths["latin1"].write_bytes("caf\xe9: 1\n".encode("latin-1"))
    paths["utf16"].write_bytes("T: 8\n".encode("utf-16"))
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]
    paths["alias_bomb"].write_text("\n".join(levels) + "\n")
    paths["deep_yaml"].write_text("[" * 5000 + "]" * 5000 + "\n")
    paths["deep_json"].write_text("[" * DEEP + "]" * DEEP)
    paths["huge_file"].write_text("# " + "x" * (9 * 2**20) + "\nproblem: sequence-classification\n")
    os.link(root / "good.db", paths["good_hardlink"])
    paths["good_symlink"].symlink_to(root / "good.db")
    paths["dangling"] = root / "dangling"
    paths["dangling"].symlink_to(root / "missing" / "target")
    paths["loop"] = root / "loop-a"
    paths["loop"].symlink_to(root / "loop-b")
    (root / "loop-b").symlink_to(paths["loop"])

    tasks = paths["mytasks"]
    tasks.mkdir()
    for name, text in TASKS.items():
        (tasks / f"{name}.yaml").write_text(text)
    os.mkfifo(tasks / "pipe.yaml")
    for name in ("latin1", "utf16", "deep"):
        (tasks / f"{name}.yaml").write_bytes(paths["deep_yaml" if name == "deep" else name].read_bytes())
    (tasks / "binary.yaml").write_bytes(bytes(range(256)))
    (tasks / "bomb.yaml").write_text(paths["alias_bomb"].read_text())
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(8, 5, 2)), np.arange(8) % 2
    np.savez(tasks / "complex_x.npz", x=x + 1j, y=y)
    np.savez(tasks / "complex_y.npz", x=x, y=y + 1j)
    np.savez(tasks / "mixed.npz", x=x, y=np.array(["1", 1, 1.0, True] * 2, dtype=object))
    np.savez(tasks / "nct.npz", x=rng.normal(size=(8, 3, 40)), y=y)
    np.savez(tasks / "wide_y.npz", x=x, y=np.stack([y, y], 1))
    np.savez(tasks / "huge_token.npz", x=np.array([[1, 2, 10**12]] * 8), y=y)
    np.savez(tasks / "no_channels.npz", x=np.zeros((8, 5, 0)), y=y)
    evil = np.empty(8, dtype=object)
    evil[:] = [_Unpickled(str(root / "unpickled")) for _ in range(8)]
    np.savez(tasks / "pickled.npz", x=evil, y=y)
    np.save(tasks / "pickled_x.npy", evil)
    np.save(tasks / "y.npy", y)
    os.mkfifo(tasks / "fifo.npz")
    (tasks / "zero.csv").symlink_to("/dev/zero")
    long_rows = [(s, t, float(t), s % 2) for s in range(10) for t in range(3)]
    _csv(tasks / "long.csv", "id,time,v,label", long_rows)
    _csv(tasks / "empty_ids.csv", "id,time,v,label", [("" if s else s, t, v, c) for s, t, v, c in long_rows])
    _csv(tasks / "text_time.csv", "id,time,v,label", [(s, f"t{t}", v, c) for s, t, v, c in long_rows])
    _csv(tasks / "twice_time.csv", "id,time,v,label", [(0, 0, 1.0, 0), (0, 0, 2.0, 0), *long_rows[3:]])
    _csv(tasks / "words.csv", "id,time,v,label", [(s, t, "abc" if (s, t) == (0, 1) else v, c) for s, t, v, c in long_rows])
    _csv(tasks / "nan_long_label.csv", "id,time,v,label",
         [(s, t, v, "" if (s, t) == (1, 1) else c) for s, t, v, c in long_rows])
    _csv(tasks / "inf.csv", "label,t0,t1,t2", [(0, 1, "inf", 2), (1, 1, 2, 3), (0, 1, 2, 3)])
    _csv(tasks / "e400.csv", "label,t0,t1,t2", [(0, 1, 2, 2), (1, "1e400", 2, 3), (0, 1, 2, 3)])
    unit = np.tile(np.array([[0.9, 1.0], [1.1, 1.0]]), (8, 3, 1))[:, :5]  # channel 0: mean 1, std 0.1
    np.savez(tasks / "unit.npz", x=unit, y=y)
    np.savez(tasks / "big.npz", x=np.where(np.arange(unit.size).reshape(unit.shape) == 2, 3.3e38, unit), y=y)
    np.savez(tasks / "far_target.npz", x=x, y=np.where(np.arange(8) == 2, 1e20, 1.0))
    _csv(tasks / "zero_labels.csv", "label,t0,t1", [(1, 1, 2), ("01", 1, 2), (2, 1, 2), (1, 3, 4), (2, 3, 4)])
    np.savez(tasks / "aeon_lengths.npz", x=rng.normal(size=(8, 3, 12)), y=y, lengths=np.full(8, 10))
    _csv(tasks / "zero_labels_one_way.csv", "label,t0,t1", [(1, 1, 2), (2, 1, 2), (1, 3, 4), (2, 3, 4)])
    np.savez(tasks / "text_labels.npz", x=rng.normal(size=(4, 2, 1)), label=np.array(["1", "2", "1", "2"]))
    _csv(tasks / "nan_label.csv", "label,t0,t1,t2", [(0, 1, 2, 2), (1, 1, 2, 3), ("", 1, 2, 3), (1, 1, 2, 3)])
    nested = pd.DataFrame({"x": [[1.0, 2.0, 3.0]] * 4, "y": [[0]] * 2 + [[1]] * 2})
    nested.to_parquet(tasks / "short_steps.parquet")
    pd.DataFrame({"label": [0, 1, 0, 1], "when": pd.date_range("2024-01-01", periods=4), "t0": [1.0, 2.0, 3.0, 4.0]}
                 ).to_parquet(tasks / "dated.parquet")
    pd.DataFrame({"t0": [1.0, 2.0, 3.0, 4.0], "y": [{"a": 1, "b": 2}] * 4}).to_parquet(tasks / "dict_y.parquet")
    return paths


def _ids():
    seen: dict[str, int] = {}
    for command, args, _, _ in CASES:
        name = " ".join([command, *args])[:60]
        seen[name] = seen.get(name, 0) + 1
        yield name if seen[name] == 1 else f"{name} #{seen[name]}"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Every path the cases name, made once; the good store holds finished and failed runs."""
    root = tmp_path_factory.mktemp("bad-input")
    good = root / "good.db"
    with ResultsStore(good) as store:
        for i, norm in enumerate(("ln", "atn", "lstm")):
            config = {"task": "adding", "T": 8, "norm": norm, "k": 3, "seed": 0, "budget": 1.0, "lr": 1e-3}
            curve = [{"step": s, "wall_s": 0.1 * s, "train_loss": 0.2 / s, "val_loss": 0.25 / s} for s in (1, 2)]
            store.import_record({"run_id": f"run{i}", "status": "done" if i < 2 else "failed", "config": config,
                                 "summary": {"min_train_loss": 0.1, "min_val_loss": 0.125}, "curve": curve,
                                 "sweeps": ["tiny"]})
    with sqlite3.connect(good) as conn:  # out of WAL: any open for writing would now change the file
        conn.execute("PRAGMA journal_mode = DELETE")
    paths = {"good": good, "missing": root / "missing.db", "missing_file": root / "missing",
             "garbage": root / "garbage.db", "empty": root / "empty.db", "folder": root / "folder.db",
             "under": root / "afile" / "store.db", "truncated": root / "truncated.db", "dropped": root / "dropped.db",
             "dir": root / "adir", "file": root / "afile", "binary": root / "binary.yaml",
             "sweep": root / "tiny.yaml", "badsweep": root / "bad-sweep.yaml"}
    paths["garbage"].write_bytes(b"\x00\x01garbage, not a database\n" * 200)
    paths["empty"].write_bytes(b"")
    paths["folder"].mkdir()
    paths["dir"].mkdir()
    paths["file"].write_text("just a file\n")
    paths["binary"].write_bytes(bytes(range(256)) * 4)
    paths["sweep"].write_text(TINY_SWEEP)
    paths["badsweep"].write_text(TINY_SWEEP.replace("[ln, atn]}", "[atn], k: [3, 0]}"))
    big = root / "big.db"
    with ResultsStore(big) as store:
        for i in range(40):
            store.import_record({"run_id": f"r{i}", "status": "done", "config": {"task": "adding", "pad": "x" * 900}})
    paths["truncated"].write_bytes(big.read_bytes()[:12288])
    big.unlink()
    paths["dropped"].write_bytes(good.read_bytes())
    with sqlite3.connect(paths["dropped"]) as conn:
        conn.execute("DROP TABLE evals")
    paths.update(_round_two_world(root))
    paths.update(_round_three_world(root, tmp_path_factory.mktemp("outside")))
    for name, text in CONFIGS.items():
        (root / f"cfg-{name}.yaml").write_text(text)
        (root / f"cfg-{name}.json").write_text(text)
    paths["jsonl"], paths["jsonl_binary"] = root / "good.jsonl", root / "binary.jsonl"
    paths["jsonl"].write_text(json.dumps(RECORD) + "\n")
    paths["jsonl_binary"].write_bytes(b"\xff\xfe\x00" + bytes(range(256)) * 4)
    for name, text in JSONL.items():
        (root / f"jsonl-{name}.jsonl").write_text(text)
    return root, {key: str(value) for key, value in paths.items()}


DATA_FILES = {"bin.txt": b"\xff\xfe\x00" + bytes(range(256)), "ok.txt": b"a b c\nd e f\n", "empty.txt": b"",
              "blank.txt": b"  \n\n", "bad.parquet": b"PAR1 not really parquet", "nosuffix": b"a b\n",
              "bad.json": b'{"text": "a"}\n{broken\n', "short.csv": b"label,a,b\n1,2,3\n4\n",
              "narrow.csv": b"label,a,b\n1,2,3\n0,4,5\n",
              "saved/dataset_dict.json": b"{not json", "mnist/train.csv": b"label,a,b\n1,2,3\n4\n",
              "mnist/test.csv": b"label,a,b\n1,2,3\n4\n"}
PTB_SWEEP = "description: tiny ptb\ntask: ptb-char\nbase: {T: 8, steps: 1, hidden: 4, batch_size: 2}\ngrid: {norm: [ln]}\n"


def _store_with_kept_weights(path: Path, run_id: str, config: dict, weights: dict[str, bytes]) -> None:
    with ResultsStore(path) as store:
        store.import_record({"run_id": run_id, "status": "done", "config": config, "summary": {}, "curve": []})
        for kind, blob in weights.items():
            store.save_model(run_id, kind, 2, blob)
    with sqlite3.connect(path) as conn:  # out of WAL, as the good store: any write would show
        conn.execute("PRAGMA journal_mode = DELETE")


def _round_two_world(root: Path) -> dict[str, Path]:
    """{corrupt} and {huge} stores, garbled data files {data}, a data root {garbled_root} whose PTB
    copy is not text, and a tiny ptb-char sweep {ptb_sweep}."""
    import io

    import torch

    from atnbench.run.runspec import resolve_run

    tiny = resolve_run("adding", {"T": 8, "hidden": 8, "batch_size": 4, "steps": 2, "val_samples": 8}).to_dict()
    other_model = io.BytesIO()
    torch.save({"not.this.model": torch.zeros(3)}, other_model)
    _store_with_kept_weights(root / "corrupt.db", "bad0", tiny,
                             {"best": b"\x00\x01 not a torch file", "final": other_model.getvalue()})
    _store_with_kept_weights(root / "huge.db", "big0", {**tiny, "hidden": 10**6, "layers": 1000},
                             {"best": other_model.getvalue()})
    for name, blob in DATA_FILES.items():
        (root / "data" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "data" / name).write_bytes(blob)
    (root / "garbled-root" / "ptb").mkdir(parents=True)
    for split in ("train", "valid", "test"):
        (root / "garbled-root" / "ptb" / f"ptb.char.{split}.txt").write_bytes(DATA_FILES["bin.txt"])
    (root / "ptb-sweep.yaml").write_text(PTB_SWEEP)
    return {"corrupt": root / "corrupt.db", "huge": root / "huge.db", "data": root / "data",
            "garbled_root": root / "garbled-root", "ptb_sweep": root / "ptb-sweep.yaml"}


def _expand(args: list[str], root: Path, paths: dict[str, str]) -> list[str]:
    expanded = []
    for arg in args:
        if arg.startswith("{cfg:"):
            arg = str(root / f"cfg-{arg[5:-1]}.yaml")
        elif arg.startswith("{cfg_json:"):
            arg = str(root / f"cfg-{arg[10:-1]}.json")
        elif arg.startswith("{jsonl:"):
            arg = str(root / f"jsonl-{arg[7:-1]}.jsonl")
        else:
            arg = arg.format(**paths)
        expanded.append(arg)
    return expanded


def snapshot(root: Path) -> dict[str, tuple]:
    """Every file, folder and link under root as it stands: nothing may appear, go or change.

    A file is (size, mtime_ns, inode): a write moves its mtime (and a replacement its inode),
    as surely as it moves a hash of its bytes, at a stat instead of a read (~160 files, twice a
    case). A link is its target, read and not followed; a fifo or a folder is its kind. Left
    out: SQLite's own -wal/-shm files, which SQLite creates beside a WAL-mode database for any
    reader (read-only ones included) while the store file itself stays as it is."""
    found = {}
    folders = [(os.fspath(root), "")]
    while folders:  # scandir's entries carry their lstat (os.walk + relpath cost ~3x as much)
        folder, relative = folders.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.name.endswith(("-wal", "-shm")):
                    continue
                name = relative + entry.name
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISLNK(info.st_mode):
                    seen = ("link", os.readlink(entry.path))
                elif stat.S_ISREG(info.st_mode):
                    seen = ("file", info.st_size, info.st_mtime_ns, info.st_ino)
                else:
                    seen = (stat.S_IFMT(info.st_mode),)
                    if stat.S_ISDIR(info.st_mode):
                        folders.append((entry.path, name + os.sep))
                found[name] = seen
    return found


def row_counts(store: str) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{store}?mode=ro", uri=True)
    try:
        return {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("runs", "evals", "sweep_runs", "meta")}
    finally:
        conn.close()


def stderr_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def _dump(result) -> str:
    return f"exit {result.exit_code}\nstdout: {result.stdout!r}\nstderr: {result.stderr!r}\n{result.exception!r}"


_as_found: dict = {}


@pytest.mark.parametrize("command, args, code, message", CASES, ids=list(_ids()))
def test_bad_input(world, monkeypatch, command, args, code, message):
    root, paths = world
    monkeypatch.chdir(root)  # a default path (./atnbench-results) would show up in the snapshot
    monkeypatch.delenv("ATNBENCH_DEBUG", raising=False)
    monkeypatch.setenv("ATNBENCH_TASKS", "")  # --include sets it: restored (unset) after each case
    monkeypatch.setenv("ATNBENCH_DATA", str(root / "no-data-root"))  # never created: data commands write nothing
    # the world as the first case found it: every case leaves it so (a case that changed it fails
    # here, and so would every later one), so it is hashed once, not before each case again
    before, counts = _as_found.setdefault(root, (snapshot(root), row_counts(paths["good"])))
    result = invoke(command, *_expand(args, root, paths))
    lines = stderr_lines(result.stderr)
    assert result.exit_code == code, _dump(result)
    assert not isinstance(result.exception, Exception) or isinstance(result.exception, SystemExit), _dump(result)
    assert "Traceback" not in result.stdout + result.stderr
    assert len(lines) == 1 and message in lines[0], _dump(result)
    assert snapshot(root) == before and row_counts(paths["good"]) == counts


def test_the_matrix_is_big_enough():
    assert len(CASES) >= 450
    assert {command for command, *_ in CASES} >= {"run", "sweep", "report", "plot", "stats", "invariances",
                                                    "gradcheck", "bench", "tasks", "models", "runs", "store",
                                                    "evaluate", "reproduce", "data", "build"}
    verbs = {(command, args[0]) for command, args, *_ in CASES if command in ("runs", "store", "data") and args}
    assert verbs >= {("runs", verb) for verb in ("list", "show", "compare", "delete", "export")}
    assert verbs >= {("store", verb) for verb in ("export", "import", "merge")}
    assert verbs >= {("data", verb) for verb in ("list", "prepare", "verify")}


def test_sweep_list_counts_a_thousand_seeds_by_one():
    """`sweep --list --seeds 0-999` prices one seed's runs and multiplies (every seed has the same
    runs but for the seed): the count is the expansion's, without expanding 1,000 seeds."""
    from atnbench.sweep import expand, load_sweep

    def listed(seeds: str) -> dict:
        result = invoke("sweep", "--list", "--seeds", seeds, "--format", "json")
        assert result.exit_code == 0, _dump(result)
        return {row["name"]: row for row in json.loads(result.stdout)}

    three, thousand = listed("0-2"), listed("0-999")
    for name, row in three.items():
        assert row["runs"] == len(expand(load_sweep(name), seeds=(0, 1, 2)))
        assert thousand[name]["runs"] == row["runs"] // 3 * 1000
        assert math.isclose(thousand[name]["cpu_hours"], row["cpu_hours"] / 3 * 1000)


ATNBENCH = str(Path(sys.executable).parent / "atnbench")


@pytest.mark.parametrize("args, message", [
    (["run", "adding", "--lr", "inf"], "finite"),  # a usage error (typer's own parsing)
    (["sweep", "{sweep}", "--dry-run", "--store", "{folder}"], "is a folder"),  # one of atnbench's
    (["runs", "show", "run", "--store", "{good}"], "matches 3 runs"),  # a subcommand group's
])
def test_the_console_script_says_one_line_too(world, args, message):
    root, paths = world
    before = snapshot(root)
    env = {key: value for key, value in os.environ.items() if key != "ATNBENCH_DEBUG"}
    done = subprocess.run([ATNBENCH, *_expand(args, root, paths)], capture_output=True, text=True, cwd=root,
                          env=env, timeout=120)
    assert done.returncode == USAGE and "Traceback" not in done.stderr
    assert len(stderr_lines(done.stderr)) == 1 and message in done.stderr
    assert snapshot(root) == before


def test_atnbench_debug_keeps_the_traceback(world):
    root, paths = world
    done = subprocess.run([ATNBENCH, "report", "--store", paths["garbage"]], capture_output=True, text=True,
                          cwd=root, env={**os.environ, "ATNBENCH_DEBUG": "1"}, timeout=120)
    assert done.returncode != 0 and "Traceback" in done.stderr and "StoreError" in done.stderr


def test_help_states_the_exit_codes():
    result = invoke("--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for phrase in ("Exit codes", "1 a run failed or diverged", "2 bad usage or input", "130 interrupted"):
        assert phrase in text
