// Shared by the fast-path kernels (norm_lstm.cpp, norm_rnn.cpp): vectorised activations
// (glibc's libmvec when ATN_MVEC is defined) and small GEMMs (a register-tiled AVX-512 kernel
// while the weights fit in cache, ATen's mm otherwise). Header-only, internal linkage.
#pragma once

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <vector>

#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

#ifdef ATN_MVEC
// glibc declares these SIMD-enabled only under -ffast-math; we want the vector variants
// (libmvec, <= 4 ulp) without fast-math's other effects.
extern "C" {
float expf(float) noexcept __attribute__((simd("notinbranch")));
float tanhf(float) noexcept __attribute__((simd("notinbranch")));
double exp(double) noexcept __attribute__((simd("notinbranch")));
double tanh(double) noexcept __attribute__((simd("notinbranch")));
}
#endif

namespace {


using at::Tensor;
using OptT = c10::optional<Tensor>;

inline float ex_(float x) { return expf(x); }
inline double ex_(double x) { return exp(x); }
inline float th_(float x) { return tanhf(x); }
inline double th_(double x) { return tanh(x); }
template <typename T>
constexpr T kSigMax = sizeof(T) == 4 ? T(80) : T(700);
template <typename T>
inline T clamp_sig(T x) {
  const T y = x < -kSigMax<T> ? -kSigMax<T> : x;
  return y > kSigMax<T> ? kSigMax<T> : y;
}

#if defined(__AVX512F__) && defined(ATN_MVEC)
// libmvec's AVX-512 variants, called directly: explicit 16/8-lane code with masked tails.
extern "C" __m512 _ZGVeN16v_expf(__m512);
extern "C" __m512 _ZGVeN16v_tanhf(__m512);
extern "C" __m512d _ZGVeN8v_exp(__m512d);
extern "C" __m512d _ZGVeN8v_tanh(__m512d);

inline void act_rows(const float* in, float* out, int64_t n, bool tanh_) {
  const __m512 one = _mm512_set1_ps(1.0f), hi = _mm512_set1_ps(80.0f), lo = _mm512_set1_ps(-80.0f);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1u);
    const __m512 x = _mm512_mask_loadu_ps(one, m, in + i);  // tail lanes: 1 (0 is a slow special case)
    __m512 y;
    if (tanh_) {
      y = _ZGVeN16v_tanhf(x);
    } else {
      const __m512 e = _ZGVeN16v_expf(_mm512_sub_ps(_mm512_setzero_ps(), _mm512_max_ps(_mm512_min_ps(x, hi), lo)));
      y = _mm512_div_ps(one, _mm512_add_ps(one, e));
    }
    _mm512_mask_storeu_ps(out + i, m, y);
  }
}
inline void act_rows(const double* in, double* out, int64_t n, bool tanh_) {
  const __m512d one = _mm512_set1_pd(1.0), hi = _mm512_set1_pd(700.0), lo = _mm512_set1_pd(-700.0);
  for (int64_t i = 0; i < n; i += 8) {
    const __mmask8 m = n - i >= 8 ? (__mmask8)0xFF : (__mmask8)((1u << (n - i)) - 1u);
    const __m512d x = _mm512_mask_loadu_pd(one, m, in + i);
    __m512d y;
    if (tanh_) {
      y = _ZGVeN8v_tanh(x);
    } else {
      const __m512d e = _ZGVeN8v_exp(_mm512_sub_pd(_mm512_setzero_pd(), _mm512_max_pd(_mm512_min_pd(x, hi), lo)));
      y = _mm512_div_pd(one, _mm512_add_pd(one, e));
    }
    _mm512_mask_storeu_pd(out + i, m, y);
  }
}
#else
template <typename T>
inline void act_rows(const T* in, T* out, int64_t n, bool tanh_) {
  if (tanh_) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = th_(in[i]);
  } else {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) out[i] = T(1) / (T(1) + ex_(-clamp_sig(in[i])));
  }
}
#endif
// sigmoid (exp(-x) with x clamped to +-80 in float, +-700 in double, where sigmoid is below
// 1e-34 resp. 1e-304: keeps libmvec off its slow overflow path, changes nothing measurable).
template <typename T>
inline void sigmoid_rows(const T* in, T* out, int64_t n) { act_rows(in, out, n, false); }
template <typename T>
inline void tanh_rows(const T* in, T* out, int64_t n) { act_rows(in, out, n, true); }

// ------------------------------------------------------------------------------------------
// C[M, N] (= | +=) A[M, K] @ Bm[K, N] (+ bias[N]): Bm row-major (K, N), A with strides
// (ra per row, ka per k; A^T is ra = 1, ka = lda). A register-tiled AVX-512 or AVX2 kernel for small
// M and a cache-resident Bm; ATen's mm otherwise.

