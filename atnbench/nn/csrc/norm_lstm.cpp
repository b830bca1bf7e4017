// The recurrence of one normalized LSTM layer (LN or ATN-LN on the input, hidden and cell
// terms; ATN paper eqs. 7-9, 14-16), forward and a hand-written backward, as two ops
// registered with the dispatcher: torch.ops.atnbench_fast.norm_lstm_forward / _backward.
// Python side: atnbench/nn/fastpath.py. The same algorithm with torch ops, and its math:
// atnbench/nn/fast_python.py (read that one first).
//
// Batch rows are independent through the whole recurrence (every normalization here reduces
// over the features of one row), so the batch is split into chunks, one per thread, and each
// chunk runs all T steps on its own: no synchronisation per step. Per step and chunk: small
// GEMMs (W_x x_t + b_x and W_h h_{t-1} + b_h forward; dh_{t-1}, dx_t and the per-thread
// accumulation of dW_hh, dW_ih backward; a register-tiled AVX-512 kernel while the weights fit
// in cache, ATen's mm otherwise, where the weight gradients are then formed once at the end),
// and one pass per row (statistics, window update, gates, cell, output). Transcendentals use
// glibc's vector math (libmvec) when ATN_MVEC is defined. Reductions within a row are in the
// working dtype (as torch's var_mean); the window statistics across steps are kept and
// accumulated in double.
//
// Window statistics per term (n features, window k, m history steps before this call): the
// per-step row moments (mean m_j, biased var v_j) for the m history steps followed by the T
// new ones, with the window shift, r = 1/sqrt(var+eps) and the clamp flag:
// st[(j*B + b)*5 + {0: m_j, 1: v_j, 2: shift, 3: r, 4: clamped}]. Power sums are shifted by
// ref = the first step's mean (history included), as atnbench/nn/window.py does.
//
// Padded batches (lengths, sorted longest first, the longest T): at each step a chunk's running
// rows are its first ones; only they compute, the others hold h and c (out holds h; the Python
// side zeroes the padded outputs) and take no gradient into their gates; every step's window
// moments are returned, from which each sequence's own window state is taken (history_at).

#include "kernels.h"

namespace {

// The rows of chunk [b0, b1) that compute step t: all, or (a padded batch, lengths sorted
// longest first) the first ones, those still running.
inline int64_t running(const int64_t* len, int64_t b0, int64_t b1, int64_t t) {
  if (len == nullptr) return b1 - b0;
  int64_t r = b0;
  while (r < b1 && len[r] > t) ++r;
  return r - b0;
}

// lengths (B) int64 on the CPU, sorted longest first, each in 1..T, the longest T; or undefined.
Tensor checked_lengths(const OptT& lengths, int64_t B, int64_t Tn) {
  if (!lengths.has_value() || !lengths->defined()) return Tensor();
  const Tensor l = lengths->contiguous();
  TORCH_CHECK(l.scalar_type() == at::kLong && l.dim() == 1 && l.size(0) == B && l.device().is_cpu(),
              "lengths: (B,) int64 on the CPU expected");
  const int64_t* p = l.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b)
    TORCH_CHECK(p[b] >= 1 && p[b] <= Tn && (b == 0 ? p[b] == Tn : p[b] <= p[b - 1]),
                "lengths: sorted longest first, in 1..T, the longest T");
  return l;
}

// ------------------------------------------------------------------------------------------
// One normalized term.

template <typename T>
struct Term {
  int64_t n = 0;         // features
  int64_t k = 1;         // window; 1 = LN
  int64_t m = 0;         // history steps before this call
  const T* g = nullptr;  // gain (nullptr: none)
  const T* s = nullptr;  // shift (nullptr: none)
  double* st = nullptr;  // (m + T, B, 5)
  double* ref = nullptr;  // (B)
  double* s1 = nullptr;   // (B) running window totals (forward)
  double* s2 = nullptr;
  double* x = nullptr;    // (T, B, 2) per-step adjoint terms (backward)
  double* ra = nullptr;   // (B) reverse running sums (backward)
  double* rb = nullptr;
  const double* gout = nullptr;  // (L, B, 2) grad of the returned window history, or nullptr
  int64_t L = 0;
};

// y (add ? += : =) N(a) for one row; records the step's statistics.
template <typename T>
inline void norm_fwd_row(const Term<T>& tm, int64_t t, int64_t b, int64_t B, const T* a, T* y, bool add,
                         double eps) {
  const int64_t n = tm.n;
  T sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < n; ++i) sum += a[i];
  const T mu_t = sum / (T)n;
  T sq = 0;
