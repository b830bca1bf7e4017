// The recurrence of one normalized LSTM or GRU layer for every normalization of the recurrent
// terms, forward and a hand-written backward: torch.ops.atnbench_fast.norm_rnn_forward /
// _backward. Python side: atnbench/nn/fastpath_rnn.py (which also documents the math).
//
// The input term N_x(W_x x [+ b_x]) [+ b] is computed before the recurrence (one matmul for all
// steps, then norm_seq_forward below, or the layer's own code for padded batches and norms
// without a kind); this op receives it as xn (T, B, G) and returns its gradient. The hidden term N_h(W_h h_{t-1} + b_h) and the LSTM
// cell term N_c(c_t) each get one of:
//   none  - the identity
//   row   - LN (k = 1) / ATN-LN: statistics over the features of each row, window of k steps
//   col   - BN (k = 1) / ATN-BN: statistics over the batch, per feature, window of k steps
//   bln   - BLN (Ziaee & Cano, Algorithm 1): batch and feature statistics mixed; each of the
//           four statistics may be given (population estimates at inference)
//   given - per-step population mean and 1/sqrt(var + eps) (BN / ATN-BN at inference)
// Batch statistics couple the rows at every step, so this op runs the whole batch as one
// chunk per step (single thread; at the paper's sizes the per-step work is too small to split:
// benchmarks/README.md). Window statistics follow norm_lstm.cpp (and window.py): per step and
// slot (a row for "row", a feature for "col") the moments (m_j, v_j) are kept in double, the
// power sums shifted by the first step's mean, the window totals updated in O(1) per step; the
// backward's window adjoint is a reverse running sum over k steps.
//
// Padded batches (lengths, sorted longest first, every step of the call with a valid row): at
// each step the rows still running (the first ones) compute; after row b's last step its h and c
// are held (out holds h; the Python side zeroes the padded outputs), no gradient enters its gates,
// and "col"/"bln" statistics pool the valid rows ("col" windows weight each step by its count of
// values); "row" terms are per row. Dense batches take the code as before.

#include <ATen/ops/cat.h>

#include "kernels.h"

namespace {

enum Kind : int64_t { kNone = 0, kRow = 1, kCol = 2, kBln = 3, kGiven = 4 };
enum Cell : int64_t { kLSTM = 0, kGRU = 1 };
// Per-step, per-slot statistics record: m_j, v_j, window mean, r = 1/sqrt(var+eps), flag (1: the
// variance was clamped; 2: ATN-BN's window is flat, see mark_flat), window var (biased, clamped
// at 0), shift (window mean - ref).
constexpr int64_t SW = 7;
constexpr double kFlat = 2.0;
// The optional tensors of one term, in the order of the Python side's list.
enum Opt { kGain = 0, kShift, kHist, kGMean, kGRstd, kBMean, kBStd, kFMean, kFStd, kNOpt };

template <typename T>
struct Norm {
  int64_t kind = kNone, n = 0, B = 0, S = 0, k = 1, m = 0, Tn = 0, L = 0;
  double eps = 0;
  const T* g = nullptr;
  const T* s = nullptr;
  double* st = nullptr;  // (m + Tn, S, SW)
  double* ref = nullptr;  // (S)
  std::vector<double> s1, s2;
  const T *gmean = nullptr, *grstd = nullptr;  // kGiven: (Tn, n)
  const T *bm = nullptr, *bs = nullptr, *fm = nullptr, *fs = nullptr;  // kBln given: (Tn, n), (Tn)
  double* bl = nullptr;  // kBln: (Tn, 2n + 2B) batch mean, batch std, feature mean, feature std used
  // backward
  std::vector<double> xs, ra, rb;
  const double* gout = nullptr;  // (L, S, 2) gradient of the returned window history
  std::vector<T> dg, ds;          // gain / shift gradients
  std::vector<T> u1, u2, u3, u4;  // scratch (per feature or per row)
  // Padded batches (lengths given): row b is valid at step t while t < len[b]. Batch statistics
  // pool the valid rows only; "col" windows weight each step by its number of values (cnt: B for
  // the window state's steps, the valid rows for this call's; wtot: the window's total).
  const int64_t* len = nullptr;
  std::vector<uint8_t> valid;  // this step's valid rows
  int64_t nv = 0;              // and their number
  std::vector<double> cnt, wtot;  // (m + Tn)
};

// The valid rows of step t (padded batches only).
template <typename T>
inline void set_step(Norm<T>& nm, int64_t t) {
  nm.nv = 0;
  for (int64_t b = 0; b < nm.B; ++b) {
    nm.valid[b] = nm.len[b] > t ? 1 : 0;
    nm.nv += nm.valid[b];
  }
}

template <typename T>
const T* opt_at(const c10::List<c10::optional<Tensor>>& l, int i) {
  const c10::optional<Tensor> t = l.get(i);
  return t.has_value() && t->defined() ? t->data_ptr<T>() : nullptr;
}

inline int64_t slots(int64_t kind, int64_t B, int64_t n) { return kind == kRow ? B : (kind == kCol ? n : 0); }

// ------------------------------------------------------------------------------------------
// Window statistics of one slot (shared by "row" and "col").

// Step j's record of slot q (m_j, v_j) and its window's moments. A padded batch's "col" term
// weights each step by its number of values (cnt[j], the window's total wtot[j]: the pooled
// moments of window.pooled_window); every other term counts each step once, over min(k, j + 1)
// steps (a weight of exactly 1.0 gives the unweighted sums' numbers, bit for bit).
template <typename T>
inline void window_push(Norm<T>& nm, int64_t j, int64_t q, double mu, double v) {
  double* e = nm.st + (j * nm.S + q) * SW;
  e[0] = mu;
  e[1] = v;
  double mean = mu, var = v, shift = 0.0;
  bool clamped = false;
  if (nm.k > 1) {
    const bool counts = !nm.cnt.empty();
    if (j == 0) nm.ref[q] = mu;
    const double ref = nm.ref[q], d = mu - ref, c = counts ? nm.cnt[j] : 1.0;
    nm.s1[q] += c * d;
    nm.s2[q] += c * (v + d * d);
    if (j >= nm.k) {  // the step leaving the window
      const double* o = nm.st + ((j - nm.k) * nm.S + q) * SW;
      const double dold = o[0] - ref, cold = counts ? nm.cnt[j - nm.k] : 1.0;
      nm.s1[q] -= cold * dold;
      nm.s2[q] -= cold * (o[1] + dold * dold);
    }
    const double w = counts ? nm.wtot[j] : (double)std::min(nm.k, j + 1);
    shift = nm.s1[q] / w;
    var = nm.s2[q] / w - shift * shift;
    if (var < 0.0) {
      var = 0.0;
      clamped = true;
    }
    mean = ref + shift;
  }
  e[2] = mean;
  e[3] = 1.0 / std::sqrt(var + nm.eps);
  e[4] = clamped ? 1.0 : 0.0;
  e[5] = var;
  e[6] = shift;
}

// (dm_j, dv_j) of step t's slot q from sg = sum g^, sgx = sum g^ xhat over the reduced axis
// (g^ = dy * gain), including what later steps' windows send back (fast_python.py has the math).
template <typename T>
inline void window_adjoint(Norm<T>& nm, int64_t t, int64_t q, double sg, double sgx, double& dm, double& dv) {
  const int64_t j = nm.m + t, S = nm.S;
  const double* e = nm.st + (j * S + q) * SW;
  const double r = e[3];
  const double dmean = -r * sg;
  const double dvar = e[4] != 0.0 ? 0.0 : -0.5 * r * r * sgx;
  if (nm.k == 1) {
    dm = dmean;
    dv = dvar;
  } else {
    const double w = (double)std::min(nm.k, j + 1);
    const double xa = (dmean - 2.0 * dvar * e[6]) / w, xb = dvar / w;
    nm.xs[(t * S + q) * 2] = xa;
    nm.xs[(t * S + q) * 2 + 1] = xb;
    nm.ra[q] += xa;
    nm.rb[q] += xb;
    if (t + nm.k <= nm.Tn - 1) {
      nm.ra[q] -= nm.xs[((t + nm.k) * S + q) * 2];
      nm.rb[q] -= nm.xs[((t + nm.k) * S + q) * 2 + 1];
    }
    dm = nm.ra[q] + 2.0 * (e[0] - nm.ref[q]) * nm.rb[q];
    dv = nm.rb[q];
  }
  const int64_t first_out = nm.m + nm.Tn - nm.L;
  if (nm.gout && j >= first_out) {
    dm += nm.gout[((j - first_out) * S + q) * 2];
    dv += nm.gout[((j - first_out) * S + q) * 2 + 1];
  }
}

// window_adjoint of a padded batch's "col" term, as the coefficients of da over step t's valid
// rows: da = dy g r + c1 + c2 (a - m_j), i.e. c1 = dL/dm_j / n_j, c2 = 2 dL/dv_j / n_j. With
// counts the window mean is sum_j n_j m_j / N: the running sums carry 1/N and n_j cancels.
template <typename T>
inline void window_adjoint_counts(Norm<T>& nm, int64_t t, int64_t q, double sg, double sgx, double& c1,
                                  double& c2) {
  const int64_t j = nm.m + t, S = nm.S;
  const double* e = nm.st + (j * S + q) * SW;
  const double r = e[3], nj = nm.cnt[j];
  const double dmean = -r * sg;
  const double dvar = e[4] != 0.0 ? 0.0 : -0.5 * r * r * sgx;
  if (nm.k == 1) {
    c1 = dmean / nj;
    c2 = 2.0 * dvar / nj;
  } else {
    const double w = nm.wtot[j];
    const double xa = (dmean - 2.0 * dvar * e[6]) / w, xb = dvar / w;
    nm.xs[(t * S + q) * 2] = xa;
    nm.xs[(t * S + q) * 2 + 1] = xb;
    nm.ra[q] += xa;
    nm.rb[q] += xb;
    if (t + nm.k <= nm.Tn - 1) {
      nm.ra[q] -= nm.xs[((t + nm.k) * S + q) * 2];
      nm.rb[q] -= nm.xs[((t + nm.k) * S + q) * 2 + 1];
    }
    c1 = nm.ra[q] + 2.0 * (e[0] - nm.ref[q]) * nm.rb[q];
    c2 = 2.0 * nm.rb[q];
  }
  const int64_t first_out = nm.m + nm.Tn - nm.L;
  if (nm.gout && j >= first_out) {
    c1 += nm.gout[((j - first_out) * S + q) * 2] / nj;
    c2 += 2.0 * nm.gout[((j - first_out) * S + q) * 2 + 1] / nj;
  }
}

// The gradient of the (m, S, 2) window state passed in: only later steps' windows reach it.
template <typename T>
void history_grad(Norm<T>& nm, double* dp) {
  if (nm.k == 1 || nm.m == 0) return;
  const int64_t S = nm.S, first_out = nm.m + nm.Tn - nm.L;
  for (int64_t q = 0; q < S; ++q)
    for (int64_t t = -1; t >= -nm.m; --t) {
      if (t + nm.k <= nm.Tn - 1) {
        nm.ra[q] -= nm.xs[((t + nm.k) * S + q) * 2];
        nm.rb[q] -= nm.xs[((t + nm.k) * S + q) * 2 + 1];
      }
      const int64_t j = nm.m + t;
      const double c = nm.cnt.empty() ? 1.0 : nm.cnt[j];  // counts: the sums carry 1/N, not 1/w
      double dm = c * (nm.ra[q] + 2.0 * (nm.st[(j * S + q) * SW] - nm.ref[q]) * nm.rb[q]), dv = c * nm.rb[q];
      if (nm.gout && j >= first_out) {
        dm += nm.gout[((j - first_out) * S + q) * 2];
        dv += nm.gout[((j - first_out) * S + q) * 2 + 1];
      }
      dp[(j * S + q) * 2] = dm;
      dp[(j * S + q) * 2 + 1] = dv;
    }
}

// ATN-BN's flat windows (functional.cut_flat says why): flag kFlat in step j's record of each
// feature whose value is the same in every row of a (B, n) and whose window's steps all have
// this step's (m_j, v_j), bit for bit. The backward then sends nothing through that step's
// normalization (its gain and shift gradients stay). Only for k > 1 (k = 1 is BN: rows alike).
template <typename T>
void mark_flat(Norm<T>& nm, int64_t j, const T* a) {
  const int64_t B = nm.B, n = nm.n, first = std::max<int64_t>(0, j - nm.k + 1);
  const uint8_t* v = nm.len ? nm.valid.data() : nullptr;  // padded: the valid rows only
  int64_t b0 = 0;
  while (v && b0 < B - 1 && !v[b0]) ++b0;
  for (int64_t i = 0; i < n; ++i) {
    double* e = nm.st + (j * n + i) * SW;
    const T ref = a[b0 * n + i];
    bool flat = ref == ref;  // a NaN is alike to nothing
    for (int64_t b = b0 + 1; b < B && flat; ++b) flat = (v && !v[b]) || a[b * n + i] == ref;
    for (int64_t p = first; p < j && flat; ++p) {
      const double* o = nm.st + (p * n + i) * SW;
      flat = o[0] == e[0] && o[1] == e[1];
    }
    if (flat) e[4] = kFlat;
  }
}

// ------------------------------------------------------------------------------------------
// Forward of one term at step t: y (add ? += : =) N(a), a and y (B, n) row-major.

template <typename T>
inline void affine_out(T* y, const T* a, T mean, T r, const T* g, const T* s, int64_t n, bool add) {
  for (int64_t i = 0; i < n; ++i) {
    T v = (a[i] - mean) * r;
    if (g) v = v * g[i];
    if (s) v = v + s[i];
    y[i] = add ? y[i] + v : v;
  }
}

// "col" (BN, ATN-BN) of a padded batch's step: moments over the valid rows, windows weighted by
// counts; every row is normalized with them (the cell discards the others).
template <typename T>
void col_forward_masked(Norm<T>& nm, int64_t t, const T* a, T* y, bool add) {
  const int64_t B = nm.B, n = nm.n, j = nm.m + t;
  const uint8_t* v = nm.valid.data();
  const T cnt = (T)nm.nv;
  const T* g = nm.g;
  const T* s = nm.s;
  T* sum = nm.u1.data();
  T* sq = nm.u2.data();
  T* mt = nm.u3.data();
  T* rt = nm.u4.data();
  std::fill(sum, sum + n, T(0));
  std::fill(sq, sq + n, T(0));
  for (int64_t b = 0; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i) sum[i] += a[b * n + i];
  for (int64_t i = 0; i < n; ++i) sum[i] /= cnt;
  for (int64_t b = 0; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i) {
        const T d = a[b * n + i] - sum[i];
        sq[i] += d * d;
      }
  for (int64_t i = 0; i < n; ++i) {
    window_push(nm, j, i, (double)sum[i], (double)(sq[i] / cnt));
    const double* e = nm.st + (j * n + i) * SW;
    mt[i] = (T)e[2];
    rt[i] = (T)e[3];
  }
  if (nm.k > 1) mark_flat(nm, j, a);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n && v[b]; ++i) {  // the other rows' outputs are never read
      T val = (a[b * n + i] - mt[i]) * rt[i];
      if (g) val = val * g[i];
      if (s) val = val + s[i];
      y[b * n + i] = add ? y[b * n + i] + val : val;
    }
}

