"""Table 6 of the ATN paper (Appendix B), measured.

A layer computes a^(t) = W x^(t) for a (T, B, d) input sequence and normalizes it with LN,
ATN-LN, BN (batch statistics per step) or ATN-BN; no bias, no affine transform, eps = 0, so
each invariance is exact up to float64 rounding (outputs are O(1); rounding ~1e-15; we
call a cell "invariant" when the outputs agree to 1e-10 and "not invariant" when some output
moves by more than 1e-3 -- nothing measured falls in between).

The transformations, as defined by Ba et al. (Sect. 5.1, "Invariance under weights and data
transformations") and Appendix B of the ATN paper:

- weight matrix re-scaling:   W' = delta W
- weight matrix re-centering: W' = delta W + 1 gamma^T -- the same vector gamma added to
  every row (every neuron's incoming weights), so a'_i = delta a_i + gamma^T x for all i:
  one shift per example *and per time step*, common to all features.
- weight vector re-scaling:   one row w_i of W scaled by delta (a single neuron's weights).
- dataset re-scaling:         x' = delta x for every example and step.
- dataset re-centering:       x' = x + c (one constant vector for every example and step).
- single training case re-scaling: one example's whole sequence x_b' = delta x_b.
- input at a single time re-scaling: one example's input at one step, x_b^(t0)' = delta x_b^(t0).
"""

from __future__ import annotations

import pytest
import torch

from atnbench.analysis.invariances import draw
from atnbench.nn import functional as F

from reference import ref_atn_bn, ref_atn_ln, ref_bn_steps, ref_layer_norm

T, B, D, N, K = 8, 4, 5, 6, 3
DELTA = 2.5
T0, B0 = 2, 1  # the single time step / single example that gets re-scaled

INVARIANT_TOL = 1e-10
CHANGED_MIN = 1e-3




def data(seed=0):
    """The measured inputs of `atnbench invariances` (norms varying over time), at this file's sizes."""
    drawn = draw(N, seed)
    return drawn.x, drawn.W, drawn.gamma, drawn.c


NORMS = {
    "BN": lambda a: F.batch_norm_steps(a, 0.0)[0],
    "LN": lambda a: F.layer_norm(a, 0.0),
    "ATN-BN": lambda a: F.assorted_time_batch_norm(a, K, 0.0),
    "ATN-LN": lambda a: F.assorted_time_norm(a, K, 0.0),
}


def layer(norm, W, x):
    return NORMS[norm](torch.einsum("nd,tbd->tbn", W, x))


def transform(row, W, x, gamma, c):
    W2, x2 = W.clone(), x.clone()
    if row == "weight matrix re-scaling":
        W2 = DELTA * W
    elif row == "weight matrix re-centering":
        W2 = DELTA * W + torch.ones(N, 1, dtype=W.dtype) * gamma.unsqueeze(0)  # delta W + 1 gamma^T
    elif row == "weight vector re-scaling":
        W2[2] = DELTA * W[2]
    elif row == "dataset re-scaling":
        x2 = DELTA * x
    elif row == "dataset re-centering":
        x2 = x + c
    elif row == "single training case re-scaling":
        x2[:, B0] = DELTA * x[:, B0]
    elif row == "input at a single time re-scaling":
        x2[T0, B0] = DELTA * x[T0, B0]
    else:
        raise ValueError(row)
    return W2, x2


# Table 6 as printed (columns BN, LN, ATN-BN, ATN-LN; WN is not part of atnbench).
TABLE6 = {
    "weight matrix re-scaling":          {"BN": True, "LN": True, "ATN-BN": True, "ATN-LN": True},
    "weight matrix re-centering":        {"BN": False, "LN": True, "ATN-BN": False, "ATN-LN": False},
    "weight vector re-scaling":          {"BN": True, "LN": False, "ATN-BN": True, "ATN-LN": False},
    "dataset re-scaling":                {"BN": True, "LN": True, "ATN-BN": True, "ATN-LN": True},
    "dataset re-centering":              {"BN": True, "LN": False, "ATN-BN": True, "ATN-LN": False},
    "single training case re-scaling":   {"BN": False, "LN": True, "ATN-BN": False, "ATN-LN": True},
    "input at a single time re-scaling": {"BN": False, "LN": True, "ATN-BN": False, "ATN-LN": False},
}

CELLS = [(row, norm) for row in TABLE6 for norm in NORMS]


def measure(row, norm, seed=0):
    x, W, gamma, c = data(seed)
    W2, x2 = transform(row, W, x, gamma, c)
    return (layer(norm, W2, x2) - layer(norm, W, x)).abs().max().item()