#pragma omp simd reduction(+ : sq)
  for (int64_t i = 0; i < n; ++i) {
    const T d = a[i] - mu_t;
    sq += d * d;
  }
  const double mu = (double)mu_t;
  const double v = (double)(sq / (T)n);
  const int64_t j = tm.m + t;
  double* e = tm.st + (j * B + b) * 5;
  e[0] = mu;
  e[1] = v;
  double mean, var, shift = 0.0;
  bool clamped = false;
  if (tm.k == 1) {
    mean = mu;
    var = v;
  } else {
    if (j == 0) tm.ref[b] = mu;
    const double ref = tm.ref[b];
    const double d = mu - ref;
    tm.s1[b] += d;
    tm.s2[b] += v + d * d;
    if (j >= tm.k) {  // the step leaving the window
      const double* o = tm.st + ((j - tm.k) * B + b) * 5;
      const double dold = o[0] - ref;
      tm.s1[b] -= dold;
      tm.s2[b] -= o[1] + dold * dold;
    }
    const double w = (double)std::min(tm.k, j + 1);
    shift = tm.s1[b] / w;
    var = tm.s2[b] / w - shift * shift;
    if (var < 0.0) {
      var = 0.0;
      clamped = true;
    }
    mean = ref + shift;
  }
  const double r = 1.0 / std::sqrt(var + eps);
  e[2] = shift;
  e[3] = r;
  e[4] = clamped ? 1.0 : 0.0;
  const T mt = (T)mean, rt = (T)r;
  const T* g = tm.g;
  const T* s = tm.s;
  if (add) {
    if (g) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] += (a[i] - mt) * rt * g[i] + s[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] += (a[i] - mt) * rt;
    }
  } else {
    if (g) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] - mt) * rt * g[i] + s[i];
    } else {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) y[i] = (a[i] - mt) * rt;
    }
  }
}

// da = dL/da of one row given dy = dL/dy (y = N(a)), including what later steps' windows
// send back through this step's moments (reverse running sums over k steps).
// acc_dy += dy and acc_dyx += dy * xhat (for the shift/gain gradients), per row, if given.
template <typename T>
inline void norm_bwd_row(const Term<T>& tm, int64_t t, int64_t b, int64_t B, int64_t Tn, const T* a,
                         const T* dy, T* da, T* acc_dy, T* acc_dyx) {
  const int64_t n = tm.n;
  const int64_t j = tm.m + t;
  const double* e = tm.st + (j * B + b) * 5;
  const double mu = e[0], shift = e[2], r = e[3];
  const bool clamped = e[4] != 0.0;
  const double mean = tm.k == 1 ? mu : tm.ref[b] + shift;
  const T mt = (T)mean, rt = (T)r;
  const T* g = tm.g;
  T sg = 0, sgx = 0;
  if (g && acc_dyx) {
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t i = 0; i < n; ++i) {
      const T xh = (a[i] - mt) * rt;
      const T gh = dy[i] * g[i];
      sg += gh;
      sgx += gh * xh;
      acc_dyx[i] += dy[i] * xh;
    }
  } else if (g) {
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t i = 0; i < n; ++i) {
      const T gh = dy[i] * g[i];
      sg += gh;
      sgx += gh * ((a[i] - mt) * rt);
    }
  } else {
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t i = 0; i < n; ++i) {
      sg += dy[i];
      sgx += dy[i] * ((a[i] - mt) * rt);
    }
  }
  if (acc_dy) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) acc_dy[i] += dy[i];
  }
  const double dmean = -r * (double)sg;
  const double dvar = clamped ? 0.0 : -0.5 * r * r * (double)sgx;
  double dm, dv;
  if (tm.k == 1) {
    dm = dmean;
    dv = dvar;
  } else {
    const double w = (double)std::min(tm.k, j + 1);
    const double xa = (dmean - 2.0 * dvar * shift) / w, xb = dvar / w;
    double* xs = tm.x + (t * B + b) * 2;
    xs[0] = xa;
    xs[1] = xb;
    tm.ra[b] += xa;
    tm.rb[b] += xb;
    if (t + tm.k <= Tn - 1) {
      const double* xo = tm.x + ((t + tm.k) * B + b) * 2;
      tm.ra[b] -= xo[0];
      tm.rb[b] -= xo[1];
    }
    const double d = mu - tm.ref[b];
    dm = tm.ra[b] + 2.0 * d * tm.rb[b];
    dv = tm.rb[b];
  }
  const int64_t first_out = tm.m + Tn - tm.L;
  if (tm.gout && j >= first_out) {
    const double* go = tm.gout + ((j - first_out) * B + b) * 2;
    dm += go[0];
    dv += go[1];
  }
  const T c1 = (T)(dm / n), c2 = (T)(2.0 * dv / n), mut = (T)mu;
  if (g) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) da[i] = dy[i] * g[i] * rt + c1 + c2 * (a[i] - mut);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) da[i] = dy[i] * rt + c1 + c2 * (a[i] - mut);
  }
}

