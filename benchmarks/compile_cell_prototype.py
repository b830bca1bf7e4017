"""Candidate (c) of the fast-path study: torch.compile of the per-step LSTM cell (LN, and ATN
with running window sums), an eager Python loop around it; adding workload, one RMSprop step.

A prototype kept for the record (benchmarks/README.md, "Fast path: the candidates"), not part
of atnbench: its ATN cell shifts the power sums by 0 instead of the first step's mean, so it is
only a timing model. Prints the first step's time (compilation) and the wall-clock ms of a training step
(median of 10 after it).

    python benchmarks/compile_cell_prototype.py [threads]
"""
import time, sys, torch
import torch.nn.functional as F
from atnbench.bench.workloads import get_workload, loss_fn
from atnbench.nn import NormLSTM
torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else torch.get_num_threads())
wl = get_workload("adding")
x, y = wl.make_batch(torch.device("cpu"))
H, G, eps = wl.hidden, 4 * wl.hidden, 1e-5

def atn_step(a, ring, tot, ref, slot_onehot, full, count):
    # a (B,n); ring (k,B,2) shifted power sums of the window; tot (B,2); count: steps in window after push
    var, mu = torch.var_mean(a, dim=-1, unbiased=False)
    mu64, var64 = mu.double(), var.double()
    d = mu64 - ref
    p = torch.stack((d, var64 + d * d), -1)
    old = (ring * slot_onehot[:, None, None]).sum(0)          # the leaving step (zeros while filling)
    tot = tot + p - old * full
    ring = ring * (1 - slot_onehot[:, None, None]) + p[None] * slot_onehot[:, None, None]
    avg = tot / count
    shift, ex2 = avg.unbind(-1)
    v = (ex2 - shift * shift).clamp_min(0)
    mean = (ref + shift).to(a.dtype)
    y = (a - mean[:, None]) * torch.rsqrt(v.to(a.dtype) + eps)[:, None]
    return y, ring, tot

def cell_ln(xn_t, h, c, w_hh, b_hh, gh, sh, gc, sc):
    gates = xn_t + F.layer_norm(F.linear(h, w_hh, b_hh), (G,), gh, sh, eps)
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(F.layer_norm(c, (H,), gc, sc, eps)), c

def cell_atn(xn_t, h, c, w_hh, b_hh, gh, sh, gc, sc, rh, th, refh, rc, tc, refc, onehot, full, count):
    yh, rh, th = atn_step(F.linear(h, w_hh, b_hh), rh, th, refh, onehot, full, count)
    gates = xn_t + yh * gh + sh
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    yc, rc, tc = atn_step(c, rc, tc, refc, onehot, full, count)
    return torch.sigmoid(o) * torch.tanh(yc * gc + sc), c, rh, th, rc, tc

class Compiled(torch.nn.Module):
    def __init__(self, norm, k):
        super().__init__()
        self.rnn = NormLSTM(2, H, norm=norm, k=k, backend="loop")
        self.head = torch.nn.Linear(H, 1)
        self.norm, self.k = norm, k
        self.cell = torch.compile(cell_ln if norm == "ln" else cell_atn, dynamic=False)
    def forward(self, x):
        L = self.rnn.layers[0]
        xn, _ = L.input_term(x, L.initial_windows(x.shape[1], x.device)[0], None)
        B = x.shape[1]
        h = x.new_zeros(B, H).requires_grad_(); c = x.new_zeros(B, H).requires_grad_()
        k = self.k
        if self.norm == "atn":
            rh = torch.zeros(k, B, 2, dtype=torch.float64); rc = torch.zeros(k, B, 2, dtype=torch.float64)
            th = torch.zeros(B, 2, dtype=torch.float64); tc = torch.zeros(B, 2, dtype=torch.float64)
            refh = torch.zeros(B, dtype=torch.float64); refc = torch.zeros(B, dtype=torch.float64)  # ref 0: fine for a timing prototype
            eye = torch.eye(k, dtype=torch.float64)
        for t, xt in enumerate(xn.unbind(0)):
            if self.norm == "ln":
                h, c = self.cell(xt, h, c, L.weight_hh, L.bias_hh, L.norm_h.weight, L.norm_h.bias, L.norm_c.weight, L.norm_c.bias)
            else:
                h, c, rh, th, rc, tc = self.cell(xt, h, c, L.weight_hh, L.bias_hh, L.norm_h.weight, L.norm_h.bias,
                                                 L.norm_c.weight, L.norm_c.bias, rh, th, refh, rc, tc, refc,
                                                 eye[t % k], torch.tensor(1.0 if t >= k else 0.0, dtype=torch.float64),
                                                 torch.tensor(float(min(t + 1, k)), dtype=torch.float64))
        return self.head(h)

loss = loss_fn(wl)
for norm, k in (("ln", 1), ("atn", 5), ("atn", 45)):
    m = Compiled(norm, k)
    opt = torch.optim.RMSprop(m.parameters(), lr=1e-3)
    t0 = time.time()
    opt.zero_grad(); loss(m(x), y).backward(); opt.step()
    print(norm, k, "first step (compile) s", round(time.time() - t0, 1), flush=True)
    ts = []
    for r in range(10):
        t0 = time.perf_counter(); opt.zero_grad(); loss(m(x), y).backward(); opt.step(); ts.append(time.perf_counter() - t0)
    ts.sort()
    print(norm, k, f"train ms: median {ts[5]*1e3:.1f}, min {ts[0]*1e3:.1f}", flush=True)