// BLN of a padded batch's step: the batch statistics pool the valid rows and m in eq. 16 is their
// number (functional.batch_layer_norm's mask); the feature statistics are per row.
template <typename T>
void bln_forward_masked(Norm<T>& nm, int64_t t, const T* a, T* y, bool add) {
  const int64_t B = nm.B, n = nm.n;
  const uint8_t* v = nm.valid.data();
  const T* g = nm.g;
  const T* s = nm.s;
  const double m = (double)nm.nv;
  const double alpha = 1.0 - (1.0 / m + nm.eps), beta = 1.0 / m - nm.eps;
  const double root = std::sqrt((double)n);
  T* mb = nm.u1.data();
  T* sb = nm.u2.data();
  T* mf = nm.u3.data();
  T* sf = nm.u4.data();
  if (nm.bm) {
    std::copy(nm.bm + t * n, nm.bm + (t + 1) * n, mb);
  } else {
    std::fill(mb, mb + n, T(0));
    for (int64_t b = 0; b < B; ++b)
      if (v[b])
        for (int64_t i = 0; i < n; ++i) mb[i] += a[b * n + i];
    for (int64_t i = 0; i < n; ++i) mb[i] /= (T)m;
  }
  if (nm.bs) {
    std::copy(nm.bs + t * n, nm.bs + (t + 1) * n, sb);
  } else {
    std::fill(sb, sb + n, T(0));
    for (int64_t b = 0; b < B; ++b)
      if (v[b])
        for (int64_t i = 0; i < n; ++i) sb[i] += (a[b * n + i] - mb[i]) * (a[b * n + i] - mb[i]);
    for (int64_t i = 0; i < n; ++i) sb[i] = std::sqrt(sb[i] / (T)m + (T)nm.eps);
  }
  for (int64_t b = 0; b < B; ++b) {
    const T* ab = a + b * n;
    if (!v[b]) {  // a finished row: never read (its records: 0 and 1)
      mf[b] = T(0);
      sf[b] = T(1);
      continue;
    }
    T mu;
    if (nm.fm) {
      mu = nm.fm[t];
    } else {
      T sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += ab[i];
      mu = sum / (T)n;
    }
    mf[b] = mu;
    if (nm.fs) {
      sf[b] = nm.fs[t];
    } else {
      T sq = 0;
      for (int64_t i = 0; i < n; ++i) sq += (ab[i] - mu) * (ab[i] - mu);
      sf[b] = std::sqrt(sq / (T)n + (T)nm.eps);
    }
  }
  double* rec = nm.bl + t * (2 * n + 2 * B);
  for (int64_t i = 0; i < n; ++i) {
    rec[i] = (double)mb[i];
    rec[n + i] = (double)sb[i];
  }
  for (int64_t b = 0; b < B; ++b) {
    rec[2 * n + b] = (double)mf[b];
    rec[2 * n + B + b] = (double)sf[b];
  }
  const T ca = (T)(alpha / root), cf = (T)(beta / root);
  for (int64_t b = 0; b < B; ++b) {
    const T* ab = a + b * n;
    T* yb = y + b * n;
    for (int64_t i = 0; i < n && v[b]; ++i) {
      T val = ca * (ab[i] - mb[i]) / sb[i] + cf * (ab[i] - mf[b]) / sf[b];
      if (g) val = val * g[i];
      if (s) val = val + s[i];
      yb[i] = add ? yb[i] + val : val;
    }
  }
}