// The gradient of the (m, B, 2) window state passed in: only later steps' windows reach it.
template <typename T>
void history_grad_row(const Term<T>& tm, int64_t b, int64_t B, int64_t Tn, double* dp) {
  if (tm.k == 1 || tm.m == 0) return;
  const int64_t first_out = tm.m + Tn - tm.L;
  for (int64_t t = -1; t >= -tm.m; --t) {
    if (t + tm.k <= Tn - 1) {
      const double* xo = tm.x + ((t + tm.k) * B + b) * 2;
      tm.ra[b] -= xo[0];
      tm.rb[b] -= xo[1];
    }
    const int64_t j = tm.m + t;
    const double d = tm.st[(j * B + b) * 5] - tm.ref[b];
    double dm = tm.ra[b] + 2.0 * d * tm.rb[b], dv = tm.rb[b];
    if (tm.gout && j >= first_out) {
      dm += tm.gout[((j - first_out) * B + b) * 2];
      dv += tm.gout[((j - first_out) * B + b) * 2 + 1];
    }
    dp[(j * B + b) * 2] = dm;
    dp[(j * B + b) * 2 + 1] = dv;
  }
}


// History (m, B, 2) -> st rows 0..m-1, ref, running totals.
template <typename T>
void init_history(Term<T>& tm, const Tensor& hist, int64_t B) {
  const double* h = hist.data_ptr<double>();
  for (int64_t j = 0; j < tm.m; ++j)
    for (int64_t b = 0; b < B; ++b) {
      double* e = tm.st + (j * B + b) * 5;
      e[0] = h[(j * B + b) * 2];
      e[1] = h[(j * B + b) * 2 + 1];
      e[2] = e[3] = e[4] = 0.0;
    }
  for (int64_t b = 0; b < B; ++b) {
    tm.s1[b] = tm.s2[b] = 0.0;
    tm.ref[b] = tm.m ? h[b * 2] : 0.0;
  }
  if (tm.k > 1)
    for (int64_t j = 0; j < tm.m; ++j)
      for (int64_t b = 0; b < B; ++b) {
        const double* e = tm.st + (j * B + b) * 5;
        const double d = e[0] - tm.ref[b];
        tm.s1[b] += d;
        tm.s2[b] += e[1] + d * d;
      }
}

// The returned window state: (mean, var) of the last min(k-1, m+T) steps; with a padded batch
// (all) every step's, from which the Python side takes each sequence's own (history_at).
Tensor history_out(const Tensor& st, int64_t k, int64_t total, bool all = false) {
  const int64_t L = all ? (k > 1 ? total : 0) : std::min(k - 1, total);
  return st.narrow(0, total - L, L).narrow(2, 0, 2).contiguous();
}


// ------------------------------------------------------------------------------------------

struct FwdBufs {
  Tensor out, WX, AH, ACT, C, TY, stx, sth, stc, refs, tot, Z, YC, w_t, wi_t;
};

