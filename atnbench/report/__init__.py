"""``atnbench report``: the results store as the ATN paper's tables, with the paper's numbers
beside ours, exports (Markdown, LaTeX, CSV, JSON) and figures.

- ``aggregate``: runs -> groups (task, T, budget) -> rows (model) of mean ± std over seeds;
- ``paper``: the paper's Tables 1-5 (``paper_values.yaml``) and the comparisons with them;
- ``render``: format-neutral table views and rich tables; ``export``: the other formats;
- ``plots``: loss curves, the k-ablation and the cost, as PNG and SVG files;
- ``rule``, ``verdicts``, ``study``: the verdict rule and the claims judged under it.

Nothing is imported here, so a module that needs one part (the help, the rule's words) does not
load the rest (torch with the aggregates).
"""
