"""atnbench.bench: what ``atnbench bench`` times (workloads, models, the timing harness)."""

from atnbench.bench.reference_atn import ReferenceATNLSTM
from atnbench.bench.timing import peak_memory_mb, saved_activation_bytes, time_workload
from atnbench.bench.workloads import WORKLOADS, Workload, build_model, get_workload, models, uses_k

__all__ = ["ReferenceATNLSTM", "peak_memory_mb", "saved_activation_bytes", "time_workload",
           "WORKLOADS", "models", "Workload", "build_model", "get_workload", "uses_k"]