template <typename T>
void forward_impl(const Tensor& x, const OptT& b_ih, const Tensor& h0, const Tensor& c0, const OptT& b_hh,
                  const OptT& bias, const OptT& gx, const OptT& sx, const OptT& gh, const OptT& sh, const OptT& gc,
                  const OptT& sc, const Tensor& hist_x, const Tensor& hist_h, const Tensor& hist_c, int64_t kx,
                  int64_t kh, int64_t kc, double eps, bool save, int64_t grain, FwdBufs& f, const int64_t* len) {
  const int64_t Tn = x.size(0), B = x.size(1), D = x.size(2), H = h0.size(1), G = 4 * H;
  const int64_t mx = hist_x.size(0), mh = hist_h.size(0), mc = hist_c.size(0);
  const auto opts = x.options();
  Term<T> tx, th, tc;
  double* rp = f.refs.data_ptr<double>();
  double* tp = f.tot.data_ptr<double>();
  tx.n = G; tx.k = kx; tx.m = mx; tx.g = opt_ptr<T>(gx); tx.s = opt_ptr<T>(sx);
  tx.st = f.stx.data_ptr<double>(); tx.ref = rp; tx.s1 = tp; tx.s2 = tp + B;
  th.n = G; th.k = kh; th.m = mh; th.g = opt_ptr<T>(gh); th.s = opt_ptr<T>(sh);
  th.st = f.sth.data_ptr<double>(); th.ref = rp + B; th.s1 = tp + 2 * B; th.s2 = tp + 3 * B;
  tc.n = H; tc.k = kc; tc.m = mc; tc.g = opt_ptr<T>(gc); tc.s = opt_ptr<T>(sc);
  tc.st = f.stc.data_ptr<double>(); tc.ref = rp + 2 * B; tc.s1 = tp + 4 * B; tc.s2 = tp + 5 * B;
  init_history(tx, hist_x, B);
  init_history(th, hist_h, B);
  init_history(tc, hist_c, B);
  const T* bp = opt_ptr<T>(bias);
  const T* bih = opt_ptr<T>(b_ih);
  const T* bhh = opt_ptr<T>(b_hh);
  const T* xp = x.data_ptr<T>();
  const T* h0p = h0.data_ptr<T>();
  const T* c0p = c0.data_ptr<T>();
  const T* wtp = f.w_t.data_ptr<T>();
  const T* witp = f.wi_t.data_ptr<T>();
  T* outp = f.out.data_ptr<T>();
  T* wxp = f.WX.data_ptr<T>();
  T* ahp = f.AH.data_ptr<T>();
  T* actp = f.ACT.data_ptr<T>();
  T* cp = f.C.data_ptr<T>();
  T* typ = f.TY.data_ptr<T>();
  T* zp = f.Z.data_ptr<T>();
  T* ycp = f.YC.data_ptr<T>();
  at::parallel_for(0, B, grain, [&](int64_t b0, int64_t b1) {
    for (int64_t t = 0; t < Tn; ++t) {
      const int64_t ts = save ? t : 0;
      const int64_t tcur = save ? t : (t % 2), tprev = save ? t - 1 : ((t + 1) % 2);
      const T* hprev = t == 0 ? h0p : outp + (t - 1) * B * H;
      const int64_t M = running(len, b0, b1, t);  // this chunk's rows still running: the first M
      // W_x x_t + b_x and W_h h_{t-1} + b_h for this chunk's rows
      gemm<T>(xp + (t * B + b0) * D, D, 1, witp, wxp + (ts * B + b0) * G, M, G, D, bih, false, opts);
      gemm<T>(hprev + b0 * H, H, 1, wtp, ahp + (ts * B + b0) * G, M, G, H, bhh, false, opts);
      for (int64_t b = b0 + M; b < b1; ++b) {  // held: a padded batch's finished rows
        const T* cprev = t == 0 ? c0p + b * H : cp + (tprev * B + b) * H;
        std::copy(cprev, cprev + H, cp + (tcur * B + b) * H);
        std::copy(hprev + b * H, hprev + (b + 1) * H, outp + (t * B + b) * H);
      }
      for (int64_t b = b0; b < b0 + M; ++b) {
        T* z = zp + b * G;
        norm_fwd_row<T>(tx, t, b, B, wxp + (ts * B + b) * G, z, false, eps);
        norm_fwd_row<T>(th, t, b, B, ahp + (ts * B + b) * G, z, true, eps);
        if (bp) {
#pragma omp simd
          for (int64_t i = 0; i < G; ++i) z[i] += bp[i];
        }
        T* act = actp + (ts * B + b) * G;
        sigmoid_rows<T>(z, act, 2 * H);
        tanh_rows<T>(z + 2 * H, act + 2 * H, H);
        sigmoid_rows<T>(z + 3 * H, act + 3 * H, H);
        T* c = cp + (tcur * B + b) * H;
        const T* cprev = t == 0 ? c0p + b * H : cp + (tprev * B + b) * H;
#pragma omp simd
        for (int64_t i = 0; i < H; ++i) c[i] = act[H + i] * cprev[i] + act[i] * act[2 * H + i];
        T* yc = ycp + b * H;
        norm_fwd_row<T>(tc, t, b, B, c, yc, false, eps);
        T* ty = typ + (ts * B + b) * H;
        T* o = outp + (t * B + b) * H;
        tanh_rows<T>(yc, ty, H);
#pragma omp simd
        for (int64_t i = 0; i < H; ++i) o[i] = act[3 * H + i] * ty[i];
      }
    }
  });
}