@pytest.mark.parametrize("row,norm", CELLS)
def test_table6_cell(row, norm):
    """Every (row, column) of Table 6 for BN, LN, ATN-BN and ATN-LN, as the paper states it
    (all 28 cells measured agree with the paper)."""
    for seed in (0, 1, 2):
        diff = measure(row, norm, seed)
        if TABLE6[row][norm]:
            assert diff < INVARIANT_TOL, f"{norm} should be invariant to {row}: moved {diff:.3g}"
        else:
            assert diff > CHANGED_MIN, f"{norm} should NOT be invariant to {row}: moved only {diff:.3g}"


def test_atn_ln_single_time_rescaling_changes_exactly_the_window():
    """The key row: re-scaling x_b^(t0) leaves LN's output unchanged at every step; ATN-LN's
    output changes at steps t0..t0+k-1 of that example (the windows containing t0) and
    nowhere else."""
    x, W, gamma, c = data()
    W2, x2 = transform("input at a single time re-scaling", W, x, gamma, c)
    ln_diff = (layer("LN", W2, x2) - layer("LN", W, x)).abs()
    assert ln_diff.max() < INVARIANT_TOL
    diff = (layer("ATN-LN", W2, x2) - layer("ATN-LN", W, x)).abs().amax(dim=-1)  # (T, B)
    for t in range(T):
        for b in range(B):
            if b == B0 and T0 <= t < T0 + K:
                assert diff[t, b] > CHANGED_MIN, (t, b)
            else:
                assert diff[t, b] < INVARIANT_TOL, (t, b)


def test_single_time_rescaling_of_the_whole_batch_reading():
    """An alternative reading of the last row for batch methods: re-scale the input at t0 of
    *every* sequence in the batch. Per-step BN is then invariant (its statistics at t0 are
    that step's alone), ATN-BN is not (the window mixes t0 with its neighbours), LN yes,
    ATN-LN no. The paper's "No" for BN holds for one example's input (the reading above)."""
    x, W, _, _ = data()
    x2 = x.clone()
    x2[T0] = DELTA * x[T0]
    expected = {"BN": True, "LN": True, "ATN-BN": False, "ATN-LN": False}
    for norm, invariant in expected.items():
        diff = (layer(norm, W, x2) - layer(norm, W, x)).abs().max().item()
        assert (diff < INVARIANT_TOL) if invariant else (diff > CHANGED_MIN), (norm, diff)


def test_weight_recentering_with_constant_shift_in_time_keeps_atn():
    """Why ATN-LN loses weight re-centering: the shift gamma^T x^(t) differs between the
    steps of a window. If it is the same at every step (here: x constant along gamma), the
    window statistics absorb it and ATN-LN is invariant again."""
    x, W, gamma, _ = data()
    # make gamma^T x_b^(t) independent of t for every example: remove the part of x along
    # gamma and add back a per-example constant
    u = gamma / gamma.norm()
    x_perp = x - (x @ u).unsqueeze(-1) * u
    const = torch.randn(1, B, 1, dtype=x.dtype)
    x_c = x_perp + const * u
    W2 = W + torch.ones(N, 1, dtype=W.dtype) * gamma.unsqueeze(0)
    diff = (layer("ATN-LN", W2, x_c) - layer("ATN-LN", W, x_c)).abs().max().item()
    assert diff < INVARIANT_TOL
    # ...and with time-varying x it is not (the Table 6 "No")
    assert (layer("ATN-LN", W2, x) - layer("ATN-LN", W, x)).abs().max().item() > CHANGED_MIN


def test_invariance_measurements_use_correct_norms():
    """Guard for the measurement itself: the four layers are the reference normalizations."""
    x, W, _, _ = data()
    a = torch.einsum("nd,tbd->tbn", W, x)
    refs = {"BN": ref_bn_steps(a, 0.0)[0], "LN": ref_layer_norm(a, 0.0),
            "ATN-BN": ref_atn_bn(a, K, 0.0), "ATN-LN": ref_atn_ln(a, K, 0.0)}
    for norm, ref in refs.items():
        assert (layer(norm, W, x) - torch.as_tensor(ref)).abs().max().item() < 1e-10


def test_eps_breaks_exact_invariance_only_slightly():
    """With eps > 0 (as used in training) the 'Yes' cells hold up to ~eps / var: re-scaling
    by delta turns sigma^2 + eps into delta^2 sigma^2 + eps. Here eps = 1e-5 and var ~ 1, so
    a relative change of order (1 - 1/delta^2) * eps / 2 ~ 4e-6."""
    x, W, _, _ = data()
    y1 = F.assorted_time_norm(torch.einsum("nd,tbd->tbn", W, x), K, 1e-5)
    y2 = F.assorted_time_norm(torch.einsum("nd,tbd->tbn", DELTA * W, x), K, 1e-5)
    diff = (y1 - y2).abs().max().item()
    assert 0 < diff < 1e-4
