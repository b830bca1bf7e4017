"""Slow, obviously-correct float64 reference implementations, written from the papers.

Nothing here imports atnbench. Every statistic is an explicit Python loop over time steps,
the window, the batch and the features, on float64 numpy arrays, following the equations:

- LN: Ba et al. (2016), eqs. 5-6 of the ATN paper.
- ATN-LN: Pospisil et al. (2024), eqs. 7-9. The window of step t (0-based here) is the steps
  max(0, t-k+1)..t; while t < k-1 it shrinks to 0..t (Fig. 1: "at t = 1 we use a standard
  LN; at t = 2 we normalize using information from time steps 1, 2").
- ATN-BN: the same window, pooled with the batch, per feature (Table 6 of the ATN paper).
- BN per step: batch statistics per feature at each step (Cooijmans et al., eq. 5; Laurent
  et al.'s frame-wise BN, eq. 19).
- Sequence-wise BN: Laurent et al. eqs. 20-21, per feature over the unpadded frames.
- BLN: Ziaee & Cano, Algorithm 1, eqs. 10-17. DOCUMENTED DEVIATION, mirrored on purpose:
  atnbench puts eps inside the root of the feature std (eq. 13 has none) so that a constant
  vector (e.g. W_h h with h0 = 0) does not divide by zero. ``ref_bln`` does the same.
- LSTM / GRU cells with a normalization per term: ATN paper eqs. 14-16 (Ba et al.'s LN-LSTM,
  Cooijmans et al.'s BN-LSTM with their normalizations in place of ATN), nn.LSTM gate order
  (i, f, g, o) and nn.GRU gate order (r, z, n).
- Proposition 1 (eqs. 11-13, Appendix A eqs. A1-A13): the closed-form derivative
  dy_i(t)/da_i(t-m), with the upstream a's taken as independent inputs.

All functions take array-likes (torch tensors are accepted) and return float64 numpy arrays.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np


def as_f64(x) -> np.ndarray:
    """A float64 numpy copy of a torch tensor / array / list."""
    if hasattr(x, "detach"):
        x = x.detach().cpu().double().numpy()
    return np.array(x, dtype=np.float64)


def _opt(v) -> Optional[np.ndarray]:
    return None if v is None else as_f64(v)


def _affine(value: float, gain: Optional[np.ndarray], shift: Optional[np.ndarray], i: int) -> float:
    if gain is not None:
        value = gain[i] * value
    if shift is not None:
        value = value + shift[i]
    return value


# --------------------------------------------------------------------------------------
# LN (Ba et al.; ATN paper eqs. 5-6)
# --------------------------------------------------------------------------------------

def moments(values) -> tuple[float, float]:
    """Mean and biased variance of a list of scalars, summed one by one in float64: every
    statistic below (LN, BN, ATN, BLN, sequence-wise BN) is these two over a different set."""
    total = 0.0
    for v in values:
        total += v
    mu = total / len(values)
    sq = 0.0
    for v in values:
        sq += (v - mu) ** 2
    return mu, sq / len(values)


def ref_ln_vector(a: np.ndarray, eps: float, gain=None, shift=None) -> np.ndarray:
    """LN of one vector a in R^n: mu = 1/n sum a_i, sigma^2 = 1/n sum (a_i - mu)^2 (eq. 5)."""
    n = len(a)
    mu, var = moments([a[i] for i in range(n)])
    out = np.empty(n)
    for i in range(n):
        out[i] = _affine((a[i] - mu) / math.sqrt(var + eps), gain, shift, i)  # eq. 6
    return out


def ref_layer_norm(x, eps: float = 1e-5, weight=None, bias=None) -> np.ndarray:
    """LN of every row (the last axis) of x, any leading shape."""
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    rows = x.reshape(-1, x.shape[-1])
    out = np.empty_like(rows)
    for r in range(rows.shape[0]):
        out[r] = ref_ln_vector(rows[r], eps, gain, shift)
    return out.reshape(x.shape)


# --------------------------------------------------------------------------------------
# ATN-LN (eqs. 7-9)
# --------------------------------------------------------------------------------------

def window_steps(t: int, k: int) -> list[int]:
    """The steps in the window of step t (0-based): t-k+1..t, cut at 0 while t < k-1."""
    return [t - j for j in range(k) if t - j >= 0]


def ref_atn_ln_step(seq: np.ndarray, t: int, k: int, eps: float, gain=None, shift=None) -> np.ndarray:
    """ATN-LN output at step t of ``seq`` (steps, B, n); only seq[:t+1] is read.

    mu_{t,k} = 1/(n k') sum_j sum_s a_s^(t-j)            (eq. 7)
    sigma^2_{t,k} = 1/(n k') sum_j sum_s (a_s^(t-j) - mu)^2  (eq. 8)
    y^(t) = gamma * (a^(t) - mu) / sqrt(sigma^2 + eps) + beta  (eq. 9)
    with k' = number of steps in the window (k once t >= k-1).
    """
    steps = window_steps(t, k)
    batch, n = seq.shape[1], seq.shape[2]
    out = np.empty((batch, n))
    for b in range(batch):
        mu, var = moments([seq[tj, b, s] for tj in steps for s in range(n)])
        for i in range(n):
            out[b, i] = _affine((seq[t, b, i] - mu) / math.sqrt(var + eps), gain, shift, i)
    return out


def ref_atn_ln(x, k: int, eps: float = 1e-5, weight=None, bias=None, past=None) -> np.ndarray:
    """ATN-LN of a (T, B, n) sequence. ``past``: (h, B, n) raw values of earlier steps
    (continuation of a sequence); the output covers x's steps only."""
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    seq = x if past is None else np.concatenate([as_f64(past), x], axis=0)
    offset = seq.shape[0] - x.shape[0]
    return np.stack([ref_atn_ln_step(seq, offset + t, k, eps, gain, shift) for t in range(x.shape[0])])


# --------------------------------------------------------------------------------------
# ATN-BN: per feature, the window pooled with the batch
# --------------------------------------------------------------------------------------

def ref_atn_bn_step(seq: np.ndarray, t: int, k: int, eps: float, gain=None, shift=None):
    """ATN-BN at step t of ``seq`` (steps, B, n): per feature i, mean and (biased) variance
    over all batch entries of the window's steps. Returns (y (B, n), mean (n,), var (n,))."""
    steps = window_steps(t, k)
    batch, n = seq.shape[1], seq.shape[2]
    out = np.empty((batch, n))
    means, variances = np.empty(n), np.empty(n)
    for i in range(n):
        mu, var = moments([seq[tj, b, i] for tj in steps for b in range(batch)])
        means[i], variances[i] = mu, var
        for b in range(batch):
            out[b, i] = _affine((seq[t, b, i] - mu) / math.sqrt(var + eps), gain, shift, i)
    return out, means, variances


def ref_atn_bn(x, k: int, eps: float = 1e-5, weight=None, bias=None, past=None, return_stats=False):
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    seq = x if past is None else np.concatenate([as_f64(past), x], axis=0)
    offset = seq.shape[0] - x.shape[0]
    results = [ref_atn_bn_step(seq, offset + t, k, eps, gain, shift) for t in range(x.shape[0])]
    y = np.stack([r[0] for r in results])
    if return_stats:
        return y, np.stack([r[1] for r in results]), np.stack([r[2] for r in results])
    return y


# --------------------------------------------------------------------------------------
# BN per step (Cooijmans et al.; Laurent et al. frame-wise)
# --------------------------------------------------------------------------------------

def ref_bn_step(a: np.ndarray, eps: float, gain=None, shift=None, mean=None, var=None):
    """BN of one step a (B, n) with per-feature batch statistics (or the given ones).
    Returns (y, mean (n,), biased var (n,))."""
    batch, n = a.shape
    out = np.empty((batch, n))
    means, variances = np.empty(n), np.empty(n)
    for i in range(n):
        if mean is None:
            mu, v = moments([a[b, i] for b in range(batch)])
        else:
            mu, v = mean[i], var[i]
        means[i], variances[i] = mu, v
        for b in range(batch):
            out[b, i] = _affine((a[b, i] - mu) / math.sqrt(v + eps), gain, shift, i)
    return out, means, variances


def ref_bn_steps(x, eps: float = 1e-5, weight=None, bias=None):
    """BN with separate batch statistics at every step of a (T, B, n) sequence."""
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    results = [ref_bn_step(x[t], eps, gain, shift) for t in range(x.shape[0])]
    return (np.stack([r[0] for r in results]), np.stack([r[1] for r in results]),
            np.stack([r[2] for r in results]))


# --------------------------------------------------------------------------------------
# Sequence-wise BN (Laurent et al., eqs. 20-21)
# --------------------------------------------------------------------------------------

def ref_seq_bn(x, eps: float = 1e-5, weight=None, bias=None, lengths=None):
    """Per feature k: mean and variance over the unpadded frames (t < lengths[b]) of the
    whole (T, B, n) batch, n_frames = number of unpadded frames; applied to every frame."""
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    steps, batch, n = x.shape
    lens = [steps] * batch if lengths is None else [int(v) for v in as_f64(lengths)]
    out = np.empty_like(x)
    means, variances = np.empty(n), np.empty(n)
    for i in range(n):
        mu, var = moments([x[t, b, i] for b in range(batch) for t in range(lens[b])])  # eqs. 20-21
        means[i], variances[i] = mu, var
        for t in range(steps):
            for b in range(batch):
                out[t, b, i] = _affine((x[t, b, i] - mu) / math.sqrt(var + eps), gain, shift, i)
    return out, means, variances


# --------------------------------------------------------------------------------------
# BLN (Ziaee & Cano, Algorithm 1, eqs. 10-17)
# --------------------------------------------------------------------------------------

def ref_bln_step(a: np.ndarray, eps: float, gain=None, shift=None, given: Optional[dict] = None):
    """BLN of one step a (m, d). ``given`` may hold population statistics replacing the
    current batch's (Algorithm 2, eqs. 18-21): batch_mean (d,), batch_std (d,),
    feature_mean (scalar or (m,)), feature_std (scalar or (m,)).

    Eq. 13 DEVIATION (mirrors atnbench, on purpose): sigma_F = sqrt(1/d sum (x - mu_F)^2 + eps);
    the paper has no eps there. When a mean is given but its std is not, the std is taken
    around the mean in use (eqs. 19, 21, "False" branch)."""
    given = given or {}
    m, d = a.shape
    mu_b, sd_b = np.empty(d), np.empty(d)
    for k in range(d):
        if "batch_mean" in given:
            mu_b[k] = given["batch_mean"][k]
        else:
            s = 0.0
            for i in range(m):
                s += a[i, k]
            mu_b[k] = s / m  # eq. 10
        if "batch_std" in given:
            sd_b[k] = given["batch_std"][k]
        else:
            sq = 0.0
            for i in range(m):
                sq += (a[i, k] - mu_b[k]) ** 2
            sd_b[k] = math.sqrt(sq / m + eps)  # eq. 11 (eps inside the root)
    mu_f, sd_f = np.empty(m), np.empty(m)
    for i in range(m):
        if "feature_mean" in given:
            mu_f[i] = np.broadcast_to(given["feature_mean"], (m,))[i]
        else:
            s = 0.0
            for k in range(d):
                s += a[i, k]
            mu_f[i] = s / d  # eq. 12
        if "feature_std" in given:
            sd_f[i] = np.broadcast_to(given["feature_std"], (m,))[i]
        else:
            sq = 0.0
            for k in range(d):
                sq += (a[i, k] - mu_f[i]) ** 2
            sd_f[i] = math.sqrt(sq / d + eps)  # eq. 13 + the documented eps deviation
    out = np.empty((m, d))
    w_batch = 1.0 - (1.0 / m + eps)
    w_feature = 1.0 / m - eps
    for i in range(m):
        for k in range(d):
            x_hat = (a[i, k] - mu_b[k]) / sd_b[k]  # eq. 14
            x_hat2 = (a[i, k] - mu_f[i]) / sd_f[i]  # eq. 15
            mixed = (w_batch * x_hat + w_feature * x_hat2) / math.sqrt(d)  # eq. 16
            out[i, k] = _affine(mixed, gain, shift, k)  # eq. 17
    stats = {"batch_mean": mu_b, "batch_std": sd_b, "feature_mean": mu_f, "feature_std": sd_f}
    return out, stats


def ref_bln(x, eps: float, weight=None, bias=None, given_per_step: Optional[list] = None):
    """BLN of every step of a (T, B, n) sequence (or a (B, n) step). Returns (y, stats) with
    stats stacked over steps."""
    x = as_f64(x)
    gain, shift = _opt(weight), _opt(bias)
    single = x.ndim == 2
    seq = x[None] if single else x
    outs, stats = [], []
    for t in range(seq.shape[0]):
        given = None if given_per_step is None else given_per_step[t]
        y, st = ref_bln_step(seq[t], eps, gain, shift, given)
        outs.append(y)
        stats.append(st)
    y = np.stack(outs)
    stacked = {name: np.stack([s[name] for s in stats]) for name in stats[0]}
    if single:
        return y[0], {name: v[0] for name, v in stacked.items()}
    return y, stacked


# --------------------------------------------------------------------------------------
# Proposition 1 (eqs. 11-13; Appendix A, eqs. A1-A13)
# --------------------------------------------------------------------------------------

def prop1_derivative(a, k: int, eps: float, t: int, m: int, i: int, gamma: float = 1.0,
                     s: Optional[int] = None) -> float:
    """Closed-form d y_i^(t) / d a_s^(t-m) of ATN-LN for ONE sequence a (T, n), 0-based t.

    The upstream a's are independent inputs, so da_q^(t-j)/da_s^(t-m) = [j == m][q == s]
    (for the paper's same-feature case s = i this is eq. A13 with the chain through
    y^(t-m) collapsed to the indicator). Eq. 13 as typeset has a misplaced bracket (the
    factor 2/(nk) multiplies only the first sum); the correct form is eq. A10, used here:

        dmu/da      = 1/(nk) sum_{j=0..m} da_s^(t-j)/da_s^(t-m)                      (A2/A7)
        dsigma^2/da = 2/(nk) ( sum_{j=0..m} (a_s^(t-j) - mu) da_s^(t-j)/da_s^(t-m)
                               - sum_{j=0..k-1} sum_q (a_q^(t-j) - mu) dmu/da )      (A10)
        dy_i/da     = gamma (da_i^(t)/da_s^(t-m) - dmu/da) / sqrt(sigma^2 + eps)
                      - gamma (a_i^(t) - mu) / (2 (sigma^2 + eps)^{3/2}) dsigma^2/da  (A12)

    ``s`` (default i) gives the full Jacobian entry for another feature s of step t-m: the
    cross-feature entry has no direct term (da_i^(t)/da_s^(t-m) = 0 for s != i) but the same
    paths through mu and sigma^2. The window has k' = min(k, t+1) steps (nk -> n k' at the
    start of a sequence); for m >= k' the derivative is 0.
    """
    a = as_f64(a)
    n = a.shape[1]
    s = i if s is None else s
    steps = window_steps(t, k)  # steps[j] = t - j
    kk = len(steps)
    if m >= kk:
        return 0.0
    nk = n * kk

    def da(q: int, j: int) -> float:  # d a_q^(t-j) / d a_s^(t-m): independent inputs
        return 1.0 if (j == m and q == s) else 0.0

    mu = 0.0
    for j in range(kk):
        for q in range(n):
            mu += a[t - j, q]
    mu /= nk
    var = 0.0
    for j in range(kk):
        for q in range(n):
            var += (a[t - j, q] - mu) ** 2
    var /= nk

    dmu = 0.0
    for j in range(m + 1):  # eq. A2: in an RNN only steps t-j with j <= m can depend on a^(t-m)
        dmu += da(s, j)
    dmu /= nk

    first = 0.0
    for j in range(m + 1):
        first += (a[t - j, s] - mu) * da(s, j)
    second = 0.0
    for j in range(kk):
        for q in range(n):
            second += (a[t - j, q] - mu) * dmu
    dvar = 2.0 / nk * (first - second)  # eq. A10 (the bracket of eq. 13 fixed)

    direct = da(i, 0)  # d a_i^(t) / d a_s^(t-m): 1 only if m == 0 and s == i
    return (gamma * (direct - dmu) / math.sqrt(var + eps)
            - gamma * (a[t, i] - mu) / (2.0 * (var + eps) ** 1.5) * dvar)


# --------------------------------------------------------------------------------------
# Recurrent cells with a normalization per term (ATN eqs. 14-16, Ba et al., Cooijmans et al.)
# --------------------------------------------------------------------------------------

# Which normalization each term gets, per scheme (input term, hidden term, cell).
SCHEME_TERMS = {
    "none": ("none", "none", "none"),
    "ln": ("ln", "ln", "ln"),
    "atn": ("atn", "atn", "atn"),
    "atn-bn": ("atn-bn", "atn-bn", "atn-bn"),
    "bn": ("bn", "bn", "bn"),
    "bn-input": ("bn-input", "none", "none"),  # Laurent et al.: input-to-hidden term only
    "bln": ("bln", "bln", "bln"),
}


def _matvec(w: np.ndarray, v: np.ndarray, b: Optional[np.ndarray]) -> np.ndarray:
    """w (r, c) applied to every row of v (B, c), plus b (r,): explicit loops."""
    batch, cols = v.shape
    rows = w.shape[0]
    out = np.zeros((batch, rows))
    for bb in range(batch):
        for r in range(rows):
            acc = 0.0 if b is None else b[r]
            for c in range(cols):
                acc += w[r, c] * v[bb, c]
            out[bb, r] = acc
    return out


def _sigmoid(v: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-v))


class _TermNorm:
    """The normalization of one term, applied step by step; keeps the term's raw history.

    Variable lengths: each call gets the rows (sequence indices) still running at that step
    and their values only; the batch of a step IS those rows. So per-step batch statistics
    (BN, BLN) pool only them, ATN-BN's window pools the rows present at each of its steps
    (Laurent et al. Sect. 4.1: the unpadded frames decrease along time), and ATN-LN's window
    of a row reads that row's own earlier steps (all valid: padding comes after them).
    """

    def __init__(self, kind: str, k: int, eps: float, gain, shift, population=None):
        self.kind, self.k, self.eps = kind, k, eps
        self.gain, self.shift = _opt(gain), _opt(shift)
        self.past: list[dict[int, np.ndarray]] = []  # per step: row -> raw value (n,)
        self.population = population  # bn in eval: (mean (S, n), var (S, n), steps_seen)
        self.batch_stats: list[tuple[np.ndarray, np.ndarray]] = []  # bn: (mean, biased var) used

    def __call__(self, a: np.ndarray, rows: Optional[Sequence[int]] = None) -> np.ndarray:
        rows = list(range(a.shape[0])) if rows is None else [int(r) for r in rows]
        self.past.append({r: a[j] for j, r in enumerate(rows)})
        t = len(self.past) - 1
        if self.kind == "none":
            return a
        if self.kind == "ln":
            return np.stack([ref_ln_vector(a[b], self.eps, self.gain, self.shift) for b in range(a.shape[0])])
        if self.kind == "atn":
            window = window_steps(t, self.k)[::-1]  # oldest first
            out = []
            for r in rows:
                own = np.stack([self.past[tj][r] for tj in window])[:, None, :]  # (w, 1, n)
                out.append(ref_atn_ln_step(own, len(window) - 1, self.k, self.eps, self.gain, self.shift)[0])
            return np.stack(out)
        if self.kind == "atn-bn":
            pooled = [list(self.past[tj].values()) for tj in window_steps(t, self.k)]
            return ref_pooled_bn(a, [v for step in pooled for v in step], self.eps, self.gain, self.shift)
        if self.kind in ("bn", "bn-input"):
            if self.population is not None:
                mean, var, seen = self.population
                row = min(t, max(seen, 1) - 1)  # Cooijmans: beyond T_max reuse step T_max
                return ref_bn_step(a, self.eps, self.gain, self.shift, mean[row], var[row])[0]
            y, mu, v = ref_bn_step(a, self.eps, self.gain, self.shift)
            self.batch_stats.append((mu, v))
            return y
        if self.kind == "bln":
            return ref_bln_step(a, self.eps, self.gain, self.shift)[0]
        raise ValueError(self.kind)


def ref_pooled_bn(a: np.ndarray, values: list, eps: float, gain=None, shift=None) -> np.ndarray:
    """BN of the rows a (m, n) with per-feature statistics of ``values`` (vectors (n,), e.g. the
    valid entries of a window of steps): mean and biased variance over all of them."""
    m, n = a.shape
    out = np.empty((m, n))
    for i in range(n):
        mu, var = moments([v[i] for v in values])
        for b in range(m):
            out[b, i] = _affine((a[b, i] - mu) / math.sqrt(var + eps), gain, shift, i)
    return out


def _lengths(lengths, steps: int, batch: int) -> list[int]:
    return [steps] * batch if lengths is None else [int(v) for v in as_f64(lengths)]


def _running(lens: list[int], t: int) -> list[int]:
    """The sequences whose step t is valid."""
    return [b for b in range(len(lens)) if lens[b] > t]


def reverse_within(y: np.ndarray, lens: list[int]) -> np.ndarray:
    """Each sequence b reversed over its own steps 0..lens[b]-1; padded steps stay in place."""
    out = y.copy()
    for b in range(y.shape[1]):
        for t in range(lens[b]):
            out[t, b] = y[lens[b] - 1 - t, b]
    return out


def _input_term(kind: str, ax: np.ndarray, k: int, eps: float, gain, shift, bn_input_mode: str,
                lens: list[int], population, record: Optional[dict]) -> np.ndarray:
    """The input term W_x x (+ b_x) of every valid step, normalized (it does not depend on h);
    padded steps are left 0 (they are never read)."""
    if kind == "bn-input" and bn_input_mode == "sequence":
        return ref_seq_bn(ax, eps, gain, shift, lens)[0]  # eqs. 20-21 over the unpadded frames
    norm = _TermNorm(kind, k, eps, gain, shift, population)
    out = np.zeros_like(ax)
    for t in range(ax.shape[0]):
        rows = _running(lens, t)
        if rows:
            out[t, rows] = norm(ax[t, rows], rows)
    if record is not None:
        record["input"] = norm.batch_stats
    return out


def ref_lstm_layer(y: np.ndarray, p: dict, scheme: str, k: int, eps: float, h: np.ndarray, c: np.ndarray,
                   lens: list[int], bn_input_mode: str = "frame", population: Optional[dict] = None,
                   record: Optional[dict] = None):
    """One normalized LSTM layer on a time-first (T, B, d) padded batch; returns (out, h_n, c_n).

    At step t only the sequences with t < lens[b] run (the batch of that step); the others keep
    (h, c) and output 0. See ``ref_norm_lstm`` for the cell.
    """
    kinds = SCHEME_TERMS[scheme]
    pop = population or {}
    steps, batch = y.shape[0], y.shape[1]
    hidden = p["w_hh"].shape[1]
    h, c = h.copy(), c.copy()
    inside = p.get("b_ih") is not None or p.get("b_hh") is not None
    ax = np.stack([_matvec(p["w_ih"], y[t], p.get("b_ih")) for t in range(steps)])
    xn = _input_term(kinds[0], ax, k, eps, p.get("g_x"), p.get("s_x"), bn_input_mode, lens, pop.get("input"), record)
    norm_h = _TermNorm(kinds[1], k, eps, p.get("g_h"), p.get("s_h"), pop.get("hidden"))
    norm_c = _TermNorm(kinds[2], k, eps, p.get("g_c"), p.get("s_c"), pop.get("cell"))
    out = np.zeros((steps, batch, hidden))
    for t in range(steps):
        rows = _running(lens, t)
        if not rows:
            continue
        gates = xn[t, rows] + norm_h(_matvec(p["w_hh"], h[rows], p.get("b_hh")), rows)
        if not inside and p.get("b") is not None:
            gates = gates + p["b"]
        i_, f_, g_, o_ = (gates[:, q * hidden:(q + 1) * hidden] for q in range(4))
        c[rows] = _sigmoid(f_) * c[rows] + _sigmoid(i_) * np.tanh(g_)
        h[rows] = _sigmoid(o_) * np.tanh(norm_c(c[rows], rows))
        out[t, rows] = h[rows]
    if record is not None:
        record.update(hidden=norm_h.batch_stats, cell=norm_c.batch_stats)
    return out, h, c


def ref_gru_layer(y: np.ndarray, p: dict, scheme: str, k: int, eps: float, h: np.ndarray, lens: list[int],
                  bn_input_mode: str = "frame"):
    """One normalized GRU layer on a padded batch (see ``ref_norm_gru``); returns (out, h_n)."""
    kinds = SCHEME_TERMS[scheme]
    steps, batch = y.shape[0], y.shape[1]
    hidden = p["w_hh"].shape[1]
    h = h.copy()
    ax = np.stack([_matvec(p["w_ih"], y[t], p.get("b_ih")) for t in range(steps)])
    xn = _input_term(kinds[0], ax, k, eps, p.get("g_x"), p.get("s_x"), bn_input_mode, lens, None, None)
    if p.get("b") is not None:
        xn = xn + p["b"]
    norm_h = _TermNorm(kinds[1], k, eps, p.get("g_h"), p.get("s_h"))
    out = np.zeros((steps, batch, hidden))
    for t in range(steps):
        rows = _running(lens, t)
        if not rows:
            continue
        hn = norm_h(_matvec(p["w_hh"], h[rows], p.get("b_hh")), rows)
        xr, xz, xn_ = (xn[t, rows][:, q * hidden:(q + 1) * hidden] for q in range(3))
        hr, hz, hn_ = (hn[:, q * hidden:(q + 1) * hidden] for q in range(3))
        r = _sigmoid(xr + hr)
        z = _sigmoid(xz + hz)
        nn_ = np.tanh(xn_ + r * hn_)
        h[rows] = (1.0 - z) * nn_ + z * h[rows]
        out[t, rows] = h[rows]
    return out, h


def _stack(run_layer, x, layers: Sequence[dict], lengths, bidirectional: bool, initial: list):
    """Layers and directions as nn.LSTM stacks them: the reverse direction runs each sequence
    reversed within its length and its output is reversed back; directions are concatenated.
    ``initial``: per state tensor (h, c), None or (layers * directions, B, H)."""
    x = as_f64(x)
    steps, batch = x.shape[0], x.shape[1]
    lens = _lengths(lengths, steps, batch)
    directions = 2 if bidirectional else 1
    finals = [[] for _ in initial]
    y = x
    for li in range(len(layers) // directions):
        outs = []
        for d in range(directions):
            index = li * directions + d
            p = layers[index]
            hidden = p["w_hh"].shape[1]
            start = [np.zeros((batch, hidden)) if s is None else as_f64(s)[index] for s in initial]
            inp = y if d == 0 else reverse_within(y, lens)
            out, *state = run_layer(inp, p, index, start, lens)
            outs.append(out if d == 0 else reverse_within(out, lens))
            for held, v in zip(finals, state):
                held.append(v)
        y = np.concatenate(outs, axis=-1)
    return (y, *[np.stack(f) for f in finals])


def ref_norm_lstm(x, layers: Sequence[dict], scheme: str, k: int = 10, eps: float = 1e-5,
                  h0=None, c0=None, bn_input_mode: str = "frame", lengths=None,
                  population: Optional[Sequence[dict]] = None, record: Optional[list] = None,
                  bidirectional: bool = False):
    """Reference normalized LSTM on a time-first (T, B, d) input; returns (out, h_n, c_n).

    Per layer (``layers[l]`` a dict of arrays; with ``bidirectional``, layer l's forward and
    reverse directions are entries 2l and 2l+1): ``w_ih`` (4H, d), ``w_hh`` (4H, H), and either
    ``b_ih``/``b_hh`` (bias inside the normalizations) or ``b`` (bias outside), and the gains
    and shifts ``g_x, s_x, g_h, s_h, g_c, s_c`` (None: no affine). For each step t:

        bias inside:   gates = N_x(W_x x_t + b_x) + N_h(W_h h_{t-1} + b_h)
        bias outside:  gates = N_x(W_x x_t) + N_h(W_h h_{t-1}) + b          (eq. 14)
        i, f, g, o = gates split in 4 (nn.LSTM order)
        c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)                       (eq. 15)
        h_t = sigmoid(o) tanh(N_c(c_t))                                     (eq. 16)

    ``lengths`` (B,): sequence b has lengths[b] valid steps; step t runs only the sequences
    still valid there (see ``_TermNorm``), h_n/c_n are each sequence's at its own last step and
    padded outputs are 0. ``population``: per layer {"input"|"hidden"|"cell": (mean, var,
    steps_seen)} for BN in evaluation. ``record``: a list that receives, per layer, the
    {"input"|"hidden"|"cell": [(mean, biased var) per step]} batch statistics BN used.
    """
    def run(y, p, index, start, lens):
        rec = None if record is None else {"input": None}
        pop = (population or [{}] * len(layers))[index]
        result = ref_lstm_layer(y, p, scheme, k, eps, start[0], start[1], lens, bn_input_mode, pop, rec)
        if record is not None:
            record.append(rec)
        return result

    return _stack(run, x, layers, lengths, bidirectional, [h0, c0])


def ref_norm_gru(x, layers: Sequence[dict], scheme: str, k: int = 10, eps: float = 1e-5, h0=None,
                 lengths=None, bidirectional: bool = False, bn_input_mode: str = "frame"):
    """Reference normalized GRU (Ba et al.'s LN-GRU layout with nn.GRU's gates r, z, n):

        a_x = N_x(W_x x_t [+ b_x]) [+ b],   a_h = N_h(W_h h_{t-1} [+ b_h])
        r = sigmoid(a_x^r + a_h^r), z = sigmoid(a_x^z + a_h^z), n = tanh(a_x^n + r a_h^n)
        h_t = (1 - z) n + z h_{t-1}
    With scheme "none" and the bias inside this is exactly torch.nn.GRU. ``lengths`` and
    ``bidirectional`` as in ``ref_norm_lstm``.
    """
    def run(y, p, index, start, lens):
        return ref_gru_layer(y, p, scheme, k, eps, start[0], lens, bn_input_mode)

    return _stack(run, x, layers, lengths, bidirectional, [h0])


def layer_params(model) -> list[dict]:
    """The parameters of a NormLSTM/NormGRU-like model (read by attribute name, nothing
    imported): per layer w_ih, w_hh, b_ih, b_hh, b and the gains/shifts of the normalized
    terms (norm_x, norm_h, norm_c), as float64 arrays (None where absent)."""
    out = []
    for layer in model.layers:
        p = {"w_ih": as_f64(layer.weight_ih), "w_hh": as_f64(layer.weight_hh),
             "b_ih": _opt(layer.bias_ih), "b_hh": _opt(layer.bias_hh), "b": _opt(layer.bias)}
        for term, key in (("norm_x", "x"), ("norm_h", "h"), ("norm_c", "c")):
            norm = getattr(layer, term, None)
            p["g_" + key] = None if norm is None else _opt(getattr(norm, "weight", None))
            p["s_" + key] = None if norm is None else _opt(getattr(norm, "bias", None))
        out.append(p)
    return out
