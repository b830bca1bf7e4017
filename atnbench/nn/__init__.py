"""atnbench.nn: normalizations for recurrent networks and the cells that use them.

    from atnbench.nn import NormLSTM, NormGRU
    from atnbench.nn.functional import assorted_time_norm
"""

from atnbench.nn import functional
from atnbench.nn.gru import NormGRU
from atnbench.nn.lstm import NormLSTM
from atnbench.nn.norms import (
    AssortedTimeBatchNorm,
    AssortedTimeNorm,
    BatchLayerNorm,
    LayerNorm,
    NoNorm,
    NormSpec,
    SequenceBatchNorm,
    SequenceNorm,
    StepBatchNorm,
)
from atnbench.registry import SCHEMES, NormScheme, get_scheme
from atnbench.nn.serialization import register as _register_safe_globals
from atnbench.nn.state import LSTMState, WindowedTensor, detach_state

# torch.load(path) (weights_only=True, torch's default) of a whole model holding these modules
_register_safe_globals()

__all__ = [
    "functional", "NormLSTM", "NormGRU", "NormSpec", "SequenceNorm", "NoNorm", "LayerNorm",
    "AssortedTimeNorm", "AssortedTimeBatchNorm", "StepBatchNorm", "SequenceBatchNorm",
    "BatchLayerNorm", "LSTMState", "WindowedTensor", "detach_state",
    "SCHEMES", "NormScheme", "get_scheme",
]