template <typename T>
void norm_forward(Norm<T>& nm, int64_t t, const T* a, T* y, bool add) {
  if (nm.len) set_step(nm, t);
  if (nm.len && (nm.kind == kCol || nm.kind == kBln)) {  // the batch's statistics: its valid rows
    if (nm.kind == kCol) col_forward_masked(nm, t, a, y, add);
    else bln_forward_masked(nm, t, a, y, add);
    return;
  }
  // Per-row kinds of a padded batch: its valid rows are the first nv (lengths sorted), only they run.
  const int64_t B = nm.len ? nm.nv : nm.B, n = nm.n, j = nm.m + t;
  const T* g = nm.g;
  const T* s = nm.s;
  switch (nm.kind) {
    case kNone:
      for (int64_t q = 0; q < B * n; ++q) y[q] = add ? y[q] + a[q] : a[q];
      return;
    case kRow:
      for (int64_t b = 0; b < B; ++b) {
        const T* ab = a + b * n;
        T sum = 0, sq = 0;
        for (int64_t i = 0; i < n; ++i) sum += ab[i];
        const T mu = sum / (T)n;
        for (int64_t i = 0; i < n; ++i) sq += (ab[i] - mu) * (ab[i] - mu);
        window_push(nm, j, b, (double)mu, (double)(sq / (T)n));
        const double* e = nm.st + (j * nm.S + b) * SW;
        affine_out(y + b * n, ab, (T)e[2], (T)e[3], g, s, n, add);
      }
      return;
    case kCol: {
      T* sum = nm.u1.data();
      T* sq = nm.u2.data();
      T* mt = nm.u3.data();
      T* rt = nm.u4.data();
      std::fill(sum, sum + n, T(0));
      std::fill(sq, sq + n, T(0));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) sum[i] += a[b * n + i];
      for (int64_t i = 0; i < n; ++i) sum[i] /= (T)B;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          const T d = a[b * n + i] - sum[i];
          sq[i] += d * d;
        }
      for (int64_t i = 0; i < n; ++i) {
        window_push(nm, j, i, (double)sum[i], (double)(sq[i] / (T)B));
        const double* e = nm.st + (j * n + i) * SW;
        mt[i] = (T)e[2];
        rt[i] = (T)e[3];
      }
      if (nm.k > 1) mark_flat(nm, j, a);
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          T v = (a[b * n + i] - mt[i]) * rt[i];
          if (g) v = v * g[i];
          if (s) v = v + s[i];
          y[b * n + i] = add ? y[b * n + i] + v : v;
        }
      return;
    }
    case kGiven: {
      const T* mt = nm.gmean + t * n;
      const T* rt = nm.grstd + t * n;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          T v = (a[b * n + i] - mt[i]) * rt[i];
          if (g) v = v * g[i];
          if (s) v = v + s[i];
          y[b * n + i] = add ? y[b * n + i] + v : v;
        }
      return;
    }
    case kBln: {
      // y = (alpha (a - mb) / sb + beta (a - mf) / sf) / sqrt(n) * g + s
      const double alpha = 1.0 - (1.0 / (double)B + nm.eps), beta = 1.0 / (double)B - nm.eps;
      const double root = std::sqrt((double)n);
      T* mb = nm.u1.data();
      T* sb = nm.u2.data();
      T* mf = nm.u3.data();
      T* sf = nm.u4.data();
      if (nm.bm) {
        std::copy(nm.bm + t * n, nm.bm + (t + 1) * n, mb);
      } else {
        std::fill(mb, mb + n, T(0));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < n; ++i) mb[i] += a[b * n + i];
        for (int64_t i = 0; i < n; ++i) mb[i] /= (T)B;
      }
      if (nm.bs) {
        std::copy(nm.bs + t * n, nm.bs + (t + 1) * n, sb);
      } else {
        std::fill(sb, sb + n, T(0));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < n; ++i) sb[i] += (a[b * n + i] - mb[i]) * (a[b * n + i] - mb[i]);
        for (int64_t i = 0; i < n; ++i) sb[i] = std::sqrt(sb[i] / (T)B + (T)nm.eps);
      }
      for (int64_t b = 0; b < B; ++b) {
        const T* ab = a + b * n;
        T mu;
        if (nm.fm) {
          mu = nm.fm[t];
        } else {
          T sum = 0;
#pragma omp simd reduction(+ : sum)
          for (int64_t i = 0; i < n; ++i) sum += ab[i];
          mu = sum / (T)n;
        }
        mf[b] = mu;
        if (nm.fs) {
          sf[b] = nm.fs[t];
        } else {
          T sq = 0;
#pragma omp simd reduction(+ : sq)
          for (int64_t i = 0; i < n; ++i) sq += (ab[i] - mu) * (ab[i] - mu);
          sf[b] = std::sqrt(sq / (T)n + (T)nm.eps);
        }
      }
      double* rec = nm.bl + t * (2 * n + 2 * B);
      for (int64_t i = 0; i < n; ++i) {
        rec[i] = (double)mb[i];
        rec[n + i] = (double)sb[i];
      }
      for (int64_t b = 0; b < B; ++b) {
        rec[2 * n + b] = (double)mf[b];
        rec[2 * n + B + b] = (double)sf[b];
      }
      // The coefficients folded into reciprocals: one multiply per element instead of two divides.
      const T ca = (T)(alpha / root), cf = (T)(beta / root);
      for (int64_t i = 0; i < n; ++i) sb[i] = ca / sb[i];
      for (int64_t b = 0; b < B; ++b) sf[b] = cf / sf[b];
      for (int64_t b = 0; b < B; ++b) {
        const T mfb = mf[b], sfb = sf[b];
        T* yb = y + b * n;
        const T* ab = a + b * n;
        for (int64_t i = 0; i < n; ++i) {
          T v = (ab[i] - mb[i]) * sb[i] + (ab[i] - mfb) * sfb;
          if (g) v = v * g[i];
          if (s) v = v + s[i];
          yb[i] = add ? yb[i] + v : v;
        }
      }
      return;
    }
  }
}

// Rows alike (functional.share_alike, which says why): each feature whose value is the same in
// every row of a (B, n) gets, in every row, the mean of its rows' gradients da. sum and same:
// scratch of n.
template <typename T>
void share_alike(const T* a, T* da, int64_t B, int64_t n, T* sum, T* same) {
  std::fill(same, same + n, T(1));
  for (int64_t b = 1; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      if (a[b * n + i] != a[i]) same[i] = T(0);
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any = any || (same[i] != T(0) && a[i] == a[i]);
  if (!any || B < 2) return;
  std::fill(sum, sum + n, T(0));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) sum[i] += da[b * n + i];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      if (same[i] != T(0)) da[b * n + i] = sum[i] / (T)B;
}

// share_alike over a padded batch's valid rows (the others' da is 0).
template <typename T>
void share_alike_masked(const Norm<T>& nm, const T* a, T* da, T* sum, T* same) {
  const int64_t B = nm.B, n = nm.n;
  const uint8_t* v = nm.valid.data();
  if (nm.nv < 2) return;
  int64_t b0 = 0;
  while (!v[b0]) ++b0;
  std::fill(same, same + n, T(1));
  for (int64_t b = b0 + 1; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i)
        if (a[b * n + i] != a[b0 * n + i]) same[i] = T(0);
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any = any || (same[i] != T(0) && a[b0 * n + i] == a[b0 * n + i]);
  if (!any) return;
  std::fill(sum, sum + n, T(0));
  for (int64_t b = 0; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i) sum[i] += da[b * n + i];
  for (int64_t b = 0; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i)
        if (same[i] != T(0)) da[b * n + i] = sum[i] / (T)nm.nv;
}

