"""The verdict rule in words, and the numbers it names.

One home for them: the verdicts, the confirmatory studies and ``atnbench report --help`` read
them here (the help without importing the statistics).
"""

ALPHA = 0.05  # the family's level: each claims file's comparisons share it
MIN_SEEDS = 5  # no verdict, and no look of a study, below this many seeds a side (docs/reproducing.md says why)

RULE = (f"Each claims file is one family: its m distinct comparisons get alpha/m = {ALPHA:g}/m each. Decided only in a "
        "study planned before its runs (sweep --until-decided): Welch's t-test at planned looks with "
        "Lan-DeMets O'Brien-Fleming-type alpha spending; reproduced / contradicted when a look's boundary is "
        "crossed on the claimed / other side; equivalent when the repeated interval (two one-sided tests at "
        "alpha/m) lies inside the claim's margin; inconclusive when not decided by the last look or futile. "
        f"Seeds added without a plan: exploratory (numbers only). Fewer than {MIN_SEEDS} seeds a side: too few "
        "seeds. Both rows at the no-memory baseline: uninformative.")
