"""Zero batch variance: steps at which every sequence of the batch has the same value (a time series
whose first days are 0 everywhere) on every path (loop, C++, Triton) of BN, BN-input (frame- and
sequence-wise) and BLN, in NormLSTM and NormGRU.

Where the rows are alike, BN's Jacobian is gain / sqrt(eps) on whatever differs between rows; over
a run of such steps that compounded to inf - inf = NaN in every weight (issue 38.3). Now such a
feature's rows share their mean gradient (``functional.share_alike``). That is exact for every
parameter (they move all rows alike there), so the parameters' gradients are checked against
central differences of the float64 reference (tests/reference.py), which perturbing parameters
leaves alike; values against the reference too; and a long constant prefix in float32 stays finite.
"""

from __future__ import annotations

import os

import pytest
import torch

if not torch.cuda.is_available():
    os.environ["TRITON_INTERPRET"] = "1"  # before the Triton kernels are imported (as test_triton_path)

from atnbench.nn import NormGRU, NormLSTM, fastpath, functional as F  # noqa: E402
from helpers import randomize  # noqa: E402
from reference import as_f64, layer_params, ref_norm_gru, ref_norm_lstm  # noqa: E402

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")
CELLS = {"lstm": NormLSTM, "gru": NormGRU}
NORMS = [("bn", {}), ("bn-input", {}), ("bn-input", {"bn_input_mode": "sequence"}), ("bln", {})]
CASES = [(c, n, o) for c in CELLS for n, o in NORMS]
IDS = [f"{c}-{n}{'-sequence' if o else ''}" for c, n, o in CASES]
PATHS = ("loop", "cpp", "triton")
TRITON = {("lstm", "bn"), ("gru", "bln")}  # its interpreter is slow: two cases here, every norm in test_triton_path
CONSTANT = [0, 1, 2, 3, 4, 5, 7]  # the same value in every row: a prefix, and one step in the middle


@pytest.fixture(scope="module", autouse=True)
def cpp():
    if not fastpath.build_cpp():
        pytest.fail("the C++ extension did not build:\n" + fastpath._cpp_state.get("error", ""))


def make(cell, norm, opts, backend, dtype=torch.float64, din=2, hidden=3):
    torch.manual_seed(0)
    model = CELLS[cell](din, hidden, norm=norm, backend=backend, **opts).to(DEVICE, dtype)
    return randomize(model, 0)


def series(T, B, constant, d=2, seed=1, dtype=torch.float64):
    """Random inputs, except at the steps ``constant``: one random value there for every row."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=torch.float64)
    for t in constant:
        x[t] = torch.randn(d, generator=g, dtype=torch.float64)
    return x.to(DEVICE, dtype)


def weights(T, B, H, seed=2):
    """Fixed random weights of the loss: the outputs, h_n and c_n."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(shape, generator=g, dtype=torch.float64) for shape in ((T, B, H), (1, B, H), (1, B, H))]


def loss_of(out, state, w):
    h, c = (state[0], state[1]) if isinstance(state, tuple) else (state, None)
    total = (out * w[0].to(out)).sum() + (h * w[1].to(h)).sum()
    return total if c is None else total + (c * w[2].to(c)).sum()


def reference(cell, norm, opts, model, x):
    """(out, h_n, c_n or None) of the float64 reference with the model's parameters."""
    args = dict(bn_input_mode=opts.get("bn_input_mode", "frame"))
    if cell == "lstm":
        return ref_norm_lstm(as_f64(x), layer_params(model), norm, **args)
    out, h = ref_norm_gru(as_f64(x), layer_params(model), norm, **args)
    return out, h, None


def reference_loss(cell, norm, opts, model, x, w):
    out, h, c = reference(cell, norm, opts, model, x)
    total = float((out * w[0].numpy()).sum() + (h * w[1].numpy()).sum())
    return total if c is None else total + float((c * w[2].numpy()).sum())


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_constant_steps_match_the_reference_values_and_gradients(cell, norm, opts):
    T, B = 10, 3
    x = series(T, B, CONSTANT)
    w = weights(T, B, 3)
    probe = make(cell, norm, opts, "loop")
    # one random direction over every parameter and the inputs of the steps where rows differ
    g = torch.Generator().manual_seed(3)
    directions = [torch.randn(p.shape, generator=g, dtype=torch.float64) for p in probe.parameters()]
    dx = torch.randn(x.shape, generator=g, dtype=torch.float64)
    dx[CONSTANT] = 0.0
    h = 1e-6
    with torch.no_grad():
        sides = []
        for sign in (1.0, -1.0):
            for p, d in zip(probe.parameters(), directions):
                p.add_(sign * h * d.to(p))
            sides.append(reference_loss(cell, norm, opts, probe, x + sign * h * dx.to(x), w))
            for p, d in zip(probe.parameters(), directions):
                p.sub_(sign * h * d.to(p))
    expected = (sides[0] - sides[1]) / (2 * h)
    ref_out, ref_h, ref_c = reference(cell, norm, opts, probe, x)
    for path in PATHS if (cell, norm) in TRITON and not opts else PATHS[:2]:
        model = make(cell, norm, opts, path)
        xg = x.clone().requires_grad_()
        out, state = model(xg)
        assert model.last_paths == (path,)
        torch.testing.assert_close(out.cpu(), torch.as_tensor(ref_out), rtol=1e-8, atol=1e-9)
        h_n = state[0] if isinstance(state, tuple) else state
        torch.testing.assert_close(h_n.cpu(), torch.as_tensor(ref_h), rtol=1e-8, atol=1e-9)
        if ref_c is not None:
            torch.testing.assert_close(state[1].cpu(), torch.as_tensor(ref_c), rtol=1e-8, atol=1e-9)
        grads = torch.autograd.grad(loss_of(out, state, w), [xg, *model.parameters()])
        assert all(bool(torch.isfinite(gr).all()) for gr in grads), path
        got = float((grads[0].cpu() * dx).sum()) + sum(float((gr.cpu() * d).sum())
                                                        for gr, d in zip(grads[1:], directions))
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-7), (path, got, expected)


