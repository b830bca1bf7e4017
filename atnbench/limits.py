"""The outer bounds every command checks its numbers against, in one place.

A value past one of these cannot work, whatever the machine: it would overflow where it is
stored or used (SQLite's integers, torch's seeds, float32 arithmetic), crash torch (a thread
count in the tens of thousands), or make a plan too big to list in seconds. Sizes (T, hidden,
layers, batch) have no fixed bound: the memory estimate of ``atnbench.run.resources`` refuses what
does not fit the machine.
"""

from __future__ import annotations

INT_MAX = 2**63 - 1  # the largest integer SQLite stores: every whole-number flag and config key
SEED_MAX = 2**32 - 1  # seeds every common generator takes (numpy's legacy seeding stops here)
FLOAT32_MAX = 3.4028234663852886e38  # numpy.finfo(numpy.float32).max: training is float32, a larger lr is inf
MAX_THREADS = 1024  # torch crashes (segfaults) at a few thousand threads
# stacked layers of one model: each is a module built, and stepped, one after another in Python,
# so 100,000 small ones fit in memory but took minutes to build before the first step (#40)
MAX_LAYERS = 1000
MAX_PLANNED_RUNS = 1000  # runs in one sweep or reproduce plan: listed in seconds; split --seeds for more