#if defined(__AVX512F__)
#define ATN_SMALL_GEMM 1
template <typename T>
struct V;
template <>
struct V<float> {
  using reg = __m512;
  using mask = __mmask16;
  static constexpr int W = 16;
  static reg zero() { return _mm512_setzero_ps(); }
  static reg load(const float* p) { return _mm512_loadu_ps(p); }
  static reg loadm(mask m, const float* p) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
  static void storem(float* p, mask m, reg v) { _mm512_mask_storeu_ps(p, m, v); }
  static reg bcast(float x) { return _mm512_set1_ps(x); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
  static mask tail(int64_t n) { return n >= 16 ? (mask)0xFFFF : (mask)((1u << n) - 1u); }
};
template <>
struct V<double> {
  using reg = __m512d;
  using mask = __mmask8;
  static constexpr int W = 8;
  static reg zero() { return _mm512_setzero_pd(); }
  static reg load(const double* p) { return _mm512_loadu_pd(p); }
  static reg loadm(mask m, const double* p) { return _mm512_maskz_loadu_pd(m, p); }
  static void store(double* p, reg v) { _mm512_storeu_pd(p, v); }
  static void storem(double* p, mask m, reg v) { _mm512_mask_storeu_pd(p, m, v); }
  static reg bcast(double x) { return _mm512_set1_pd(x); }
  static reg fma(reg a, reg b, reg c) { return _mm512_fmadd_pd(a, b, c); }
  static mask tail(int64_t n) { return n >= 8 ? (mask)0xFF : (mask)((1u << n) - 1u); }
};
constexpr int kNVMax = 4;  // 32 registers: a 4 x 4 tile of accumulators, 4 of B, 1 broadcast
#elif defined(__AVX2__) && defined(__FMA__)
// The same kernel on 256-bit registers (most AMD EPYC / older Xeon VMs have no AVX-512); masks
// are lane vectors (high bit set = lane used), as _mm256_maskload/_maskstore take them.
#define ATN_SMALL_GEMM 1
template <typename T>
struct V;
template <>
struct V<float> {
  using reg = __m256;
  using mask = __m256i;
  static constexpr int W = 8;
  static reg zero() { return _mm256_setzero_ps(); }
  static reg load(const float* p) { return _mm256_loadu_ps(p); }
  static reg loadm(mask m, const float* p) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
  static void storem(float* p, mask m, reg v) { _mm256_maskstore_ps(p, m, v); }
  static reg bcast(float x) { return _mm256_set1_ps(x); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
  static mask tail(int64_t n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)std::min<int64_t>(n, 8)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
};
template <>
struct V<double> {
  using reg = __m256d;
  using mask = __m256i;
  static constexpr int W = 4;
  static reg zero() { return _mm256_setzero_pd(); }
  static reg load(const double* p) { return _mm256_loadu_pd(p); }
  static reg loadm(mask m, const double* p) { return _mm256_maskload_pd(p, m); }
  static void store(double* p, reg v) { _mm256_storeu_pd(p, v); }
  static void storem(double* p, mask m, reg v) { _mm256_maskstore_pd(p, m, v); }
  static reg bcast(double x) { return _mm256_set1_pd(x); }
  static reg fma(reg a, reg b, reg c) { return _mm256_fmadd_pd(a, b, c); }
  static mask tail(int64_t n) {
    return _mm256_cmpgt_epi64(_mm256_set1_epi64x(std::min<int64_t>(n, 4)), _mm256_setr_epi64x(0, 1, 2, 3));
  }
};
constexpr int kNVMax = 2;  // 16 registers: a 4 x 2 tile of accumulators, 2 of B, 1 broadcast
#endif

#ifdef ATN_SMALL_GEMM
template <typename T, int MR, int NV>
inline void gemm_tile(const T* A, int64_t ra, int64_t ka, const T* Bm, int64_t ldb, T* C, int64_t ldc, int64_t K,
                      typename V<T>::mask last, const T* bias, bool acc_c) {
  using R = typename V<T>::reg;
  constexpr int W = V<T>::W;
  R acc[MR][NV];
  if (acc_c) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v)
        acc[r][v] = v == NV - 1 ? V<T>::loadm(last, C + r * ldc + v * W) : V<T>::load(C + r * ldc + v * W);
  } else {
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      const R init =
          bias ? (v == NV - 1 ? V<T>::loadm(last, bias + v * W) : V<T>::load(bias + v * W)) : V<T>::zero();
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) acc[r][v] = init;
    }
  }
  for (int64_t k = 0; k < K; ++k) {
    R bv[NV];
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v)
      bv[v] = v == NV - 1 ? V<T>::loadm(last, Bm + k * ldb + v * W) : V<T>::load(Bm + k * ldb + v * W);
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const R a = V<T>::bcast(A[r * ra + k * ka]);
#pragma GCC unroll 8
      for (int v = 0; v < NV; ++v) acc[r][v] = V<T>::fma(a, bv[v], acc[r][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r)
#pragma GCC unroll 8
    for (int v = 0; v < NV; ++v) {
      if (v == NV - 1)
        V<T>::storem(C + r * ldc + v * W, last, acc[r][v]);
      else
        V<T>::store(C + r * ldc + v * W, acc[r][v]);
    }
}