template <typename T>
void col_backward_masked(Norm<T>& nm, int64_t t, const T* a, const T* dy, T* da) {
  const int64_t B = nm.B, n = nm.n, j = nm.m + t;
  const uint8_t* v = nm.valid.data();
  const T* g = nm.g;
  T* dg = nm.dg.empty() ? nullptr : nm.dg.data();
  T* sdy = nm.u1.data();
  T* sdx = nm.u2.data();
  T* c1 = nm.u3.data();
  T* c2 = nm.u4.data();
  std::fill(sdy, sdy + n, T(0));
  std::fill(sdx, sdx + n, T(0));
  const double* e0 = nm.st + j * n * SW;
  for (int64_t b = 0; b < B; ++b)
    if (v[b])
      for (int64_t i = 0; i < n; ++i) {
        const T xh = (a[b * n + i] - (T)e0[i * SW + 2]) * (T)e0[i * SW + 3];
        sdy[i] += dy[b * n + i];
        sdx[i] += dy[b * n + i] * xh;
      }
  for (int64_t i = 0; i < n; ++i) {
    if (dg) dg[i] += sdx[i];
    const T gi = g ? g[i] : T(1);
    const bool flat = e0[i * SW + 4] == kFlat;
    double k1, k2;
    window_adjoint_counts(nm, t, i, flat ? 0.0 : (double)(gi * sdy[i]), flat ? 0.0 : (double)(gi * sdx[i]), k1, k2);
    c1[i] = (T)k1;
    c2[i] = (T)k2;
    sdy[i] = flat ? T(0) : gi * (T)e0[i * SW + 3];
    sdx[i] = (T)e0[i * SW];
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i)
      da[b * n + i] = v[b] ? dy[b * n + i] * sdy[i] + c1[i] + c2[i] * (a[b * n + i] - sdx[i]) : T(0);
  share_alike_masked(nm, a, da, sdy, sdx);
}

template <typename T>
void bln_backward_masked(Norm<T>& nm, int64_t t, const T* a, const T* dy, T* da) {
  const int64_t B = nm.B, n = nm.n;
  const uint8_t* v = nm.valid.data();
  const T* g = nm.g;
  T* dg = nm.dg.empty() ? nullptr : nm.dg.data();
  const double m = (double)nm.nv;
  const double alpha = 1.0 - (1.0 / m + nm.eps), beta = 1.0 / m - nm.eps;
  const double root = std::sqrt((double)n);
  const double* rec = nm.bl + t * (2 * n + 2 * B);
  const T ca = (T)(alpha / root), cf = (T)(beta / root);
  T* mb = nm.u1.data();
  T* isb = mb + n;
  T* P = isb + n;
  T* Q = P + n;
  T* R = Q + n;
  T* mf = nm.u2.data();
  T* isf = mf + B;
  for (int64_t i = 0; i < n; ++i) {
    mb[i] = (T)rec[i];
    isb[i] = T(1) / (T)rec[n + i];
  }
  for (int64_t b = 0; b < B; ++b) {
    mf[b] = (T)rec[2 * n + b];
    isf[b] = T(1) / (T)rec[2 * n + B + b];
  }
  std::fill(P, P + 3 * n, T(0));
  for (int64_t b = 0; b < B; ++b) {
    if (!v[b]) continue;
    const T* ab = a + b * n;
    const T* dyb = dy + b * n;
    for (int64_t i = 0; i < n; ++i) {
      if (dg) dg[i] += dyb[i] * (ca * (ab[i] - mb[i]) * isb[i] + cf * (ab[i] - mf[b]) * isf[b]);
      const T w = (g ? dyb[i] * g[i] : dyb[i]) * ca, d = ab[i] - mb[i];
      P[i] += w * d;
      Q[i] += w;
      R[i] += d;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const T coef = nm.bs == nullptr ? -P[i] * isb[i] * isb[i] * isb[i] / (T)m : T(0);
    const T mean_dd = nm.bm == nullptr ? (Q[i] * isb[i] + coef * R[i]) / (T)m : T(0);
    P[i] = coef;
    Q[i] = mean_dd;
  }
  for (int64_t b = 0; b < B; ++b) {
    T* dab = da + b * n;
    if (!v[b]) {
      std::fill(dab, dab + n, T(0));
      continue;
    }
    const T* ab = a + b * n;
    const T* dyb = dy + b * n;
    const T mu = mf[b], is = isf[b];
    T p = 0, q = 0, r = 0;
    for (int64_t i = 0; i < n; ++i) {
      const T w = (g ? dyb[i] * g[i] : dyb[i]) * cf, d = ab[i] - mu;
      p += w * d;
      q += w;
      r += d;
    }
    const T coef = nm.fs == nullptr ? -p * is * is * is / (T)n : T(0);
    const T mean_dd = nm.fm == nullptr ? (q * is + coef * r) / (T)n : T(0);
    for (int64_t i = 0; i < n; ++i) {
      const T gh = g ? dyb[i] * g[i] : dyb[i];
      dab[i] = gh * ca * isb[i] + P[i] * (ab[i] - mb[i]) - Q[i] + gh * cf * is + coef * (ab[i] - mu) - mean_dd;
    }
  }
  if (nm.bm == nullptr || nm.bs == nullptr) share_alike_masked(nm, a, da, nm.u3.data(), nm.u4.data());
}

// ------------------------------------------------------------------------------------------
// Backward of one term at step t: da = dL/da given dy = dL/dy (y = N(a) of that step);
// accumulates the gain and shift gradients. da may alias dy only for kNone.

template <typename T>
void norm_backward(Norm<T>& nm, int64_t t, const T* a, const T* dy, T* da) {
  if (nm.len) set_step(nm, t);
  const int64_t B = nm.len ? nm.nv : nm.B, n = nm.n, j = nm.m + t;  // as norm_forward
  const T* g = nm.g;
  T* dg = nm.dg.empty() ? nullptr : nm.dg.data();
  T* ds = nm.ds.empty() ? nullptr : nm.ds.data();
  if (ds)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t i = 0; i < n; ++i) ds[i] += dy[b * n + i];
  if (nm.len && (nm.kind == kCol || nm.kind == kBln)) {
    if (nm.kind == kCol) col_backward_masked(nm, t, a, dy, da);
    else bln_backward_masked(nm, t, a, dy, da);
    return;
  }
  switch (nm.kind) {
    case kNone:
      if (da != dy) std::copy(dy, dy + B * n, da);
      return;
    case kRow:
      for (int64_t b = 0; b < B; ++b) {
        const T* ab = a + b * n;
        const T* dyb = dy + b * n;
        const double* e = nm.st + (j * nm.S + b) * SW;
        const T mt = (T)e[2], rt = (T)e[3];
        T sg = 0, sgx = 0;
        for (int64_t i = 0; i < n; ++i) {
          const T xh = (ab[i] - mt) * rt;
          const T gh = g ? dyb[i] * g[i] : dyb[i];
          sg += gh;
          sgx += gh * xh;
          if (dg) dg[i] += dyb[i] * xh;
        }
        double dm, dv;
        window_adjoint(nm, t, b, (double)sg, (double)sgx, dm, dv);
        const T c1 = (T)(dm / n), c2 = (T)(2.0 * dv / n), mu = (T)e[0];
        T* dab = da + b * n;
        for (int64_t i = 0; i < n; ++i) dab[i] = (g ? dyb[i] * g[i] : dyb[i]) * rt + c1 + c2 * (ab[i] - mu);
      }
      return;
    case kCol: {
      T* sdy = nm.u1.data();
      T* sdx = nm.u2.data();
      T* c1 = nm.u3.data();
      T* c2 = nm.u4.data();
      std::fill(sdy, sdy + n, T(0));
      std::fill(sdx, sdx + n, T(0));
      const double* e0 = nm.st + j * n * SW;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          const T xh = (a[b * n + i] - (T)e0[i * SW + 2]) * (T)e0[i * SW + 3];
          sdy[i] += dy[b * n + i];
          sdx[i] += dy[b * n + i] * xh;
        }
      for (int64_t i = 0; i < n; ++i) {
        if (dg) dg[i] += sdx[i];
        const T gi = g ? g[i] : T(1);
        const bool flat = e0[i * SW + 4] == kFlat;  // this step's normalization passes nothing back
        double dm, dv;
        window_adjoint(nm, t, i, flat ? 0.0 : (double)(gi * sdy[i]), flat ? 0.0 : (double)(gi * sdx[i]), dm, dv);
        c1[i] = (T)(dm / B);
        c2[i] = (T)(2.0 * dv / B);
        sdy[i] = flat ? T(0) : gi * (T)e0[i * SW + 3];  // reused: gain * r
        sdx[i] = (T)e0[i * SW];           // reused: m_j
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i)
          da[b * n + i] = dy[b * n + i] * sdy[i] + c1[i] + c2[i] * (a[b * n + i] - sdx[i]);
      share_alike(a, da, B, n, sdy, sdx);
      return;
    }
    case kGiven: {
      const T* mt = nm.gmean + t * n;
      const T* rt = nm.grstd + t * n;
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          if (dg) dg[i] += dy[b * n + i] * ((a[b * n + i] - mt[i]) * rt[i]);
          da[b * n + i] = dy[b * n + i] * (g ? g[i] : T(1)) * rt[i];
        }
      return;
    }
    case kBln: {
      // Each part is c (a - mu) / sigma (c = alpha / sqrt(n) or beta / sqrt(n)); with w = c g^ and
      // d = a - mu over the N values it reduces: dd = w / sigma + dsigma d / (N sigma),
      // dsigma = -sum(w d) / sigma^2 (0 if sigma is given), da = dd - mean(dd) (dd if mu is given).
      const double alpha = 1.0 - (1.0 / (double)B + nm.eps), beta = 1.0 / (double)B - nm.eps;
      const double root = std::sqrt((double)n);
      const double* rec = nm.bl + t * (2 * n + 2 * B);
      const T ca = (T)(alpha / root), cf = (T)(beta / root);
      T* mb = nm.u1.data();  // per feature: batch mean, 1 / batch std, then sums P, Q, R
      T* isb = mb + n;
      T* P = isb + n;
      T* Q = P + n;
      T* R = Q + n;
      T* mf = nm.u2.data();  // per row: feature mean, 1 / feature std
      T* isf = mf + B;
      for (int64_t i = 0; i < n; ++i) {
        mb[i] = (T)rec[i];
        isb[i] = T(1) / (T)rec[n + i];
      }
      for (int64_t b = 0; b < B; ++b) {
        mf[b] = (T)rec[2 * n + b];
        isf[b] = T(1) / (T)rec[2 * n + B + b];
      }
      // batch part: reduced over the rows, per feature (the gain's gradient in the same pass)
      std::fill(P, P + 3 * n, T(0));
      for (int64_t b = 0; b < B; ++b) {
        const T* ab = a + b * n;
        const T* dyb = dy + b * n;
        const T mfb = mf[b], isfb = isf[b];
        if (dg) {
#pragma omp simd
          for (int64_t i = 0; i < n; ++i)
            dg[i] += dyb[i] * (ca * (ab[i] - mb[i]) * isb[i] + cf * (ab[i] - mfb) * isfb);
        }
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) {
          const T w = (g ? dyb[i] * g[i] : dyb[i]) * ca, d = ab[i] - mb[i];
          P[i] += w * d;
          Q[i] += w;
          R[i] += d;
        }
      }
      for (int64_t i = 0; i < n; ++i) {
        const T coef = nm.bs == nullptr ? -P[i] * isb[i] * isb[i] * isb[i] / (T)B : T(0);
        const T mean_dd = nm.bm == nullptr ? (Q[i] * isb[i] + coef * R[i]) / (T)B : T(0);
        P[i] = coef;
        Q[i] = mean_dd;
      }
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < n; ++i) {
          const T w = (g ? dy[b * n + i] * g[i] : dy[b * n + i]) * ca;
          da[b * n + i] = w * isb[i] + P[i] * (a[b * n + i] - mb[i]) - Q[i];
        }
      // feature part: reduced over the features, per row
      for (int64_t b = 0; b < B; ++b) {
        const T* ab = a + b * n;
        const T* dyb = dy + b * n;
        T* dab = da + b * n;
        const T mu = mf[b], is = isf[b];
        T p = 0, q = 0, r = 0;
#pragma omp simd reduction(+ : p, q, r)
        for (int64_t i = 0; i < n; ++i) {
          const T w = (g ? dyb[i] * g[i] : dyb[i]) * cf, d = ab[i] - mu;
          p += w * d;
          q += w;
          r += d;
        }
        const T coef = nm.fs == nullptr ? -p * is * is * is / (T)n : T(0);
        const T mean_dd = nm.fm == nullptr ? (q * is + coef * r) / (T)n : T(0);
        for (int64_t i = 0; i < n; ++i)
          dab[i] += (g ? dyb[i] * g[i] : dyb[i]) * cf * is + coef * (ab[i] - mu) - mean_dd;
      }
      if (nm.bm == nullptr || nm.bs == nullptr) share_alike(a, da, B, n, nm.u1.data(), nm.u1.data() + n);
      return;
    }
  }
}

