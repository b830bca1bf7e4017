"""atnbench.data: the real datasets, read with Hugging Face ``datasets`` (one module each).

    from atnbench.data.mnist import load_mnist          # ylecun/mnist
    from atnbench.data.ptb import load_ptb_char         # Mikolov's ptb.char.*.txt
    from atnbench.data.wikitext import load_wikitext2   # Salesforce/wikitext, wikitext-2-v1
    from atnbench.data.imdb import load_imdb            # stanfordnlp/imdb

Each loader takes the run's ``options`` (``data_dir``, ``data_files``, ``hf_id``/``hf_config``,
dataset-specific keys) and raises ``DataUnavailable`` with one line saying what to fetch and
where when the data cannot be had. ``datasets`` is imported only when data is loaded.
"""

from atnbench.data.common import ENV_DATA, DataUnavailable, parse_data_files

__all__ = ["ENV_DATA", "DataUnavailable", "parse_data_files"]