// Inputs: x (T, B, D), the layer's weights; the window states (m, B, 2) float64. Returns
// out, c_n, the three new window states, and (save) what the backward needs.
std::vector<Tensor> norm_lstm_forward(const Tensor& x, const Tensor& w_ih, const OptT& b_ih, const Tensor& h0,
                                      const Tensor& c0, const Tensor& w_hh, const OptT& b_hh, const OptT& bias,
                                      const OptT& gx, const OptT& sx, const OptT& gh, const OptT& sh,
                                      const OptT& gc, const OptT& sc, const Tensor& hist_x, const Tensor& hist_h,
                                      const Tensor& hist_c, int64_t kx, int64_t kh, int64_t kc, double eps,
                                      bool save, int64_t grain, const OptT& lengths) {
  TORCH_CHECK(x.dim() == 3 && x.is_contiguous() && h0.is_contiguous() && c0.is_contiguous(),
              "norm_lstm_forward: contiguous (T, B, D) input and (B, H) states expected");
  const int64_t Tn = x.size(0), B = x.size(1), D = x.size(2), H = h0.size(1), G = 4 * H;
  const Tensor lens = checked_lengths(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  TORCH_CHECK(Tn >= 1 && w_ih.size(0) == G && w_ih.size(1) == D && w_hh.size(0) == G && w_hh.size(1) == H,
              "norm_lstm_forward: shape mismatch");
  const auto opts = x.options();
  const auto dopts = opts.dtype(at::kDouble);
  const int64_t mx = hist_x.size(0), mh = hist_h.size(0), mc = hist_c.size(0);
  FwdBufs f;
  f.out = at::empty({Tn, B, H}, opts);
  f.WX = at::empty({save ? Tn : 1, B, G}, opts);
  f.AH = at::empty({save ? Tn : 1, B, G}, opts);
  f.ACT = at::empty({save ? Tn : 1, B, G}, opts);
  f.C = at::empty({save ? Tn : 2, B, H}, opts);
  f.TY = at::empty({save ? Tn : 1, B, H}, opts);
  f.stx = at::empty({mx + Tn, B, 5}, dopts);
  f.sth = at::empty({mh + Tn, B, 5}, dopts);
  f.stc = at::empty({mc + Tn, B, 5}, dopts);
  f.refs = at::zeros({3, B}, dopts);
  f.tot = at::zeros({6, B}, dopts);
  f.Z = at::empty({B, G}, opts);
  f.YC = at::empty({B, H}, opts);
  f.w_t = w_hh.t().contiguous();   // (H, G)
  f.wi_t = w_ih.t().contiguous();  // (D, G)
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "norm_lstm_forward", [&] {
    forward_impl<scalar_t>(x, b_ih, h0, c0, b_hh, bias, gx, sx, gh, sh, gc, sc, hist_x, hist_h, hist_c, kx, kh, kc,
                           eps, save, grain, f, len);
  });
  Tensor cn = f.C.select(0, save ? Tn - 1 : (Tn - 1) % 2).clone();
  const bool all = len != nullptr;
  Tensor hx = history_out(f.stx, kx, mx + Tn, all), hh = history_out(f.sth, kh, mh + Tn, all),
         hc = history_out(f.stc, kc, mc + Tn, all);
  if (!save) return {f.out, cn, hx, hh, hc};
  return {f.out, cn, hx, hh, hc, f.WX, f.AH, f.ACT, f.C, f.TY, f.stx, f.sth, f.stc, f.refs};
}

// ------------------------------------------------------------------------------------------

struct BwdBufs {
  Tensor dx, DWX, DAH, DH, DC, DZ, DYC, DCN, acc, accc, xs, rs, dhist_x, dhist_h, dhist_c, w, wi, dW, dWi;
  Tensor dout, ghx, ghh, ghc, refs;
};

