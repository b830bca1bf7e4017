"""WikiText-2 word-level language modelling, the ATN paper's Sect. 4.2.3 (Table 5).

The paper trains AWD-LSTM (Merity et al. 2018) with its LSTMs normalized: three layers,
embedding 400, hidden 1150, BPTT 70, batch 32, gradient-norm clipping 0.25, SGD at lr 30
(no momentum, no decay) switched to averaged SGD by the non-monotone criterion with n = 5
(``options.asgd_switch``, ``atnbench/run/schedule.py``), k = 25, 500 epochs; perplexity on the
validation and test streams (exp of the cross-entropy per word).

The model (``atnbench.zoo.AWDStyleLM``) keeps AWD-LSTM's shape: embedding 400 -> normalized LSTM
1150 -> 1150 -> 400 (the last layer is the embedding size, ``options.last_hidden``) -> a
decoder tied to the embedding (``options.tie_weights``), embeddings initialised U(-0.1, 0.1);
``layers`` and ``hidden`` come from the run config. Of AWD-LSTM's regularisers it keeps the
dropouts: embedding dropout (``dropoute`` 0.1, whole words), locked (variational) dropout on
the embedding output (``dropouti`` 0.65), between layers (``dropouth`` 0.2, the WikiText-2
setting) and on the last layer's output (``dropout`` 0.4). Left out: DropConnect on the
hidden-to-hidden weights (``wdrop`` 0.5), activation regularisation (AR, alpha 2) and temporal
activation regularisation (TAR, beta 1), weight decay 1.2e-6, the randomised BPTT length
(70, or 35 with probability 0.05, +-5), the learning-rate rescaling by sequence length, the
fine-tuning stage, and evaluation batch sizes 10 / 1 (``options.eval_batch_size`` sets
one; the training batch size by default). Expect perplexities above the paper's.
"""

from __future__ import annotations

import torch

from atnbench.tasks.real import language_model_task
from atnbench.zoo import DROPOUTS, AWDStyleLM

AWD_OPTIONS = ("last_hidden", "tie_weights", *DROPOUTS)  # what awd_source reads besides the embedding


def awd_source(name: str, load, config, device: torch.device):
    """An ``LMSource`` over the corpus ``load(options)`` returns, training an ``AWDStyleLM``
    (shared by wikitext2 and ptb-word)."""
    from atnbench.tasks.real import LMSource

    options = config.options
    embedding = int(options.get("embedding", 400))
    last_hidden = int(options.get("last_hidden", embedding))
    tie = bool(options.get("tie_weights", True))
    dropouts = {key: float(options[key]) for key in DROPOUTS if key in options}
    ids, vocab = load(options)

    def build_model(run_config):
        return AWDStyleLM(run_config, len(vocab), embedding, last_hidden, tie, **dropouts)

    return LMSource(name, ids, vocab, config, device, input_size=embedding, model_factory=build_model)


def make_source(config, device: torch.device):
    from atnbench.data.wikitext import load_wikitext2

    return awd_source("wikitext2", load_wikitext2, config, device)


SPEC = language_model_task(
    name="wikitext2",
    description="predict the next word of WikiText-2 with a 3-layer AWD-style LSTM (BPTT T, state carried)",
    measures="cross-entropy per word in nats; perplexity (ppl) on validation and test reported",
    input_size=400,  # the embedding size (options.embedding)
    output_size=33278,  # wikitext-2-v1's vocabulary; the source counts the real one
    reference="Pospisil, Zadorozhnyy & Ye (2024), Sect. 4.2.3 and Table 5; Merity, Keskar & Socher (2018)",
    make_source=make_source,
    metric="ppl",
    options=AWD_OPTIONS,
)