// ------------------------------------------------------------------------------------------

template <typename T>
void setup(Norm<T>& nm, int64_t kind, int64_t k, double eps, const c10::List<c10::optional<Tensor>>& opt, int64_t B,
           int64_t n, int64_t Tn, const Tensor& st, const Tensor& ref, const Tensor& bl) {
  nm.kind = kind;
  nm.k = k;
  nm.eps = eps;
  nm.B = B;
  nm.n = n;
  nm.Tn = Tn;
  nm.S = slots(kind, B, n);
  nm.g = opt_at<T>(opt, kGain);
  nm.s = opt_at<T>(opt, kShift);
  nm.gmean = opt_at<T>(opt, kGMean);
  nm.grstd = opt_at<T>(opt, kGRstd);
  nm.bm = opt_at<T>(opt, kBMean);
  nm.bs = opt_at<T>(opt, kBStd);
  nm.fm = opt_at<T>(opt, kFMean);
  nm.fs = opt_at<T>(opt, kFStd);
  nm.st = st.data_ptr<double>();
  nm.m = st.size(0) - Tn;
  nm.ref = ref.data_ptr<double>();
  nm.bl = bl.numel() ? bl.data_ptr<double>() : nullptr;
  nm.L = std::min(k - 1, nm.m + Tn);
  const int64_t scratch = kind == kBln ? 5 * n + 2 * B : std::max(B, n);
  nm.u1.assign(scratch, T(0));
  nm.u2.assign(scratch, T(0));
  nm.u3.assign(scratch, T(0));
  nm.u4.assign(scratch, T(0));
}

// A padded batch (len: (B) valid steps per row, every step of this call with a valid row).
template <typename T>
void setup_lengths(Norm<T>& nm, const int64_t* len) {
  if (len == nullptr) return;
  nm.len = len;
  nm.valid.assign(nm.B, 0);
  if (nm.kind != kCol) return;
  const int64_t total = nm.m + nm.Tn;
  nm.cnt.assign(total, (double)nm.B);  // the window state's steps: full batches
  for (int64_t t = 0; t < nm.Tn; ++t) {
    int64_t c = 0;
    for (int64_t b = 0; b < nm.B; ++b) c += len[b] > t ? 1 : 0;
    nm.cnt[nm.m + t] = (double)c;
  }
  nm.wtot.assign(total, 0.0);
  for (int64_t j = 0; j < total; ++j)
    for (int64_t p = std::max<int64_t>(0, j - nm.k + 1); p <= j; ++p) nm.wtot[j] += nm.cnt[p];
}

// History (m, S, 2) -> st rows 0..m-1, ref, running totals.
template <typename T>
void init_history(Norm<T>& nm, const Tensor& hist) {
  const int64_t S = nm.S;
  nm.s1.assign(S, 0.0);
  nm.s2.assign(S, 0.0);
  if (S == 0) return;
  const double* h = hist.data_ptr<double>();
  for (int64_t j = 0; j < nm.m; ++j)
    for (int64_t q = 0; q < S; ++q) {
      double* e = nm.st + (j * S + q) * SW;
      std::fill(e, e + SW, 0.0);
      e[0] = h[(j * S + q) * 2];
      e[1] = h[(j * S + q) * 2 + 1];
    }
  for (int64_t q = 0; q < S; ++q) nm.ref[q] = nm.m ? h[q * 2] : 0.0;
  if (nm.k > 1)
    for (int64_t j = 0; j < nm.m; ++j)
      for (int64_t q = 0; q < S; ++q) {
        const double d = nm.st[(j * S + q) * SW] - nm.ref[q];
        if (nm.cnt.empty()) {
          nm.s1[q] += d;
          nm.s2[q] += nm.st[(j * S + q) * SW + 1] + d * d;
        } else {  // a padded batch: each step weighs its count (B here)
          nm.s1[q] += nm.cnt[j] * d;
          nm.s2[q] += nm.cnt[j] * (nm.st[(j * S + q) * SW + 1] + d * d);
        }
      }
}

// The new window state: the last min(k-1, m+T) steps' (m_j, v_j); with a padded batch (all) every
// step's, from which the Python side takes each sequence's own (fastpath_rnn.padded_window).
Tensor history_out(const Tensor& st, int64_t kind, int64_t k, int64_t Tn, const Tensor& hist, bool all = false) {
  if (kind != kRow && kind != kCol) return hist;  // no window: the state passes through unchanged
  const int64_t total = st.size(0), L = all ? (k > 1 ? total : 0) : std::min(k - 1, total);
  return st.narrow(0, total - L, L).narrow(2, 0, 2).contiguous();
}

Tensor hist_of(const c10::List<c10::optional<Tensor>>& opt) {
  const c10::optional<Tensor> h = opt.get(kHist);
  return h.value().contiguous();
}

