// The shared codec headers run on the device give the CPU's results bit for bit (one thread per
// ggml block, one per fp8 element). Skips, saying why, on a machine without a GPU.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/cuda/codec_roundtrip.h"
#include "kvtune/cuda/device_info.h"

namespace {

using kvtune::cuda::GgmlType;

// Keys-like data: normal values, a few large channels, some exact zeros and ties.
std::vector<float> keys_like(size_t n) {
  std::mt19937 engine(5);
  std::normal_distribution<float> normal;
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = normal(engine) * (i % 128 == 7 ? 20.0f : 1.0f);
  for (size_t i = 0; i < n; i += 97) x[i] = 0.0f;
  return x;
}

// Runs `launch(device_x, device_y)` and returns the device's output.
template <class Launch>
std::vector<float> on_device(const std::vector<float>& x, Launch&& launch) {
  float *dx = nullptr, *dy = nullptr;
  const size_t bytes = x.size() * sizeof(float);
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dx), bytes), cudaSuccess);
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&dy), bytes), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dx, x.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(launch(dx, dy), cudaSuccess);
  std::vector<float> y(x.size());
  EXPECT_EQ(cudaMemcpy(y.data(), dy, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dy);
  return y;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    ASSERT_EQ(a, b) << "element " << i;
  }
}

class DeviceCodecs : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kvtune::cuda::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device on this machine (" << kvtune::cuda::device_description() << ")";
    }
  }
};

TEST_F(DeviceCodecs, GgmlRoundTripsMatchTheCpu) {
  using Quantize = void (*)(const float*, uint8_t*);
  using Dequantize = void (*)(const uint8_t*, float*);
  const struct {
    GgmlType type;
    Quantize quantize;
    Dequantize dequantize;
  } types[] = {{GgmlType::q8_0, kvtune::ggml::quantize_q8_0, kvtune::ggml::dequantize_q8_0},
               {GgmlType::q8_0_x86, kvtune::ggml::quantize_q8_0_x86, kvtune::ggml::dequantize_q8_0},
               {GgmlType::q4_0, kvtune::ggml::quantize_q4_0, kvtune::ggml::dequantize_q4_0},
               {GgmlType::q4_1, kvtune::ggml::quantize_q4_1, kvtune::ggml::dequantize_q4_1},
               {GgmlType::q5_0, kvtune::ggml::quantize_q5_0, kvtune::ggml::dequantize_q5_0},
               {GgmlType::q5_1, kvtune::ggml::quantize_q5_1, kvtune::ggml::dequantize_q5_1},
               {GgmlType::iq4_nl, kvtune::ggml::quantize_iq4_nl, kvtune::ggml::dequantize_iq4_nl}};
  const std::vector<float> x = keys_like(4096 * 128);
  const int64_t blocks = int64_t(x.size()) / kvtune::ggml::kBlock;
  for (const auto& t : types) {
    std::vector<float> want(x.size());
    uint8_t block[kvtune::ggml::kMaxBlockBytes];
    for (int64_t i = 0; i < blocks; ++i) {
      t.quantize(x.data() + i * 32, block);
      t.dequantize(block, want.data() + i * 32);
    }
    const std::vector<float> got =
        on_device(x, [&](const float* dx, float* dy) { return kvtune::cuda::ggml_roundtrip(t.type, dx, dy, blocks); });
    SCOPED_TRACE(static_cast<int>(t.type));
    expect_same_bits(got, want);
  }
}

TEST_F(DeviceCodecs, Fp8RoundTripsMatchTheCpu) {
  const std::vector<float> x = keys_like(1 << 20);
  for (bool e5m2 : {false, true}) {
    for (float scale : {1.0f, 0.37f}) {
      const auto format = e5m2 ? kvtune::codec::Fp8Format::e5m2 : kvtune::codec::Fp8Format::e4m3;
      std::vector<float> want(x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        want[i] = kvtune::codec::fp8_to_f32(kvtune::codec::f32_to_fp8(x[i] / scale, format), format) * scale;
      }
      const std::vector<float> got = on_device(x, [&](const float* dx, float* dy) {
        return kvtune::cuda::fp8_roundtrip(dx, dy, int64_t(x.size()), scale, e5m2);
      });
      expect_same_bits(got, want);
    }
  }
}

}  // namespace