template <typename T>
void backward_impl(const Tensor& x, const Tensor& h0, const Tensor& c0, const OptT& gx, const OptT& gh,
                   const OptT& gc, const Tensor& out, const Tensor& WX, const Tensor& AH, const Tensor& ACT,
                   const Tensor& C, const Tensor& TY, const Tensor& stx, const Tensor& sth, const Tensor& stc,
                   int64_t kx, int64_t kh, int64_t kc, bool need_dx, int64_t grain, BwdBufs& f,
                   const int64_t* len) {
  const int64_t Tn = x.size(0), B = x.size(1), D = x.size(2), H = h0.size(1), G = 4 * H;
  const int64_t mx = stx.size(0) - Tn, mh = sth.size(0) - Tn, mc = stc.size(0) - Tn;
  const auto opts = x.options();
  Term<T> tx, th, tc;
  double* rp = f.refs.data_ptr<double>();
  double* rsp = f.rs.data_ptr<double>();
  double* xsp = f.xs.data_ptr<double>();
  auto setup = [&](Term<T>& tm, int64_t n, int64_t k, int64_t m, const OptT& g, const Tensor& st, int q,
                   const Tensor& gout) {
    tm.n = n; tm.k = k; tm.m = m; tm.g = opt_ptr<T>(g);
    tm.st = st.data_ptr<double>();
    tm.ref = rp + q * B;
    tm.x = xsp + q * Tn * B * 2;
    tm.ra = rsp + 2 * q * B;
    tm.rb = rsp + (2 * q + 1) * B;
    tm.L = gout.defined() ? gout.size(0) : std::min(k - 1, m + Tn);  // a padded batch's: every step
    tm.gout = gout.defined() && tm.L > 0 ? gout.data_ptr<double>() : nullptr;
  };
  setup(tx, G, kx, mx, gx, stx, 0, f.ghx);
  setup(th, G, kh, mh, gh, sth, 1, f.ghh);
  setup(tc, H, kc, mc, gc, stc, 2, f.ghc);
  const T* doutp = f.dout.defined() ? f.dout.data_ptr<T>() : nullptr;
  const T* xp = x.data_ptr<T>();
  const T* outp = out.data_ptr<T>();
  const T* h0p = h0.data_ptr<T>();
  const T* wxp = WX.data_ptr<T>();
  const T* ahp = AH.data_ptr<T>();
  const T* actp = ACT.data_ptr<T>();
  const T* cp = C.data_ptr<T>();
  const T* typ = TY.data_ptr<T>();
  const T* c0p = c0.data_ptr<T>();
  const T* wp = f.w.data_ptr<T>();
  const T* wip = f.wi.data_ptr<T>();
  T* dxp = need_dx ? f.dx.data_ptr<T>() : nullptr;
  T* dwxp = f.DWX.data_ptr<T>();
  T* dahp = f.DAH.data_ptr<T>();
  T* dhp = f.DH.data_ptr<T>();
  T* dcp = f.DC.data_ptr<T>();
  T* dzp = f.DZ.data_ptr<T>();
  T* dycp = f.DYC.data_ptr<T>();
  T* dcnp = f.DCN.data_ptr<T>();
  T* accp = f.acc.data_ptr<T>();
  T* acccp = f.accc.data_ptr<T>();
  T* dWp = f.dW.data_ptr<T>();
  T* dWip = f.dWi.data_ptr<T>();
  double* dhx = f.dhist_x.data_ptr<double>();
  double* dhh = f.dhist_h.data_ptr<double>();
  double* dhc = f.dhist_c.data_ptr<double>();
  const bool affx = tx.g != nullptr, affh = th.g != nullptr, affc = tc.g != nullptr;
  const int64_t slots = f.dW.size(0);
  const bool inloop = f.DAH.size(0) == 1;
  at::parallel_for(0, B, grain, [&](int64_t b0, int64_t b1) {
    const int64_t slot = std::min<int64_t>(at::get_thread_num(), slots - 1);
    T* dW = dWp + slot * G * H;   // this thread's dW_hh (G, H)
    T* dWi = dWip + slot * G * D;  // and dW_ih (G, D)
    for (int64_t t = Tn - 1; t >= 0; --t) {
      const int64_t tw = inloop ? 0 : t;  // where this step's dA_x, dA_h go
      // Rows b0 + M.. are held (a padded batch, finished): their dh and dc pass straight to the
      // step before, and nothing enters their gates (dA and dx: 0).
      const int64_t M = running(len, b0, b1, t);
      if (M < b1 - b0) {
        std::fill(dwxp + (tw * B + b0 + M) * G, dwxp + (tw * B + b1) * G, T(0));
        std::fill(dahp + (tw * B + b0 + M) * G, dahp + (tw * B + b1) * G, T(0));
        if (dxp) std::fill(dxp + (t * B + b0 + M) * D, dxp + (t * B + b1) * D, T(0));
        if (doutp)  // out is the held h (h_n its last step): its gradient reaches the last real step
          for (int64_t b = b0 + M; b < b1; ++b)
            for (int64_t i = 0; i < H; ++i) dhp[b * H + i] += doutp[(t * B + b) * H + i];
      }
      for (int64_t b = b0; b < b0 + M; ++b) {
        const T* act = actp + (t * B + b) * G;
        const T* ty = typ + (t * B + b) * H;
        T* dh = dhp + b * H;
        if (doutp) {
          const T* d = doutp + (t * B + b) * H;
#pragma omp simd
          for (int64_t i = 0; i < H; ++i) dh[i] += d[i];
        }
        T* dyc = dycp + b * H;
#pragma omp simd
        for (int64_t i = 0; i < H; ++i) dyc[i] = dh[i] * act[3 * H + i] * (T(1) - ty[i] * ty[i]);
        T* dcn_ = dcnp + b * H;
        norm_bwd_row<T>(tc, t, b, B, Tn, cp + (t * B + b) * H, dyc, dcn_, affc ? acccp + b * H : nullptr,
                        affc ? acccp + (B + b) * H : nullptr);
        const T* cprev = t == 0 ? c0p + b * H : cp + ((t - 1) * B + b) * H;
        T* dc = dcp + b * H;
        T* dz = dzp + b * G;
#pragma omp simd
        for (int64_t i = 0; i < H; ++i) {
          const T ig = act[i], fg = act[H + i], gg = act[2 * H + i], og = act[3 * H + i];
          const T dct = dc[i] + dcn_[i];
          dz[i] = dct * gg * ig * (T(1) - ig);
          dz[H + i] = dct * cprev[i] * fg * (T(1) - fg);
          dz[2 * H + i] = dct * ig * (T(1) - gg * gg);
          dz[3 * H + i] = dh[i] * ty[i] * og * (T(1) - og);
          dc[i] = dct * fg;
        }
        // acc rows: [0] sum dz, [1] dz * xhat_x, [2] dz * xhat_h, [3] sum d(W_x x), [4] sum d(W_h h)
        T* dwx = dwxp + (tw * B + b) * G;
        T* dah = dahp + (tw * B + b) * G;
        norm_bwd_row<T>(tx, t, b, B, Tn, wxp + (t * B + b) * G, dz, dwx, accp + b * G,
                        affx ? accp + (B + b) * G : nullptr);
        norm_bwd_row<T>(th, t, b, B, Tn, ahp + (t * B + b) * G, dz, dah, nullptr,
                        affh ? accp + (2 * B + b) * G : nullptr);
        T* sx_ = accp + (3 * B + b) * G;
        T* sh_ = accp + (4 * B + b) * G;
#pragma omp simd
        for (int64_t i = 0; i < G; ++i) {
          sx_[i] += dwx[i];
          sh_[i] += dah[i];
        }
      }
      const T* hprev = t == 0 ? h0p : outp + (t - 1) * B * H;
      const T* dah_t = dahp + (tw * B + b0) * G;
      const T* dwx_t = dwxp + (tw * B + b0) * G;
      if (inloop) {  // dW_hh += dA_h^T h_{t-1}, dW_ih += dA_x^T x_t for this chunk's rows
        gemm<T>(dah_t, 1, G, hprev + b0 * H, dW, G, H, M, nullptr, true, opts);
        gemm<T>(dwx_t, 1, G, xp + (t * B + b0) * D, dWi, G, D, M, nullptr, true, opts);
      }
      if (dxp) gemm<T>(dwx_t, G, 1, wip, dxp + (t * B + b0) * D, M, D, G, nullptr, false, opts);  // dx_t = dA_x W_ih
      gemm<T>(dah_t, G, 1, wp, dhp + b0 * H, M, H, G, nullptr, false, opts);  // dh_{t-1} = dA_h W_hh
    }
    for (int64_t b = b0; b < b1; ++b) {
      history_grad_row(tx, b, B, Tn, dhx);
      history_grad_row(th, b, B, Tn, dhh);
      history_grad_row(tc, b, B, Tn, dhc);
    }
  });
}

