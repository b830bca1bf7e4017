"""Character-level Penn Treebank language modelling, the ATN paper's Sect. 4.2.2 (Table 4).

Recipe: predict the next character of the training stream, read in segments of T = 220
characters by ``batch_size`` (32) parallel columns; the recurrent state, ATN window included,
is carried from one segment to the next (truncated BPTT) and reset at the start of every pass.
Loss: cross-entropy on every step; reported: bits per character (loss / ln 2) on the
validation and test streams, each scored as one long sequence per column.

The preset runs the authors' released code (ptb/main.py): one LSTM layer of 200 (the code ties
it to the embedding), Adam 1e-2, gradient-norm clipping 3, no decay, 150 epochs, k = 20; its
variant ``paper-text`` runs the paper text's 1000 units, learning rate x0.1 at epochs 80 and 90
(``options.lr_schedule``) and k = 10 (tasks/ptb-char.yaml quotes both). Characters enter
through an embedding of ``options.embedding`` (default 200, the code's --emsize); no dropout.
"""

from __future__ import annotations

import torch

from atnbench.tasks.real import language_model_task



def make_source(config, device: torch.device):
    from atnbench.data.ptb import load_ptb_char
    from atnbench.tasks.real import LMSource

    ids, vocab = load_ptb_char(config.options)
    return LMSource("ptb-char", ids, vocab, config, device, input_size=int(config.options.get("embedding", 200)))


SPEC = language_model_task(
    name="ptb-char",
    description="predict the next character of the Penn Treebank (segments of T, state carried across)",
    measures="cross-entropy per character in nats; bits per character (bpc) on validation and test reported",
    input_size=200,  # the embedding size; the source's own (options.embedding) is what the model gets
    output_size=50,  # the alphabet of Mikolov's files; the source counts the real one
    reference="Pospisil, Zadorozhnyy & Ye (2024), Sect. 4.2.2 and Table 4; Mikolov et al. (2012)",
    make_source=make_source,
    metric="bpc",
    options=("ptb_format",),
)
