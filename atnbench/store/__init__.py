"""The embedded results store: one SQLite file holding every run, its curve and its sweeps.

By concern: ``schema`` (the tables, their version, the migrations), ``results`` (run reads and
writes: ``ResultsStore``), ``files`` (the file's default place and checks), ``provenance``
(where a run ran), ``errors``; moving runs between stores is ``atnbench.evidence.transfer``.
"""

from atnbench.store.errors import MalformedRow, StoreError, StoreMissing, UnknownRun
from atnbench.store.files import DEFAULT_STORE, SQLITE_HEADER, check_store_path
from atnbench.store.provenance import _torch_version, environment
from atnbench.store.results import EvalPoint, ResultsStore, RunRecord
from atnbench.store.schema import (
    FINAL_STATUSES,
    MIGRATIONS,
    MODEL_KINDS,
    RECORD_VERSION,
    SCHEMA_VERSION,
    STATUSES,
    STORE_TABLES,
)

__all__ = ["DEFAULT_STORE", "FINAL_STATUSES", "MIGRATIONS", "MODEL_KINDS", "RECORD_VERSION", "SCHEMA_VERSION",
           "SQLITE_HEADER", "STATUSES", "STORE_TABLES", "EvalPoint", "MalformedRow", "ResultsStore", "RunRecord",
           "StoreError", "StoreMissing", "UnknownRun", "_torch_version", "check_store_path", "environment"]