std::vector<Tensor> norm_lstm_backward(const OptT& dout, const OptT& dcn, const OptT& dhx, const OptT& dhh,
                                       const OptT& dhc, const Tensor& x, const Tensor& w_ih, const Tensor& h0,
                                       const Tensor& c0, const Tensor& w_hh, const OptT& gx, const OptT& gh,
                                       const OptT& gc, const Tensor& out, const Tensor& WX, const Tensor& AH,
                                       const Tensor& ACT, const Tensor& C, const Tensor& TY, const Tensor& stx,
                                       const Tensor& sth, const Tensor& stc, const Tensor& refs, int64_t kx,
                                       int64_t kh, int64_t kc, double eps, bool need_dx, int64_t grain,
                                       const OptT& lengths) {
  const int64_t Tn = x.size(0), B = x.size(1), D = x.size(2), H = h0.size(1), G = 4 * H;
  const Tensor lens = checked_lengths(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  const int64_t mx = stx.size(0) - Tn, mh = sth.size(0) - Tn, mc = stc.size(0) - Tn;
  const auto opts = x.options();
  const auto dopts = opts.dtype(at::kDouble);
  const int64_t slots = std::max<int64_t>(1, at::get_num_threads());
  BwdBufs f;
  f.dx = need_dx ? at::empty({Tn, B, D}, opts) : Tensor();
  // Weight gradients accumulate inside the loop (per thread) when they stay in cache; otherwise
  // dA_x, dA_h of every step are kept and multiplied once at the end.
  const int64_t cache = 384 * 1024, size = (int64_t)x.element_size();
  const bool inloop = G * H * size <= cache && G * D * size <= cache;
  const int64_t kept = inloop ? 1 : Tn;
  f.DWX = at::empty({kept, B, G}, opts);
  f.DAH = at::empty({kept, B, G}, opts);
  f.DH = at::zeros({B, H}, opts);
  f.DC = has(dcn) ? dcn->contiguous().clone() : at::zeros({B, H}, opts);
  f.DZ = at::empty({B, G}, opts);
  f.DYC = at::empty({B, H}, opts);
  f.DCN = at::empty({B, H}, opts);
  f.acc = at::zeros({5, B, G}, opts);
  f.accc = at::zeros({2, B, H}, opts);  // dyc, dyc * xhat_c
  f.xs = at::zeros({3, Tn, B, 2}, dopts);
  f.rs = at::zeros({6, B}, dopts);
  f.dW = at::zeros({inloop ? slots : 1, G, H}, opts);
  f.dWi = at::zeros({inloop ? slots : 1, G, D}, opts);
  f.refs = refs.contiguous();
  f.w = w_hh.contiguous();   // (G, H)
  f.wi = w_ih.contiguous();  // (G, D)
  f.dout = has(dout) ? dout->contiguous() : Tensor();
  f.ghx = has(dhx) ? dhx->contiguous() : Tensor();
  f.ghh = has(dhh) ? dhh->contiguous() : Tensor();
  f.ghc = has(dhc) ? dhc->contiguous() : Tensor();
  f.dhist_x = at::zeros({mx, B, 2}, dopts);
  f.dhist_h = at::zeros({mh, B, 2}, dopts);
  f.dhist_c = at::zeros({mc, B, 2}, dopts);
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "norm_lstm_backward", [&] {
    backward_impl<scalar_t>(x, h0, c0, gx, gh, gc, out, WX, AH, ACT, C, TY, stx, sth, stc, kx, kh, kc, need_dx,
                            grain, f, len);
  });
  if (!inloop) {
    Tensor dwx = f.DWX.reshape({Tn * B, G});
    f.dW[0].addmm_(f.DAH.select(0, 0).t(), h0);
    if (Tn > 1) f.dW[0].addmm_(f.DAH.narrow(0, 1, Tn - 1).reshape({(Tn - 1) * B, G}).t(),
                               out.narrow(0, 0, Tn - 1).reshape({(Tn - 1) * B, H}));
    f.dWi[0].addmm_(dwx.t(), x.reshape({Tn * B, D}));
  }
  Tensor sums = f.acc.sum(1);    // (5, G)
  Tensor sumsc = f.accc.sum(1);  // (2, H): dyc, dyc * xhat_c
  Tensor dx = need_dx ? f.dx : at::zeros({0}, opts);
  // grads of: x, w_ih, b_ih, h0, c0, w_hh, b_hh, bias(=sum dz), gx, gh, gc, sc, windows (x, h, c);
  // the norms' shifts sx and sh also get sum dz.
  return {dx, f.dWi.sum(0), sums[3], f.DH, f.DC, f.dW.sum(0), sums[4], sums[0], sums[1], sums[2], sumsc[1],
          sumsc[0], f.dhist_x, f.dhist_h, f.dhist_c};
}

}  // namespace