@pytest.mark.parametrize("cell, norm, opts", CASES, ids=IDS)
def test_a_long_constant_prefix_trains_finite_in_float32(cell, norm, opts):
    """22 steps alike (Covid3Month's first days): before, every weight's gradient was NaN. Loop and
    C++ (Triton's interpreter takes ~1 min for this; the reference test above covers it, with a
    prefix long enough that the old kernels' gradients were off by orders of magnitude)."""
    paths = ("loop", "cpp")
    T, B, H = 24, 4, 4
    x64 = series(T, B, range(22), seed=5)
    w = weights(T, B, H, seed=6)
    expected = None
    for path, dtype in (("loop", torch.float64), *((p, torch.float32) for p in paths)):
        model = make(cell, norm, opts, path, dtype, hidden=H)
        out, state = model(x64.to(dtype))
        grads = torch.autograd.grad(loss_of(out, state, w), list(model.parameters()))
        assert all(bool(torch.isfinite(g).all()) for g in grads), (path, dtype)
        flat = torch.cat([g.detach().double().cpu().flatten() for g in grads])
        if expected is None:
            expected = flat
        else:  # float32 follows the float64 gradients
            torch.testing.assert_close(flat, expected, rtol=2e-3, atol=2e-3 * float(expected.abs().max()))


def test_alike_features_share_their_rows_mean_gradient_and_nothing_else_changes():
    """functional.batch_norm_steps: at a step whose feature 0 is the same in every row, that
    feature's rows get the mean of the gradients plain autograd gives; every other entry is
    bit for bit plain autograd's. With a mask, only the valid rows count and change."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    x[1, :, 0] = 0.7
    x[2, :3, 2] = -0.2  # alike over the 3 valid rows of step 2 (rows 3, 4 padded there)
    dy = torch.randn(3, 5, 4, generator=g, dtype=torch.float64)
    weight = torch.rand(4, generator=g, dtype=torch.float64) + 0.5
    mask = torch.ones(3, 5, 1, dtype=torch.bool)
    mask[2, 3:] = False

    def plain(x, mask):
        mean, var = F.masked_batch_moments(x, mask)
        return F.standardize(x, mean, var, 1e-5) * weight

    for m in (None, mask):
        a = x.clone().requires_grad_()
        (F.batch_norm_steps(a, 1e-5, weight, None, m)[0] * dy).sum().backward()
        b = x.clone().requires_grad_()
        (plain(b, m) * dy).sum().backward()
        shared = b.grad.clone()
        shared[1, :, 0] = b.grad[1, :, 0].mean()
        if m is not None:
            shared[2, :3, 2] = b.grad[2, :3, 2].mean()
        assert torch.equal(a.grad, shared)
        assert not torch.equal(a.grad, b.grad)


# ---------------------------------------------------------------------------------------------
# ATN-BN on a flat window: every row and every step of the window have the same value (its
# variance is 0). The true gradient compounds gain / sqrt(eps) step after step (NaN before);
# functional.cut_flat's rule: such a step's normalization passes no gradient back.

def flat_prefix(T, B, prefix, d=2, seed=7, dtype=torch.float64):
    """Random inputs after ``prefix`` steps of 0 in every row (the recurrence settles there)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, d, generator=g, dtype=torch.float64)
    x[:prefix] = 0.0
    return x.to(DEVICE, dtype)


