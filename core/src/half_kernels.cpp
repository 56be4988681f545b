#include "kvtune/numeric/half_kernels.h"

#include <cstring>

#include "kvtune/numeric/half.h"
#include "kvtune/numeric/multiversion.h"

// GCC only: clang 14's __builtin_cpu_supports does not know "f16c" (the fuzz build uses clang and
// the portable path, which gives the same bits).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
#define KVTUNE_HAVE_F16C_PATH 1
#endif


namespace kvtune::half_kernels {
namespace {

#if KVTUNE_HAVE_F16C_PATH
bool have_f16c() {
  static const bool yes = __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
  return yes;
}

__attribute__((target("f16c,avx"))) void f32_to_f16_f16c(const float* x, uint16_t* out, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
  for (; i < n; ++i) out[i] = f32_to_f16_bits(x[i]);
}

__attribute__((target("f16c,avx"))) void f16_to_f32_f16c(const uint16_t* in, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  }
  for (; i < n; ++i) y[i] = f16_bits_to_f32(in[i]);
}

__attribute__((target("f16c,avx"))) void round_to_f16_f16c(const float* x, float* y, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    _mm256_storeu_ps(y + i, _mm256_cvtph_ps(h));
  }
  for (; i < n; ++i) y[i] = kvtune::round_to_f16(x[i]);
}
#endif

// f32_to_bf16_bits without the branch, so the loop vectorizes: NaN keeps its top bits and gets the
// quiet bit, everything else rounds to nearest even.
inline uint16_t bf16_bits_branch_free(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  const uint32_t nan = (x >> 16) | 0x40u;
  return static_cast<uint16_t>((x & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

}  // namespace

void f32_to_f16(const float* x, uint16_t* out, int64_t n) {
#if KVTUNE_HAVE_F16C_PATH
  if (have_f16c()) return f32_to_f16_f16c(x, out, n);
#endif
  for (int64_t i = 0; i < n; ++i) out[i] = f32_to_f16_bits(x[i]);
}

void f16_to_f32(const uint16_t* in, float* y, int64_t n) {
#if KVTUNE_HAVE_F16C_PATH
  if (have_f16c()) return f16_to_f32_f16c(in, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = f16_bits_to_f32(in[i]);
}

void round_to_f16(const float* x, float* y, int64_t n) {
#if KVTUNE_HAVE_F16C_PATH
  if (have_f16c()) return round_to_f16_f16c(x, y, n);
#endif
  for (int64_t i = 0; i < n; ++i) y[i] = kvtune::round_to_f16(x[i]);
}

KVTUNE_MULTIVERSION void f32_to_bf16(const float* x, uint16_t* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_branch_free(x[i]);
}

KVTUNE_MULTIVERSION void bf16_to_f32(const uint16_t* in, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(in[i]) << 16;
    std::memcpy(y + i, &bits, 4);
  }
}

KVTUNE_MULTIVERSION void round_to_bf16(const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t bits = static_cast<uint32_t>(bf16_bits_branch_free(x[i])) << 16;
    std::memcpy(y + i, &bits, 4);
  }
}

}  // namespace kvtune::half_kernels