TORCH_LIBRARY(atnbench_fast, m) {
  m.def(
      "norm_lstm_forward(Tensor x, Tensor w_ih, Tensor? b_ih, Tensor h0, Tensor c0, Tensor w_hh, Tensor? b_hh, "
      "Tensor? bias, Tensor? gx, Tensor? sx, Tensor? gh, Tensor? sh, Tensor? gc, Tensor? sc, Tensor hist_x, "
      "Tensor hist_h, Tensor hist_c, int kx, int kh, int kc, float eps, bool save, int grain, "
      "Tensor? lengths=None) -> Tensor[]");
  m.def(
      "norm_lstm_backward(Tensor? dout, Tensor? dcn, Tensor? dhx, Tensor? dhh, Tensor? dhc, Tensor x, Tensor w_ih, "
      "Tensor h0, Tensor c0, Tensor w_hh, Tensor? gx, Tensor? gh, Tensor? gc, Tensor out, Tensor WX, Tensor AH, "
      "Tensor ACT, Tensor C, Tensor TY, Tensor stx, Tensor sth, Tensor stc, Tensor refs, int kx, int kh, int kc, "
      "float eps, bool need_dx, int grain, Tensor? lengths=None) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(atnbench_fast, CPU, m) {
  m.impl("norm_lstm_forward", &norm_lstm_forward);
  m.impl("norm_lstm_backward", &norm_lstm_backward);
}