@pytest.mark.parametrize("cell", CELLS)
def test_atn_bn_on_flat_windows_trains_finite_on_loop_and_cpp(cell):
    """A 40-step prefix of zeros (NaN in every weight before): three SGD steps stay finite in
    float32 on both paths, padded (lengths, the loop's masked window) too, and in float64 the two
    paths give the same gradients (the rule is the same on both)."""
    T, B, H = 44, 4, 4
    x = flat_prefix(T, B, 40)
    grads = {}
    for path in ("loop", "cpp"):
        for padded in (None, torch.tensor([T, 30, T, 41])):  # the masked window's rule too
            model = make(cell, "atn-bn", {"k": 4}, path, hidden=H)
            out, state = model(x, lengths=padded)
            assert model.last_paths == (path,)
            grads[path, padded is None] = torch.autograd.grad(loss_of(out, state, weights(T, B, H)),
                                                              list(model.parameters()))
            assert all(bool(torch.isfinite(g).all()) for g in grads[path, padded is None])
        for lengths in (None, torch.tensor([T, T - 1, T, T - 3])):
            model = make(cell, "atn-bn", {"k": 4}, path, torch.float32, hidden=H)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
            for _ in range(3):
                out, state = model(x.float(), lengths=lengths)
                loss = loss_of(out, state, weights(T, B, H))
                optimizer.zero_grad()
                loss.backward()
                assert bool(torch.isfinite(loss)), (path, lengths)
                assert all(bool(torch.isfinite(p.grad).all()) for p in model.parameters()), (path, lengths)
                optimizer.step()
    for dense in (True, False):
        for a, b in zip(grads["loop", dense], grads["cpp", dense]):
            torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("cell", CELLS)
def test_atn_bn_on_flat_windows_triton_equals_the_loop(cell):
    """The Triton kernels mark and cut the same windows, and two SGD steps stay finite (its
    interpreter on a CPU: a short sequence)."""
    T, B, H = 7, 3, 3
    x = flat_prefix(T, B, 5)
    grads = []
    for path in ("loop", "triton"):
        model = make(cell, "atn-bn", {"k": 2}, path, hidden=H)
        out, state = model(x)
        assert model.last_paths == (path,)
        grads.append(torch.autograd.grad(loss_of(out, state, weights(T, B, H)), list(model.parameters())))
    assert all(bool(torch.isfinite(g).all()) for g in grads[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, rtol=1e-7, atol=1e-9)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        out, state = model(x)
        loss = loss_of(out, state, weights(T, B, H))
        optimizer.zero_grad()
        loss.backward()
        assert bool(torch.isfinite(loss)) and all(bool(torch.isfinite(p.grad).all()) for p in model.parameters())
        optimizer.step()


def _plain_atn_bn(x, k, weight, history=None, cut=None):
    """ATN-BN by hand: window moments, standardization, the flat steps detached where ``cut`` says."""
    from atnbench.nn.window import step_moments, windowed_moments

    mean, var, _, _ = windowed_moments(step_moments(x, dim=1), k, history, x.dtype)
    y = F.standardize(x, mean.unsqueeze(1), var.unsqueeze(1), 1e-5)
    if cut is not None:
        y = torch.where(cut.unsqueeze(1), y.detach(), y)
    return y * weight


def test_cut_flat_cuts_exactly_the_flat_windows_and_changes_nothing_else():
    """functional.atn_bn_sequence: values bit for bit the plain computation's; gradients bit for bit
    plain autograd's where no window is flat, and plain autograd's with exactly the flat steps'
    normalization detached where some are (feature 0 of steps 1-4, equal in every row; feature 1
    alike in its rows at step 2 only, and feature 2 alike at steps 3-4 with different values: no
    window of those is flat). A continued sequence (window state) decides as the whole one."""
    k = 2
    g = torch.Generator().manual_seed(0)
    x = torch.randn(6, 5, 3, generator=g, dtype=torch.float64)
    dy = torch.randn(6, 5, 3, generator=g, dtype=torch.float64)
    weight = torch.rand(3, generator=g, dtype=torch.float64) + 0.5
    smooth = x.clone()
    x[1:5, :, 0] = 0.3
    x[2, :, 1] = -0.4
    x[3, :, 2], x[4, :, 2] = 0.1, 0.2
    cut = torch.zeros(6, 3, dtype=torch.bool)
    cut[2:5, 0] = True  # step 1's window also holds step 0, whose rows differ
    for data, expected_cut in ((smooth, None), (x, cut)):
        a = data.clone().requires_grad_()
        y = F.atn_bn_sequence(a, k, 1e-5, weight, None, None)[0]
        (y * dy).sum().backward()
        b = data.clone().requires_grad_()
        plain = _plain_atn_bn(F.share_alike(b), k, weight, cut=expected_cut)
        (plain * dy).sum().backward()
        assert torch.equal(y, plain)
        assert torch.equal(a.grad, b.grad)
    uncut = x.clone().requires_grad_()
    (_plain_atn_bn(F.share_alike(uncut), k, weight) * dy).sum().backward()
    assert not torch.equal(uncut.grad, a.grad)  # the cut is not a no-op
    moments = torch.stack([torch.stack(torch.var_mean(s, dim=0, unbiased=False)[::-1], -1) for s in x]).double()
    whole = F.flat_windows(x, moments, None, k)
    assert torch.equal(whole, cut)
    assert torch.equal(F.flat_windows(x[3:], moments[3:], moments[2:3], k), cut[3:])