template <typename T, int MR>
inline void gemm_rows(int nv, const T* A, int64_t ra, int64_t ka, const T* Bm, int64_t ldb, T* C, int64_t ldc,
                      int64_t K, typename V<T>::mask last, const T* bias, bool acc_c) {
  switch (nv) {
    case 1: gemm_tile<T, MR, 1>(A, ra, ka, Bm, ldb, C, ldc, K, last, bias, acc_c); break;
    case 2: gemm_tile<T, MR, 2>(A, ra, ka, Bm, ldb, C, ldc, K, last, bias, acc_c); break;
    case 3: gemm_tile<T, MR, 3>(A, ra, ka, Bm, ldb, C, ldc, K, last, bias, acc_c); break;
    default: gemm_tile<T, MR, 4>(A, ra, ka, Bm, ldb, C, ldc, K, last, bias, acc_c); break;  // nv <= kNVMax
  }
}

template <typename T>
void small_gemm(const T* A, int64_t ra, int64_t ka, const T* Bm, T* C, int64_t M, int64_t N, int64_t K,
                const T* bias, bool acc_c) {
  constexpr int W = V<T>::W;
  for (int64_t j0 = 0; j0 < N; j0 += kNVMax * W) {
    const int64_t cols = std::min<int64_t>(kNVMax * W, N - j0);
    const int nv = (int)((cols + W - 1) / W);
    const auto last = V<T>::tail(cols - (int64_t)(nv - 1) * W);
    const T* bj = Bm + j0;
    const T* bb = bias ? bias + j0 : nullptr;
    int64_t i = 0;
    for (; i + 4 <= M; i += 4)
      gemm_rows<T, 4>(nv, A + i * ra, ra, ka, bj, N, C + i * N + j0, N, K, last, bb, acc_c);
    for (; i < M; ++i) gemm_rows<T, 1>(nv, A + i * ra, ra, ka, bj, N, C + i * N + j0, N, K, last, bb, acc_c);
  }
}
constexpr bool kSmallGemm = true;
#else
template <typename T>
void small_gemm(const T*, int64_t, int64_t, const T*, T*, int64_t, int64_t, int64_t, const T*, bool) {}
constexpr bool kSmallGemm = false;
#endif

// Use the small kernel when the (K, N) operand is cache-resident.
template <typename T>
bool use_small(int64_t K, int64_t N) {
  return kSmallGemm && K * N * (int64_t)sizeof(T) <= (int64_t)384 * 1024;
}

// C (M, N) contiguous (= | +=) A (M, K; strides ra, ka) @ Bm (K, N contiguous) (+ bias).
template <typename T>
void gemm(const T* A, int64_t ra, int64_t ka, const T* Bm, T* C, int64_t M, int64_t N, int64_t K, const T* bias,
          bool acc_c, const at::TensorOptions& opts) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    if (!acc_c)
      for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) C[i * N + j] = bias ? bias[j] : T(0);
    return;
  }
  if (use_small<T>(K, N)) {
    small_gemm<T>(A, ra, ka, Bm, C, M, N, K, bias, acc_c);
    return;
  }
  Tensor a = at::from_blob(const_cast<T*>(A), {M, K}, {ra, ka}, opts);
  Tensor b = at::from_blob(const_cast<T*>(Bm), {K, N}, opts);
  Tensor c = at::from_blob(C, {M, N}, opts);
  if (acc_c)
    c.addmm_(a, b);
  else if (bias)
    at::addmm_out(c, at::from_blob(const_cast<T*>(bias), {N}, opts), a, b);
  else
    at::mm_out(c, a, b);
}
template <typename T>
const T* opt_ptr(const OptT& t) {
  return t.has_value() && t->defined() ? t->data_ptr<T>() : nullptr;
}

bool has(const OptT& t) { return t.has_value() && t->defined(); }

}  // namespace
