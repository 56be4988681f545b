#include "int_kernels.h"

#include "kvtune/codecs/int_codec.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define KVTUNE_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define KVTUNE_MULTIVERSION
#endif

namespace kvtune::builtin::int_kernels {

using codec::int_asym_level;
using codec::int_sym_level;

KVTUNE_MULTIVERSION void column_min_max(const float* x, int64_t n, float* lo, float* hi) {
  for (int64_t c = 0; c < n; ++c) {
    lo[c] = x[c] < lo[c] ? x[c] : lo[c];
    hi[c] = x[c] > hi[c] ? x[c] : hi[c];
  }
}

// Sixteen independent lanes, so the compiler keeps them in vector registers (min/max need no
// reassociation lane by lane).
KVTUNE_MULTIVERSION void min_max(const float* x, int64_t n, float& lo, float& hi) {
  constexpr int kLanes = 16;
  float l[kLanes], h[kLanes];
  for (int k = 0; k < kLanes; ++k) l[k] = h[k] = x[0];
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int k = 0; k < kLanes; ++k) {
      l[k] = x[i + k] < l[k] ? x[i + k] : l[k];
      h[k] = x[i + k] > h[k] ? x[i + k] : h[k];
    }
  }
  for (; i < n; ++i) {
    l[0] = x[i] < l[0] ? x[i] : l[0];
    h[0] = x[i] > h[0] ? x[i] : h[0];
  }
  lo = l[0];
  hi = h[0];
  for (int k = 1; k < kLanes; ++k) {
    lo = l[k] < lo ? l[k] : lo;
    hi = h[k] > hi ? h[k] : hi;
  }
}

KVTUNE_MULTIVERSION void sym_columns(const float* x, const float* divisor, const float* out_scale, float qmax,
                                     float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_sym_level(x[c], divisor[c], qmax) * out_scale[c];
}

KVTUNE_MULTIVERSION void asym_columns(const float* x, const float* minimum, const float* divisor,
                                      const float* out_scale, const float* out_min, float top, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_asym_level(x[c], minimum[c], divisor[c], top) * out_scale[c] + out_min[c];
}

KVTUNE_MULTIVERSION void sym_segment(const float* x, float divisor, float out_scale, float qmax, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_sym_level(x[c], divisor, qmax) * out_scale;
}

KVTUNE_MULTIVERSION void asym_segment(const float* x, float minimum, float divisor, float out_scale, float out_min,
                                      float top, float* y, int64_t n) {
  for (int64_t c = 0; c < n; ++c) y[c] = int_asym_level(x[c], minimum, divisor, top) * out_scale + out_min;
}

}  // namespace kvtune::builtin::int_kernels
