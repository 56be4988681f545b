// How close kvtune's emulations of vLLM's per-token-head cache stores come to the store's own
// arithmetic (vllm/v1/attention/ops/triton_reshape_and_cache_flash.py _reshape_cache_per_token_head,
// tags v0.20.0 .. v0.27.1):
//
//   scale = max(absmax / QUANT_MAX, 1e-6)   (float32; QUANT_MAX 127 for int8, 448 for fp8)
//   q     = clamp(x * (1 / scale), QUANT_MIN, QUANT_MAX), then the store's cast
//
// written out here with exact float32 division. On the GPU both divisions are Triton's `/`, which
// lowers to the approximate div.full.f32 (up to 2 ulp by NVIDIA's PTX ISA, not re-read; triton-lang/triton
// third_party/nvidia/lib/TritonNVIDIAGPUToLLVM/ElementwiseOpToLLVM.cpp @0043a8d8, FDivOpConversion:
// llvm.nvvm.div.full), which no CPU reproduces. These tests pin what the runtime table's caveats
// say about that.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;

// Rows of keys-like data: N(0, 1) with a few large channels, each row at its own magnitude
// (2^-6 .. 2^6), so the scales take many exponents and mantissas.
Matrix keys_like_rows(int64_t rows, int64_t cols, uint64_t seed) {
  Matrix x = testing::normal_matrix(rows, cols, seed);
  for (int64_t r = 0; r < rows; ++r) {
    const float magnitude = std::ldexp(1.0f + static_cast<float>(r % 97) / 97.0f, static_cast<int>(r % 13) - 6);
    for (int64_t c = 0; c < cols; ++c) x(r, c) *= (c % 37 == 5 ? 8.0f : 1.0f) * magnitude;
  }
  return x;
}

float row_absmax(const Matrix& x, int64_t r) {
  float m = 0.0f;
  for (int64_t c = 0; c < x.cols(); ++c) m = std::fmax(m, std::fabs(x(r, c)));
  return m;
}

// fp8_per_token_head: kvtune's `fp8:format=e4m3,scale=dynamic,granularity=token` divides by
// absmax / 448 where vLLM multiplies by the float32 reciprocal of max(absmax / 448, 1e-6) and casts
// with cvt.rn.satfinite.e4m3x2.f32 (the same file's Fp32_to_Fp8E4M3Nv), kvtune's rounding. The
// scales are the same float32 (the floor binds only below an absmax of 4.48e-4), and a code can
// differ only where x / scale lies within an ulp of a midpoint between two E4M3 values.
TEST(VllmStoreArithmetic, Fp8PerTokenHeadCodesAreKvtunesButAtTies) {
  const Matrix x = keys_like_rows(4096, 128, 20261207);
  const SchemePtr s = make_scheme("fp8:format=e4m3,scale=dynamic,granularity=token");
  const std::vector<std::byte> packed = s->quantize(x, {});
  const codec::PackedLayout L = codec::packed_layout(*s->device_format(), x.rows(), x.cols());
  const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
  int64_t differing = 0;
  for (int64_t r = 0; r < x.rows(); ++r) {
    const float vllm_scale = std::fmax(row_absmax(x, r) / 448.0f, 1e-6f);
    const float kvtune_scale = testing::read_f32(packed, static_cast<size_t>(L.scale_offset + 4 * r));
    ASSERT_EQ(float_bits(kvtune_scale), float_bits(vllm_scale)) << "row " << r;
    const float inverse = 1.0f / vllm_scale;
    for (int64_t c = 0; c < x.cols(); ++c) {
      const float q = std::fmin(std::fmax(x(r, c) * inverse, -448.0f), 448.0f);
      const uint8_t vllm_code = codec::f32_to_fp8_e4m3(q);
      const uint8_t kvtune_code = bytes[L.code_offset + r * x.cols() + c];
      if (vllm_code == kvtune_code) continue;
      ++differing;
      // One step apart, same sign: E4M3 codes of one sign are ordered like their magnitudes.
      EXPECT_EQ(vllm_code & 0x80, kvtune_code & 0x80) << r << ", " << c;
      EXPECT_EQ(std::abs(int(vllm_code & 0x7f) - int(kvtune_code & 0x7f)), 1) << r << ", " << c;
    }
  }
  // 524 288 codes; a tie within an ulp is a few in a million.
  EXPECT_LE(differing, 5);
}

// int8_per_token_head from 0.20.0 to 0.23.0 truncates: each row's largest element lands on
// absmax * fl(1 / fl(absmax / 127)), within a few ulp of 127, and stores 127 or 126 depending on
// that last ulp. kvtune's emulation (exact division) stores 126 in about a fifth of the rows; a GPU
// reciprocal one ulp low would store it in most. The element is then one step (absmax / 127) off,
// which moves the row's squared error by about 2 %.
TEST(VllmStoreArithmetic, TruncatingInt8RowMaximumHangsOnTheLastUlp) {
  const Matrix x = keys_like_rows(4096, 128, 7);
  const Matrix out = testing::roundtrip("tokenint:bits=8,round=trunc,min_scale=1e-6,reciprocal", x);
  int64_t kvtune_126 = 0, low_126 = 0;
  double kvtune_sq = 0.0, low_sq = 0.0;
  for (int64_t r = 0; r < x.rows(); ++r) {
    int64_t at = 0;
    for (int64_t c = 1; c < x.cols(); ++c) at = std::fabs(x(r, c)) > std::fabs(x(r, at)) ? c : at;
    const float scale = std::fmax(std::fabs(x(r, at)) / 127.0f, 1e-6f);
    const double kvtune_code = std::round(std::fabs(double(out(r, at)) / scale));  // code * scale, rounded
    ASSERT_TRUE(kvtune_code == 127.0 || kvtune_code == 126.0) << "row " << r << ": " << kvtune_code;
    kvtune_126 += kvtune_code == 126.0;
    const float low_inverse = std::nextafter(1.0f / scale, 0.0f);  // a reciprocal one ulp low
    for (int64_t c = 0; c < x.cols(); ++c) {
      const float low = std::trunc(std::fmin(std::fmax(x(r, c) * low_inverse, -128.0f), 127.0f)) * scale;
      if (c == at) low_126 += std::round(std::fabs(double(low) / scale)) == 126.0;
      kvtune_sq += std::pow(double(out(r, c)) - x(r, c), 2);
      low_sq += std::pow(double(low) - x(r, c), 2);
    }
  }
  const double rows = double(x.rows());
  SCOPED_TRACE("row maxima at 126: kvtune " + std::to_string(kvtune_126 / rows) + ", reciprocal one ulp low " +
               std::to_string(low_126 / rows) + "; squared error ratio " + std::to_string(low_sq / kvtune_sq));
  EXPECT_GT(kvtune_126 / rows, 0.10);
  EXPECT_LT(kvtune_126 / rows, 0.35);
  EXPECT_GT(low_126 / rows, 0.75);
  EXPECT_GT(low_sq / kvtune_sq, 1.005);  // the effect is real ...
  EXPECT_LT(low_sq / kvtune_sq, 1.03);   // ... and small next to truncation's own error
}

}  // namespace
}  // namespace kvtune