// lengths (B) int64 on the CPU, each in 1..; every one of the Tn steps has a valid row (the
// Python side runs the active steps only). Undefined for a dense batch.
Tensor lengths_of(const c10::optional<Tensor>& lengths, int64_t B, int64_t Tn) {
  if (!lengths.has_value() || !lengths->defined()) return Tensor();
  const Tensor l = lengths->contiguous();
  TORCH_CHECK(l.scalar_type() == at::kLong && l.dim() == 1 && l.size(0) == B, "lengths: (B,) int64 expected");
  TORCH_CHECK(l.device().is_cpu(), "lengths: a CPU tensor expected");
  const int64_t* p = l.data_ptr<int64_t>();
  int64_t lo = Tn, hi = 0;
  for (int64_t b = 0; b < B; ++b) {
    lo = std::min(lo, p[b]);
    hi = std::max(hi, p[b]);
  }
  TORCH_CHECK(B > 0 && hi >= Tn && lo >= 1, "lengths: every step needs a valid row (1 <= lengths, max(lengths) >= T)");
  for (int64_t b = 1; b < B; ++b)
    TORCH_CHECK(p[b] <= p[b - 1], "lengths: sorted longest first (each step's valid rows come first)");
  return l;
}

// The rows of step t that compute: all B, or those still running (lengths sorted: the first ones).
inline int64_t running(const int64_t* len, int64_t B, int64_t t) {
  if (len == nullptr) return B;
  int64_t r = 0;
  while (r < B && len[r] > t) ++r;
  return r;
}

// len (padded batches, else nullptr): after row b's last step its h and c are held; out is then
// the held h of every step (the Python side zeroes the padded outputs).
template <typename T>
void forward_impl(int64_t cell, const Tensor& xn, const Tensor& h0, const Tensor& c0, const Tensor& w_t,
                  const T* bhh, Norm<T>& nh, Norm<T>& nc, const Tensor& hist_h, const Tensor& hist_c, bool save,
                  Tensor& out, Tensor& AH, Tensor& ACT, Tensor& CH, Tensor& TY, Tensor& Z, Tensor& YC,
                  const int64_t* len) {
  const int64_t Tn = xn.size(0), B = xn.size(1), H = h0.size(1), G = xn.size(2);
  const auto opts = xn.options();
  init_history(nh, hist_h);
  init_history(nc, hist_c);
  const T* xp = xn.data_ptr<T>();
  const T* h0p = h0.data_ptr<T>();
  const T* wtp = w_t.data_ptr<T>();
  T* outp = out.data_ptr<T>();
  T* ahp = AH.data_ptr<T>();
  T* actp = ACT.data_ptr<T>();
  T* chp = CH.data_ptr<T>();
  T* zp = Z.data_ptr<T>();
  for (int64_t t = 0; t < Tn; ++t) {
    const int64_t ts = save ? t : 0;
    const int64_t R = running(len, B, t);  // the rows that compute this step (the first R)
    const T* hprev = t == 0 ? h0p : outp + (t - 1) * B * H;
    T* ah = ahp + ts * B * G;
    T* act = actp + ts * B * G;
    gemm<T>(hprev, H, 1, wtp, ah, R, G, H, bhh, false, opts);  // W_h h_{t-1} + b_h
    const T* x = xp + t * B * G;
    if (cell == kLSTM) {
      std::copy(x, x + R * G, zp);
      norm_forward(nh, t, ah, zp, true);
      for (int64_t b = 0; b < R; ++b) {
        sigmoid_rows<T>(zp + b * G, act + b * G, 2 * H);
        tanh_rows<T>(zp + b * G + 2 * H, act + b * G + 2 * H, H);
        sigmoid_rows<T>(zp + b * G + 3 * H, act + b * G + 3 * H, H);
      }
      const int64_t tcur = save ? t : (t % 2), tprev = save ? t - 1 : ((t + 1) % 2);
      T* c = chp + tcur * B * H;
      const T* cprev = t == 0 ? c0.data_ptr<T>() : chp + tprev * B * H;
      for (int64_t b = 0; b < R; ++b) {
        const T* a = act + b * G;
        for (int64_t i = 0; i < H; ++i)
          c[b * H + i] = a[H + i] * cprev[b * H + i] + a[i] * a[2 * H + i];
      }
      std::copy(cprev + R * H, cprev + B * H, c + R * H);  // held rows
      T* yc = YC.data_ptr<T>();
      norm_forward(nc, t, c, yc, false);
      T* ty = TY.data_ptr<T>() + ts * B * H;
      T* o = outp + t * B * H;
      for (int64_t b = 0; b < R; ++b) {
        tanh_rows<T>(yc + b * H, ty + b * H, H);
        for (int64_t i = 0; i < H; ++i) o[b * H + i] = act[b * G + 3 * H + i] * ty[b * H + i];
      }
      std::copy(hprev + R * H, hprev + B * H, o + R * H);  // held rows
    } else {
      T* hn = chp + ts * B * G;  // N_h(W_h h + b_h)
      norm_forward(nh, t, ah, hn, false);
      for (int64_t b = 0; b < B; ++b) {
        if (b >= R) {  // held
          std::copy(hprev + b * H, hprev + (b + 1) * H, outp + t * B * H + b * H);
          continue;
        }
        const T* xb = x + b * G;
        const T* hb = hn + b * G;
        T* a = act + b * G;
        for (int64_t i = 0; i < 2 * H; ++i) zp[b * G + i] = xb[i] + hb[i];
        sigmoid_rows<T>(zp + b * G, a, 2 * H);
        for (int64_t i = 0; i < H; ++i) zp[b * G + 2 * H + i] = xb[2 * H + i] + a[i] * hb[2 * H + i];
        tanh_rows<T>(zp + b * G + 2 * H, a + 2 * H, H);
        T* o = outp + t * B * H + b * H;
        const T* hp = hprev + b * H;
        for (int64_t i = 0; i < H; ++i) o[i] = a[2 * H + i] + a[H + i] * (hp[i] - a[2 * H + i]);
      }
    }
  }
}

