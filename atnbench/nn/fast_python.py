"""The fast path's recurrence written with torch ops: forward without autograd, hand-written backward.

This is the readable statement of the algorithm that ``csrc/norm_lstm.cpp`` implements in C++
(``backend="cpp"``), and the ``backend="function"`` implementation (any device with float64,
no compiler needed). Both compute one layer of a normalized LSTM (ATN paper eqs. 14-16) whose
three terms each get LN (k = 1) or ATN-LN (k >= 1, eqs. 7-9); with ``wx = W_x x + b_x``:

    z_t = N_x(wx_t) + N_h(W_hh h_{t-1} + b_hh) [+ b]          i, f, g, o = split(z_t)
    c_t = sigmoid(f) c_{t-1} + sigmoid(i) tanh(g)             h_t = sigmoid(o) tanh(N_c(c_t))

Window statistics (see ``window.py``): step j's row moments (m_j, v_j); power sums shifted by
ref (the first step's mean, history included, a constant for autograd), d_j = m_j - ref,
p_j = v_j + d_j^2; over the window W(t) of w_t = |W(t)| steps

    mean_t = ref + shift_t,  shift_t = sum d_j / w_t,  var_t = max(sum p_j / w_t - shift_t^2, 0)
    y_t = (a_t - mean_t) / sqrt(var_t + eps) * gain + shift_param

Backward of one term, with g^ = dy * gain and r_t = 1/sqrt(var_t + eps):

    dmean_t = -r_t sum_i g^_i        dvar_t = -r_t^2 / 2 * sum_i g^_i xhat_i   (0 where clamped)
    dm_j = sum_{t: j in W(t)} (dmean_t - 2 dvar_t shift_t) / w_t + 2 d_j sum_{t: j in W(t)} dvar_t / w_t
    dv_j = sum_{t: j in W(t)} dvar_t / w_t
    da_j = g^ r_j + dm_j / n + dv_j * 2 (a_j - m_j) / n

The sums over the windows that contain step j (t = j .. j+k-1) are reverse running sums: O(1)
per step for any k. History steps (the window state passed in) receive dm_j, dv_j as the
gradient of the state; the returned state's gradient is added to dm_j, dv_j of its steps.
For k = 1 (LN) mean_t = m_t and var_t = v_t directly.

``forward`` returns ``(outputs, saved)``: outputs ``(out, c_n, hist_x, hist_h, hist_c)`` and
the tensors ``backward`` needs; ``backward`` returns the gradients in the order of
``fastpath.GRAD_NAMES``.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor


class _Term:
    """Statistics of one normalized term over the history steps and the T new ones."""

    def __init__(self, k: int, hist: Tensor, steps: int, batch: int, eps: float, dtype: torch.dtype):
        self.k, self.eps, self.dtype, self.steps = k, eps, dtype, steps
        self.m = hist.shape[0]
        acc = torch.float64
        self.mu = hist.new_zeros((self.m + steps, batch), dtype=acc)
        self.v = torch.zeros_like(self.mu)
        self.mu[: self.m] = hist[..., 0]
        self.v[: self.m] = hist[..., 1]
        self.shift = hist.new_zeros((steps, batch), dtype=acc)
        self.r = torch.zeros_like(self.shift)
        self.ok = torch.ones_like(self.shift, dtype=torch.bool)  # var not clamped
        self.ref = self.mu[0].clone() if self.m else None
        if k > 1 and self.m:
            d = self.mu[: self.m] - self.ref
            self.s1 = d.sum(0)
            self.s2 = (self.v[: self.m] + d * d).sum(0)
        else:
            self.s1 = self.s2 = None

    def width(self, t: int) -> int:
        return min(self.k, self.m + t + 1)

    def step(self, a: Tensor, t: int) -> Tensor:
        """Normalized a (B, n) of step t, without gain/shift; records the statistics."""
        var, mu = torch.var_mean(a, dim=-1, unbiased=False)
        j = self.m + t
        mu, var = mu.double(), var.double()
        self.mu[j], self.v[j] = mu, var
        if self.k == 1:
            mean = mu
        else:
            if self.ref is None:
                self.ref = mu.clone()
            d = mu - self.ref
            p = var + d * d
            if self.s1 is None:
                self.s1, self.s2 = d, p
            else:
                self.s1 = self.s1 + d
                self.s2 = self.s2 + p
            if j >= self.k:
                d_old = self.mu[j - self.k] - self.ref
                self.s1 = self.s1 - d_old
                self.s2 = self.s2 - (self.v[j - self.k] + d_old * d_old)
            w = self.width(t)
            shift = self.s1 / w
            var = self.s2 / w - shift * shift
            self.ok[t] = var >= 0
            var = var.clamp_min(0.0)
            self.shift[t] = shift
            mean = self.ref + shift
        r = torch.rsqrt(var + self.eps)
        self.r[t] = r
        return (a - mean.to(self.dtype).unsqueeze(-1)) * r.to(self.dtype).unsqueeze(-1)

    def all_steps(self, a: Tensor) -> Tensor:
        """``step`` for all T steps at once (cumulative-sum differences for the window totals)."""
        var, mu = torch.var_mean(a, dim=-1, unbiased=False)
        self.mu[self.m:], self.v[self.m:] = mu.double(), var.double()
        if self.k == 1:
            mean, var = self.mu[self.m:], self.v[self.m:]
        else:
            self.ref = self.mu[0].clone()
            d = self.mu - self.ref
            p = self.v + d * d
            prefix = torch.cat((torch.zeros_like(d[:1]), d.cumsum(0)))
            prefix2 = torch.cat((torch.zeros_like(p[:1]), p.cumsum(0)))
            end = torch.arange(self.m + 1, self.m + self.steps + 1, device=a.device)
            start = (end - self.k).clamp_min(0)
            w = (end - start).to(torch.float64).unsqueeze(-1)
            shift = (prefix[end] - prefix[start]) / w
            var = (prefix2[end] - prefix2[start]) / w - shift * shift
            self.ok = var >= 0
            var = var.clamp_min(0.0)
            self.shift = shift
            mean = self.ref + shift
        self.r = torch.rsqrt(var + self.eps)
        return (a - mean.to(self.dtype).unsqueeze(-1)) * self.r.to(self.dtype).unsqueeze(-1)

    def mean(self) -> Tensor:
        return self.mu[self.m:] if self.k == 1 else self.ref + self.shift

    def history(self) -> Tensor:
        keep = min(self.k - 1, self.m + self.steps)
        total = self.m + self.steps
        return torch.stack((self.mu[total - keep:], self.v[total - keep:]), dim=-1)

    def saved(self) -> list[Tensor]:
        ref = self.ref if self.ref is not None else self.mu.new_zeros(self.mu.shape[1])
        return [self.mu, self.v, self.shift, self.r, self.ok, ref]


class _TermGrad:
    """Backward of one term: per step (reverse order) or all steps at once."""

    def __init__(self, k: int, m: int, steps: int, saved: list[Tensor], gout: Optional[Tensor], dtype: torch.dtype):
        self.k, self.m, self.steps, self.dtype = k, m, steps, dtype
        self.mu, self.v, self.shift, self.r, self.ok, self.ref = saved
        self.mean = self.mu[m:] if k == 1 else self.ref + self.shift
        self.length = min(k - 1, m + steps)
        self.gout = gout  # (L, B, 2) grad of the returned history
        self.xa = torch.zeros_like(self.shift)
        self.xb = torch.zeros_like(self.shift)
        self.ra = self.rb = None

    def _extra(self, j: int):
        first = self.m + self.steps - self.length
        if self.gout is None or j < first:
            return None
        return self.gout[j - first]

    def xhat(self, a: Tensor, t) -> Tensor:
        return (a - self.mean[t].to(self.dtype).unsqueeze(-1)) * self.r[t].to(self.dtype).unsqueeze(-1)

    def step(self, a: Tensor, gdy: Tensor, t: int) -> Tensor:
        """dL/da (B, n) of step t given g^ = dy * gain (steps > t already done)."""
        r = self.r[t]
        xh = self.xhat(a, t)
        n = a.shape[-1]
        dmean = -r * gdy.sum(-1, dtype=torch.float64)
        dvar = torch.where(self.ok[t], -0.5 * r * r * (gdy * xh).sum(-1, dtype=torch.float64), 0.0)
        j = self.m + t
        if self.k == 1:
            dm, dv = dmean, dvar
        else:
            w = min(self.k, j + 1)
            xa = (dmean - 2.0 * dvar * self.shift[t]) / w
            xb = dvar / w
            self.xa[t], self.xb[t] = xa, xb
            if self.ra is None:
                self.ra, self.rb = xa, xb
            else:
                self.ra, self.rb = self.ra + xa, self.rb + xb
            if t + self.k <= self.steps - 1:
                self.ra = self.ra - self.xa[t + self.k]
                self.rb = self.rb - self.xb[t + self.k]
            dm = self.ra + 2.0 * (self.mu[j] - self.ref) * self.rb
            dv = self.rb
        extra = self._extra(j)
        if extra is not None:
            dm, dv = dm + extra[:, 0], dv + extra[:, 1]
        r_, c1, c2 = (u.to(self.dtype).unsqueeze(-1) for u in (r, dm / n, 2.0 * dv / n))
        return gdy * r_ + c1 + c2 * (a - self.mu[j].to(self.dtype).unsqueeze(-1))

    def all_steps(self, a: Tensor, gdy: Tensor) -> Tensor:
        """dL/da (T, B, n) of all steps at once (reverse cumulative sums over the windows)."""
        steps, n = self.steps, a.shape[-1]
        xh = self.xhat(a, slice(None))
        dmean = -self.r * gdy.sum(-1, dtype=torch.float64)
        dvar = torch.where(self.ok, -0.5 * self.r * self.r * (gdy * xh).sum(-1, dtype=torch.float64), 0.0)
        if self.k == 1:
            dm, dv = dmean, dvar
        else:
            j = torch.arange(self.m, self.m + steps, device=a.device)
            w = (j + 1).clamp_max(self.k).to(torch.float64).unsqueeze(-1)
            self.xa, self.xb = (dmean - 2.0 * dvar * self.shift) / w, dvar / w
            dm_all, dv_all = self._window_sums()
            dm, dv = dm_all[self.m:], dv_all[self.m:]
        extra = self._extra_all()
        if extra is not None:
            dm, dv = dm + extra[self.m:, :, 0], dv + extra[self.m:, :, 1]
        r_, c1, c2 = (u.to(self.dtype).unsqueeze(-1) for u in (self.r, dm / n, 2.0 * dv / n))
        return gdy * r_ + c1 + c2 * (a - self.mu[self.m:].to(self.dtype).unsqueeze(-1))

    def _window_sums(self) -> tuple[Tensor, Tensor]:
        """dm_j, dv_j for every step j (history included) from xa, xb by prefix sums."""
        steps, m = self.steps, self.m
        pa = torch.cat((torch.zeros_like(self.xa[:1]), self.xa.cumsum(0)))
        pb = torch.cat((torch.zeros_like(self.xb[:1]), self.xb.cumsum(0)))
        t = torch.arange(-m, steps, device=self.xa.device)
        lo, hi = t.clamp_min(0), (t + self.k).clamp(0, steps)
        ra, rb = pa[hi] - pa[lo], pb[hi] - pb[lo]
        return ra + 2.0 * (self.mu - self.ref) * rb, rb

    def _extra_all(self) -> Optional[Tensor]:
        if self.gout is None or self.length == 0:
            return None
        extra = self.mu.new_zeros((self.m + self.steps, self.mu.shape[1], 2))
        extra[self.m + self.steps - self.length:] = self.gout
        return extra

    def history_grad(self) -> Tensor:
        """Gradient of the (m, B, 2) window state that was passed in (after the steps' backward)."""
        if self.m == 0:
            return self.mu.new_zeros((0, self.mu.shape[1], 2))
        if self.k == 1:
            return self.mu.new_zeros((self.m, self.mu.shape[1], 2))
        dm, dv = self._window_sums()
        grad = torch.stack((dm[: self.m], dv[: self.m]), dim=-1)
        extra = self._extra_all()
        return grad if extra is None else grad + extra[: self.m]


def _affine(y: Tensor, g: Optional[Tensor], s: Optional[Tensor]) -> Tensor:
    if g is not None:
        y = y * g
    if s is not None:
        y = y + s
    return y


@torch.no_grad()
def forward(x, w_ih, b_ih, h0, c0, w_hh, b_hh, bias, gx, sx, gh, sh, gc, sc, hist_x, hist_h, hist_c,
            kx: int, kh: int, kc: int, eps: float, save: bool):
    wx = torch.nn.functional.linear(x, w_ih, b_ih)
    steps, batch, width = wx.shape
    hidden = h0.shape[1]
    dtype = wx.dtype
    tx = _Term(kx, hist_x, steps, batch, eps, dtype)
    th = _Term(kh, hist_h, steps, batch, eps, dtype)
    tc = _Term(kc, hist_c, steps, batch, eps, dtype)
    zx = _affine(tx.all_steps(wx), gx, sx)
    if bias is not None:
        zx = zx + bias
    ah_all = wx.new_empty((steps, batch, width)) if save else None
    act_all = wx.new_empty((steps, batch, width)) if save else None
    c_all = wx.new_empty((steps, batch, hidden)) if save else None
    ty_all = wx.new_empty((steps, batch, hidden)) if save else None
    out = wx.new_empty((steps, batch, hidden))
    h, c = h0, c0
    for t in range(steps):
        ah = torch.addmm(b_hh, h, w_hh.t()) if b_hh is not None else h @ w_hh.t()
        z = zx[t] + _affine(th.step(ah, t), gh, sh)
        act = torch.cat((torch.sigmoid(z[:, : 2 * hidden]), torch.tanh(z[:, 2 * hidden: 3 * hidden]),
                         torch.sigmoid(z[:, 3 * hidden:])), dim=1)
        i, f, g, o = act.chunk(4, dim=1)
        c = torch.addcmul(f * c, i, g)
        ty = torch.tanh(_affine(tc.step(c, t), gc, sc))
        h = torch.mul(o, ty, out=out[t])
        if save:
            ah_all[t], act_all[t], c_all[t], ty_all[t] = ah, act, c, ty
    outputs = (out, c.clone(), tx.history(), th.history(), tc.history())
    if not save:
        return outputs, []
    return outputs, [wx, ah_all, act_all, c_all, ty_all, *tx.saved(), *th.saved(), *tc.saved()]


@torch.no_grad()
def backward(grads, x, w_ih, b_ih, h0, c0, w_hh, b_hh, bias, gx, sx, gh, sh, gc, sc, hist_x, hist_h, hist_c, out,
             saved, kx: int, kh: int, kc: int, eps: float):
    dout, dcn, dhx, dhh, dhc = grads
    wx, saved = saved[0], saved[1:]
    steps, batch, width = wx.shape
    hidden = h0.shape[1]
    dtype = wx.dtype
    ah_all, act_all, c_all, ty_all = saved[:4]
    gx_, gh_, gc_ = (_TermGrad(k, hist.shape[0], steps, saved[4 + 6 * q: 10 + 6 * q], go, dtype)
                     for q, (k, hist, go) in enumerate(((kx, hist_x, dhx), (kh, hist_h, dhh), (kc, hist_c, dhc))))
    dz_all = wx.new_empty((steps, batch, width))
    dah_all = wx.new_empty((steps, batch, width))
    dyc_all = wx.new_empty((steps, batch, hidden))
    dh = torch.zeros_like(h0)
    dc = dcn.clone() if dcn is not None else torch.zeros_like(c0)
    for t in range(steps - 1, -1, -1):
        if dout is not None:
            dh = dh + dout[t]
        i, f, g, o = act_all[t].chunk(4, dim=1)
        ty = ty_all[t]
        dyc = dh * o * (1 - ty * ty)
        dyc_all[t] = dyc
        dc = dc + gc_.step(c_all[t], dyc if gc is None else dyc * gc, t)
        c_prev = c_all[t - 1] if t > 0 else c0
        dz = torch.cat((dc * g * i * (1 - i), dc * c_prev * f * (1 - f), dc * i * (1 - g * g),
                        dh * ty * o * (1 - o)), dim=1)
        dz_all[t] = dz
        dc = dc * f
        dah = gh_.step(ah_all[t], dz if gh is None else dz * gh, t)
        dah_all[t] = dah
        dh = dah @ w_hh
    dwx = gx_.all_steps(wx, dz_all if gx is None else dz_all * gx)
    h_prev = torch.cat((h0.unsqueeze(0), out[:-1]))
    dw_hh = dah_all.flatten(0, 1).t() @ h_prev.flatten(0, 1)
    db_hh = dah_all.sum((0, 1)) if b_hh is not None else None
    dz_sum = dz_all.sum((0, 1))
    dgx = (dz_all * gx_.xhat(wx, slice(None))).sum((0, 1)) if gx is not None else None
    dgh = (dz_all * gh_.xhat(ah_all, slice(None))).sum((0, 1)) if gh is not None else None
    dgc = (dyc_all * gc_.xhat(c_all, slice(None))).sum((0, 1)) if gc is not None else None
    dsc = dyc_all.sum((0, 1)) if sc is not None else None
    dx = dwx @ w_ih
    dw_ih = dwx.flatten(0, 1).t() @ x.flatten(0, 1)
    db_ih = dwx.sum((0, 1)) if b_ih is not None else None
    return [dx, dw_ih, db_ih, dh, dc, dw_hh, db_hh, dz_sum, dgx, dz_sum, dgh, dz_sum, dgc, dsc,
            gx_.history_grad(), gh_.history_grad(), gc_.history_grad()]
