"""Word-level Penn Treebank language modelling (Mikolov's split; AWD-LSTM's first benchmark).

Not in the ATN paper, which builds on AWD-LSTM (Merity et al. 2018) for its WikiText-2 run:
this task is that model on the corpus AWD-LSTM was tuned on, with AWD-LSTM's PTB settings
(``python main.py --batch_size 20 --data data/penn --dropouti 0.4 --dropouth 0.25 --epoch 500``):
three layers, embedding 400, hidden 1150, BPTT 70, batch 20, clip 0.25, SGD lr 30 then ASGD.
The model and what it leaves out of AWD-LSTM are the wikitext2 task's (``AWDStyleLM``,
``atnbench/tasks/wikitext2.py``); expect perplexities above AWD-LSTM's 58.8 (test, before
fine-tuning). Reported: perplexity on the validation and test streams. The vocabulary is the
corpus's 9,999 words plus ``<eos>`` (10,000).
"""

from __future__ import annotations

import torch

from atnbench.tasks.real import language_model_task
from atnbench.tasks.wikitext2 import AWD_OPTIONS


def make_source(config, device: torch.device):
    from atnbench.data.ptb import load_ptb_word
    from atnbench.tasks.wikitext2 import awd_source

    return awd_source("ptb-word", load_ptb_word, config, device)


SPEC = language_model_task(
    name="ptb-word",
    description="predict the next word of the Penn Treebank with a 3-layer AWD-style LSTM (BPTT T, state carried)",
    measures="cross-entropy per word in nats; perplexity (ppl) on validation and test reported",
    input_size=400,  # the embedding size (options.embedding)
    output_size=10000,  # 9,999 words + <eos>; the source counts the real one
    reference="Merity, Keskar & Socher (2018), AWD-LSTM on Penn Treebank; Mikolov et al. (2010)",
    make_source=make_source,
    metric="ppl",
    options=("ptb_format", *AWD_OPTIONS),
)