// Returns out, c_n (LSTM; empty for GRU), new hist_h, hist_c, st_h, st_c, bl_h, bl_c, ref_h, ref_c
// and, with save, AH, ACT, C (LSTM) or N_h(AH) (GRU), TY.
std::vector<Tensor> norm_rnn_forward(const Tensor& xn, const Tensor& h0, const c10::optional<Tensor>& c0_,
                                     const Tensor& w_hh, const c10::optional<Tensor>& b_hh, int64_t cell,
                                     int64_t kind_h, int64_t k_h, double eps_h,
                                     const c10::List<c10::optional<Tensor>>& opt_h, int64_t kind_c, int64_t k_c,
                                     double eps_c, const c10::List<c10::optional<Tensor>>& opt_c, bool save,
                                     const c10::optional<Tensor>& lengths) {
  TORCH_CHECK(xn.dim() == 3 && xn.is_contiguous() && h0.is_contiguous(), "norm_rnn_forward: contiguous input");
  const int64_t Tn = xn.size(0), B = xn.size(1), G = xn.size(2), H = h0.size(1);
  const Tensor lens = lengths_of(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  TORCH_CHECK(Tn >= 1 && G == (cell == kLSTM ? 4 : 3) * H && w_hh.size(0) == G && w_hh.size(1) == H,
              "norm_rnn_forward: shape mismatch");
  const auto opts = xn.options();
  const auto dopts = opts.dtype(at::kDouble);
  const Tensor hist_h = hist_of(opt_h), hist_c = hist_of(opt_c);
  const int64_t Sh = slots(kind_h, B, G), Sc = cell == kLSTM ? slots(kind_c, B, H) : 0;
  const int64_t mh = Sh ? hist_h.size(0) : 0, mc = Sc ? hist_c.size(0) : 0;
  Tensor sth = at::empty({mh + Tn, Sh, SW}, dopts), stc = at::empty({mc + Tn, Sc, SW}, dopts);
  Tensor refh = at::zeros({Sh}, dopts), refc = at::zeros({Sc}, dopts);
  Tensor blh = at::empty({kind_h == kBln ? Tn : 0, 2 * G + 2 * B}, dopts);
  Tensor blc = at::empty({cell == kLSTM && kind_c == kBln ? Tn : 0, 2 * H + 2 * B}, dopts);
  Tensor c0 = cell == kLSTM ? c0_.value().contiguous() : Tensor();
  const int64_t keep = save ? Tn : 1;
  Tensor out = at::empty({Tn, B, H}, opts);
  Tensor AH = at::empty({keep, B, G}, opts), ACT = at::empty({keep, B, G}, opts);
  Tensor CH = cell == kLSTM ? at::empty({save ? Tn : 2, B, H}, opts) : at::empty({keep, B, G}, opts);
  Tensor TY = at::empty({cell == kLSTM ? keep : 0, B, H}, opts);
  Tensor Z = at::empty({B, G}, opts), YC = at::empty({B, H}, opts);
  Tensor w_t = w_hh.t().contiguous();
  AT_DISPATCH_FLOATING_TYPES(xn.scalar_type(), "norm_rnn_forward", [&] {
    Norm<scalar_t> nh, nc;
    setup(nh, kind_h, k_h, eps_h, opt_h, B, G, Tn, sth, refh, blh);
    setup_lengths(nh, len);
    if (cell == kLSTM) {
      setup(nc, kind_c, k_c, eps_c, opt_c, B, H, Tn, stc, refc, blc);
      setup_lengths(nc, len);
    }
    const scalar_t* bhh = b_hh.has_value() && b_hh->defined() ? b_hh->data_ptr<scalar_t>() : nullptr;
    forward_impl<scalar_t>(cell, xn, h0, c0, w_t, bhh, nh, nc, hist_h, hist_c, save, out, AH, ACT, CH, TY, Z, YC,
                           len);
  });
  Tensor cn = cell == kLSTM ? CH.select(0, save ? Tn - 1 : (Tn - 1) % 2).clone() : at::empty({0}, opts);
  std::vector<Tensor> res = {out, cn, history_out(sth, kind_h, k_h, Tn, hist_h, len != nullptr),
                             history_out(stc, kind_c, k_c, Tn, hist_c, len != nullptr), sth, stc, blh, blc, refh,
                             refc};
  if (save) {
    res.push_back(AH);
    res.push_back(ACT);
    res.push_back(CH);
    res.push_back(TY);
  }
  return res;
}

// ------------------------------------------------------------------------------------------

template <typename T>
void backward_impl(int64_t cell, const T* doutp, const Tensor& h0, const Tensor& c0, const Tensor& w, Norm<T>& nh,
                   Norm<T>& nc, const Tensor& out, const Tensor& AH, const Tensor& ACT, const Tensor& CH,
                   const Tensor& TY, Tensor& DXN, Tensor& DAH, Tensor& DH, Tensor& DC, const int64_t* len) {
  const int64_t Tn = AH.size(0), B = AH.size(1), G = AH.size(2), H = h0.size(1);
  const auto opts = AH.options();
  const T* outp = out.data_ptr<T>();
  const T* h0p = h0.data_ptr<T>();
  const T* ahp = AH.data_ptr<T>();
  const T* actp = ACT.data_ptr<T>();
  const T* chp = CH.data_ptr<T>();
  const T* wp = w.data_ptr<T>();
  T* dxnp = DXN.data_ptr<T>();
  T* dahp = DAH.data_ptr<T>();
  T* dh = DH.data_ptr<T>();
  std::vector<T> dyc(B * H), dcn(B * H), dhn(cell == kGRU ? B * G : 0);
  for (int64_t t = Tn - 1; t >= 0; --t) {
    // Rows R.. are held at this step (a padded batch, past their last step): their dh and dc pass
    // straight to the step before, nothing enters their gates (dA and the input term's gradient: 0).
    const int64_t R = running(len, B, t);
    if (doutp)
      for (int64_t q = 0; q < B * H; ++q) dh[q] += doutp[t * B * H + q];
    const T* act = actp + t * B * G;
    T* dz = dxnp + t * B * G;
    T* dah = dahp + t * B * G;
    if (cell == kLSTM) {
      const T* ty = TY.data_ptr<T>() + t * B * H;
      const T* c = chp + t * B * H;
      const T* cprev = t == 0 ? c0.data_ptr<T>() : chp + (t - 1) * B * H;
      T* dc = DC.data_ptr<T>();
      for (int64_t b = 0; b < R; ++b)
        for (int64_t i = 0; i < H; ++i)
          dyc[b * H + i] = dh[b * H + i] * act[b * G + 3 * H + i] * (T(1) - ty[b * H + i] * ty[b * H + i]);
      std::fill(dyc.begin() + R * H, dyc.end(), T(0));
      norm_backward(nc, t, c, dyc.data(), dcn.data());
      std::fill(dz + R * G, dz + B * G, T(0));
      for (int64_t b = 0; b < R; ++b) {
        const T* a = act + b * G;
        T* d = dz + b * G;
        for (int64_t i = 0; i < H; ++i) {
          const T ig = a[i], fg = a[H + i], gg = a[2 * H + i], og = a[3 * H + i];
          const T dct = dc[b * H + i] + dcn[b * H + i];
          d[i] = dct * gg * ig * (T(1) - ig);
          d[H + i] = dct * cprev[b * H + i] * fg * (T(1) - fg);
          d[2 * H + i] = dct * ig * (T(1) - gg * gg);
          d[3 * H + i] = dh[b * H + i] * ty[b * H + i] * og * (T(1) - og);
          dc[b * H + i] = dct * fg;
        }
      }
      norm_backward(nh, t, ahp + t * B * G, dz, dah);
      if (R < B) std::fill(dah + R * G, dah + B * G, T(0));
      gemm<T>(dah, G, 1, wp, dh, R, H, G, nullptr, false, opts);  // dh_{t-1} = dA_h W_hh (held rows keep dh)
    } else {
      const T* hn = chp + t * B * G;
      const T* hprev = t == 0 ? h0p : outp + (t - 1) * B * H;
      for (int64_t b = 0; b < B; ++b) {
        const T* a = act + b * G;
        const T* hb = hn + b * G;
        T* d = dz + b * G;
        T* e = dhn.data() + b * G;
        T* dhb = dh + b * H;
        const T* hp = hprev + b * H;
        if (b >= R) {
          std::fill(d, d + G, T(0));
          std::fill(e, e + G, T(0));
          continue;
        }
        for (int64_t i = 0; i < H; ++i) {
          const T r = a[i], z = a[H + i], nn = a[2 * H + i];
          const T dn = dhb[i] * (T(1) - z) * (T(1) - nn * nn);
          const T dzz = dhb[i] * (hp[i] - nn) * z * (T(1) - z);
          const T dr = dn * hb[2 * H + i] * r * (T(1) - r);
          d[i] = dr;
          d[H + i] = dzz;
          d[2 * H + i] = dn;
          e[i] = dr;
          e[H + i] = dzz;
          e[2 * H + i] = dn * r;
          dhb[i] = dhb[i] * z;
        }
      }
      norm_backward(nh, t, ahp + t * B * G, dhn.data(), dah);
      if (R < B) std::fill(dah + R * G, dah + B * G, T(0));
      gemm<T>(dah, G, 1, wp, dh, R, H, G, nullptr, true, opts);  // dh_{t-1} += dA_h W_hh
    }
  }
}

std::vector<Tensor> norm_rnn_backward(const c10::optional<Tensor>& dout, const c10::optional<Tensor>& dcn,
                                      const c10::optional<Tensor>& dhist_h, const c10::optional<Tensor>& dhist_c,
                                      const Tensor& h0, const c10::optional<Tensor>& c0_, const Tensor& w_hh,
                                      int64_t cell, int64_t kind_h, int64_t k_h, double eps_h,
                                      const c10::List<c10::optional<Tensor>>& opt_h, int64_t kind_c, int64_t k_c,
                                      double eps_c, const c10::List<c10::optional<Tensor>>& opt_c,
                                      const Tensor& out, const Tensor& sth, const Tensor& stc, const Tensor& blh,
                                      const Tensor& blc, const Tensor& refh, const Tensor& refc, const Tensor& AH,
                                      const Tensor& ACT, const Tensor& CH, const Tensor& TY,
                                      const c10::optional<Tensor>& lengths) {
  const int64_t Tn = AH.size(0), B = AH.size(1), G = AH.size(2), H = h0.size(1);
  const Tensor lens = lengths_of(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  const auto opts = AH.options();
  const auto dopts = opts.dtype(at::kDouble);
  Tensor DXN = at::empty({Tn, B, G}, opts);
  Tensor DAH = kind_h == kNone && cell == kLSTM ? DXN : at::empty({Tn, B, G}, opts);
  Tensor DH = at::zeros({B, H}, opts);
  Tensor c0 = cell == kLSTM ? c0_.value().contiguous() : Tensor();
  Tensor DC = cell != kLSTM ? Tensor()
              : (dcn.has_value() && dcn->defined() ? dcn->contiguous().clone() : at::zeros({B, H}, opts));
  Tensor dgh, dsh, dgc, dsc;
  Tensor dhh = at::zeros({sth.size(0) - Tn, sth.size(1), 2}, dopts);
  Tensor dhc = at::zeros({stc.size(0) - Tn, stc.size(1), 2}, dopts);
  Tensor gh = dhist_h.has_value() && dhist_h->defined() ? dhist_h->contiguous() : Tensor();
  Tensor gc = dhist_c.has_value() && dhist_c->defined() ? dhist_c->contiguous() : Tensor();
  Tensor dO = dout.has_value() && dout->defined() ? dout->contiguous() : Tensor();
  Tensor w = w_hh.contiguous();
  AT_DISPATCH_FLOATING_TYPES(AH.scalar_type(), "norm_rnn_backward", [&] {
    using T = scalar_t;
    Norm<T> nh, nc;
    auto prep = [&](Norm<T>& nm, int64_t kind, int64_t k, double eps, const c10::List<c10::optional<Tensor>>& opt,
                    int64_t n, const Tensor& st, const Tensor& ref, const Tensor& bl, const Tensor& go) {
      setup(nm, kind, k, eps, opt, B, n, Tn, st, ref, bl);
      setup_lengths(nm, len);
      nm.xs.assign(Tn * nm.S * 2, 0.0);
      nm.ra.assign(nm.S, 0.0);
      nm.rb.assign(nm.S, 0.0);
      if (go.defined()) nm.L = go.size(0);  // a padded batch's state gradient covers every step
      nm.gout = go.defined() && nm.L > 0 && nm.S > 0 ? go.data_ptr<double>() : nullptr;
      if (nm.g) nm.dg.assign(n, T(0));
      if (nm.s) nm.ds.assign(n, T(0));
    };
    prep(nh, kind_h, k_h, eps_h, opt_h, G, sth, refh, blh, gh);
    if (cell == kLSTM) prep(nc, kind_c, k_c, eps_c, opt_c, H, stc, refc, blc, gc);
    backward_impl<T>(cell, dO.defined() ? dO.data_ptr<T>() : nullptr, h0, c0, w, nh, nc, out, AH, ACT, CH, TY, DXN,
                     DAH, DH, DC, len);
    history_grad(nh, dhh.numel() ? dhh.data_ptr<double>() : nullptr);
    if (cell == kLSTM) history_grad(nc, dhc.numel() ? dhc.data_ptr<double>() : nullptr);
    auto vec = [&](const std::vector<T>& v) {
      return v.empty() ? Tensor() : at::from_blob(const_cast<T*>(v.data()), {(int64_t)v.size()}, opts).clone();
    };
    dgh = vec(nh.dg);
    dsh = vec(nh.ds);
    dgc = vec(nc.dg);
    dsc = vec(nc.ds);
  });
  // dW_hh = sum_t dA_h(t)^T h_{t-1}, db_hh = sum dA_h: one GEMM over all steps.
  Tensor hprev = Tn > 1 ? at::cat({h0.unsqueeze(0), out.narrow(0, 0, Tn - 1)}, 0) : h0.unsqueeze(0);
  Tensor dahf = DAH.reshape({Tn * B, G});
  Tensor dW = at::mm(hprev.reshape({Tn * B, H}).t(), dahf).t();  // (h^T dA)^T: faster than dA^T h in MKL
  Tensor db = dahf.sum(0);
  auto orz = [&](const Tensor& t) { return t.defined() ? t : at::zeros({0}, opts); };
  return {DXN, DH, orz(DC), dW, db, orz(dgh), orz(dsh), orz(dgc), orz(dsc), dhh, dhc};
}

// ------------------------------------------------------------------------------------------
// One normalized term for every step of a sequence, with no recurrence: the input term
// N_x(W_x x + b_x) of every norm that has a kind above. Same statistics, records and window
// state as the recurrent terms; returns y, the new window state, the records and BLN's stats.

std::vector<Tensor> norm_seq_forward(const Tensor& a_, int64_t kind, int64_t k, double eps,
                                     const c10::List<c10::optional<Tensor>>& opt,
                                     const c10::optional<Tensor>& lengths) {
  TORCH_CHECK(a_.dim() == 3 && a_.size(0) >= 1, "norm_seq_forward: a must be (T, B, n)");
  const Tensor a = a_.contiguous();
  const int64_t Tn = a.size(0), B = a.size(1), n = a.size(2);
  const Tensor lens = lengths_of(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  const auto dopts = a.options().dtype(at::kDouble);
  const Tensor hist = hist_of(opt);
  const int64_t S = slots(kind, B, n), m = S ? hist.size(0) : 0;
  Tensor st = at::empty({m + Tn, S, SW}, dopts), ref = at::zeros({S}, dopts);
  Tensor bl = at::empty({kind == kBln ? Tn : 0, 2 * n + 2 * B}, dopts);
  Tensor y = len ? at::zeros({Tn, B, n}, a.options()) : at::empty({Tn, B, n}, a.options());  // padded: 0 past the ends
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "norm_seq_forward", [&] {
    Norm<scalar_t> nm;
    setup(nm, kind, k, eps, opt, B, n, Tn, st, ref, bl);
    setup_lengths(nm, len);
    init_history(nm, hist);
    const scalar_t* ap = a.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    for (int64_t t = 0; t < Tn; ++t) norm_forward(nm, t, ap + t * B * n, yp + t * B * n, false);
  });
  return {y, history_out(st, kind, k, Tn, hist, len != nullptr), st, bl, ref};
}

// Returns da, the gain and shift gradients (empty where absent) and the window state's gradient.
std::vector<Tensor> norm_seq_backward(const Tensor& dy_, const c10::optional<Tensor>& dhist, const Tensor& a_,
                                      int64_t kind, int64_t k, double eps,
                                      const c10::List<c10::optional<Tensor>>& opt, const Tensor& st,
                                      const Tensor& bl, const Tensor& ref, const c10::optional<Tensor>& lengths) {
  const Tensor a = a_.contiguous(), dy = dy_.contiguous();
  const int64_t Tn = a.size(0), B = a.size(1), n = a.size(2);
  const Tensor lens = lengths_of(lengths, B, Tn);
  const int64_t* len = lens.defined() ? lens.data_ptr<int64_t>() : nullptr;
  const auto opts = a.options();
  Tensor da = len ? at::zeros({Tn, B, n}, opts) : at::empty({Tn, B, n}, opts);  // padded: 0 past the ends
  Tensor dh = at::zeros({st.size(0) - Tn, st.size(1), 2}, opts.dtype(at::kDouble));
  Tensor go = dhist.has_value() && dhist->defined() ? dhist->contiguous() : Tensor();
  Tensor dg, ds;
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "norm_seq_backward", [&] {
    using T = scalar_t;
    Norm<T> nm;
    setup(nm, kind, k, eps, opt, B, n, Tn, st, ref, bl);
    setup_lengths(nm, len);
    nm.xs.assign(Tn * nm.S * 2, 0.0);
    nm.ra.assign(nm.S, 0.0);
    nm.rb.assign(nm.S, 0.0);
    if (go.defined()) nm.L = go.size(0);  // a padded batch's state gradient covers every step
    nm.gout = go.defined() && nm.L > 0 && nm.S > 0 ? go.data_ptr<double>() : nullptr;
    if (nm.g) nm.dg.assign(n, T(0));
    if (nm.s) nm.ds.assign(n, T(0));
    const T* ap = a.data_ptr<T>();
    const T* dyp = dy.data_ptr<T>();
    T* dap = da.data_ptr<T>();
    for (int64_t t = Tn - 1; t >= 0; --t) norm_backward(nm, t, ap + t * B * n, dyp + t * B * n, dap + t * B * n);
    history_grad(nm, dh.numel() ? dh.data_ptr<double>() : nullptr);
    auto vec = [&](const std::vector<T>& v) {
      return v.empty() ? at::zeros({0}, opts) : at::from_blob(const_cast<T*>(v.data()), {(int64_t)v.size()}, opts).clone();
    };
    dg = vec(nm.dg);
    ds = vec(nm.ds);
  });
  return {da, dg, ds, dh};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(atnbench_fast, m) {
  m.def(
      "norm_rnn_forward(Tensor xn, Tensor h0, Tensor? c0, Tensor w_hh, Tensor? b_hh, int cell, int kind_h, int k_h, "
      "float eps_h, Tensor?[] opt_h, int kind_c, int k_c, float eps_c, Tensor?[] opt_c, bool save, "
      "Tensor? lengths=None) -> Tensor[]");
  m.def(
      "norm_rnn_backward(Tensor? dout, Tensor? dcn, Tensor? dhist_h, Tensor? dhist_c, Tensor h0, Tensor? c0, "
      "Tensor w_hh, int cell, int kind_h, int k_h, float eps_h, Tensor?[] opt_h, int kind_c, int k_c, float eps_c, "
      "Tensor?[] opt_c, Tensor out, Tensor sth, Tensor stc, Tensor blh, Tensor blc, Tensor refh, Tensor refc, "
      "Tensor AH, Tensor ACT, Tensor CH, Tensor TY, Tensor? lengths=None) -> Tensor[]");
  m.def("norm_seq_forward(Tensor a, int kind, int k, float eps, Tensor?[] opt, Tensor? lengths=None) -> Tensor[]");
  m.def(
      "norm_seq_backward(Tensor dy, Tensor? dhist, Tensor a, int kind, int k, float eps, Tensor?[] opt, Tensor st, "
      "Tensor bl, Tensor ref, Tensor? lengths=None) -> Tensor[]");
}

TORCH_LIBRARY_IMPL(atnbench_fast, CPU, m) {
  m.impl("norm_rnn_forward", &norm_rnn_forward);
  m.impl("norm_rnn_backward", &norm_rnn_backward);
  m.impl("norm_seq_forward", &norm_seq_forward);
  m.impl("norm_seq_backward", &norm_seq_backward);
}
