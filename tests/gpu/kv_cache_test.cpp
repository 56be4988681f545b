// The packed KV cache on the device (kvtune/cuda/kv_cache.h): every region the kernels fill, a few
// tokens at a time, is byte for byte the CPU scheme's quantize() of that region's block, and the
// device's dequantize is the CPU's bit for bit, for every format with a device layout. The
// parameter checks run before any CUDA call, so they run (and must pass) on machines without a
// GPU; everything that launches a kernel skips there, saying why.
#include "kvtune/cuda/kv_cache.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "builtin.h"
#include "host_mode.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/device_buffer.h"
#include "kvtune/cuda/device_info.h"
#include "kvtune/matrix.h"
#include "kvtune/scheme.h"

namespace {

using kvtune::CodecKind;
using kvtune::DeviceFormat;
using kvtune::GroupAxis;
using kvtune::cuda::CacheDesc;
using kvtune::cuda::DequantizeParams;
using kvtune::cuda::DeviceBuffer;
using kvtune::cuda::QuantizeParams;

bool have_device() { return kvtune::cuda::device_count() > 0; }

#define KVTUNE_SKIP_WITHOUT_DEVICE()                                                              \
  do {                                                                                            \
    if (!have_device()) GTEST_SKIP() << "no CUDA device on this machine (" << kvtune::cuda::device_description() << ")"; \
  } while (0)

kvtune::SchemePtr make_scheme(const std::string& spec) { return kvtune::builtin_registry().make(spec); }

// Every format with a device layout: int over bits x axis x sym/asym x scale dtype, grouped int
// along both axes, fp8 in every scale mode, the ggml block types and the plain floats.
std::vector<std::string> device_specs() {
  std::vector<std::string> specs;
  for (const char* bits : {"2", "3", "4", "8"}) {
    for (const char* axis : {"token", "channel", "tensor"}) {
      for (const char* asym : {"", ",asym"}) {
        for (const char* scale : {"f32", "f16", "bf16"}) {
          specs.push_back(std::string("int:bits=") + bits + ",axis=" + axis + asym + ",scale=" + scale);
        }
      }
    }
  }
  for (const char* spec : {"int:bits=4,axis=token,group=32", "int:bits=2,axis=token,group=32,asym,scale=f16",
                           "int:bits=3,axis=channel,group=32", "int:bits=4,axis=channel,group=32,asym,scale=bf16",
                           "int:bits=8,axis=channel,group=128,asym", "int:bits=2,axis=channel,group=128,scale=f16"}) {
    specs.emplace_back(spec);
  }
  for (const char* format : {"e4m3", "e5m2"}) {
    for (const char* scale : {"scale=unit", "scale=static,value=0.05", "scale=dynamic,granularity=token",
                              "scale=dynamic", "scale=dynamic,granularity=head", "scale=calibrated"}) {
      specs.push_back(std::string("fp8:format=") + format + "," + scale);
    }
  }
  for (const char* spec :
       {"q8_0", "q8_0:variant=x86", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl", "f16", "bf16", "f32", "mxfp4",
        "mxfp4:block=16", "mxfp4:block=16,round=away", "mxfp8", "nvfp4", "nvfp4:scale=static,value=0.004"}) {
    specs.emplace_back(spec);
  }
  return specs;
}

// The scheme's device format; every spec device_specs() lists has one.
DeviceFormat format_of(const kvtune::Scheme& scheme) {
  if (const auto f = scheme.device_format()) return *f;
  ADD_FAILURE() << "'" << scheme.spec() << "' has no device format";
  return {};
}

DeviceFormat format_of(const std::string& spec) { return format_of(*make_scheme(spec)); }

// The calls that fill a region: the whole block at once where the fit spans it, whole groups of
// tokens for per-channel groups (the tail group last), else 1, 4 and 7 tokens, then the rest.
std::vector<std::pair<int64_t, int64_t>> appends(const DeviceFormat& f, int64_t capacity) {
  if (kvtune::codec::needs_whole_block(f)) return {{0, capacity}};
  const bool channel_groups = f.kind == CodecKind::integer && f.axis == GroupAxis::channel && f.group > 0;
  std::vector<std::pair<int64_t, int64_t>> calls;
  int64_t t = 0;
  for (int64_t i = 1; t < capacity; ++i) {
    const int64_t size = channel_groups ? i * f.group : (i <= 3 ? 3 * i - 2 : capacity);
    const int64_t end = std::min(capacity, t + size);
    calls.emplace_back(t, end);
    t = end;
  }
  return calls;
}

// Keys-like [tokens, head_dim] data: normal values, an outlier channel, scattered exact zeros, an
// all-zero token (a symmetric group's scale is then a zero whose sign is the CPU's) and a constant
// one.
std::vector<float> region_data(int64_t tokens, int64_t head_dim, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal;
  std::vector<float> x(static_cast<size_t>(tokens * head_dim));
  for (size_t i = 0; i < x.size(); ++i) x[i] = normal(engine) * (int64_t(i) % head_dim == 7 ? 20.0f : 1.0f);
  for (size_t i = 0; i < x.size(); i += 97) x[i] = 0.0f;
  for (int64_t c = 0; c < head_dim && tokens > 5; ++c) {
    x[size_t(3 * head_dim + c)] = 0.0f;
    x[size_t(5 * head_dim + c)] = 1.5f;
  }
  return x;
}

// Rows [t0, t1) of every region of x ([regions, tokens, head_dim]) as [regions, t1 - t0, head_dim].
std::vector<float> token_slice(const std::vector<float>& x, int64_t regions, int64_t tokens, int64_t head_dim,
                               int64_t t0, int64_t t1) {
  std::vector<float> out(static_cast<size_t>(regions * (t1 - t0) * head_dim));
  for (int64_t r = 0; r < regions; ++r) {
    std::memcpy(out.data() + r * (t1 - t0) * head_dim, x.data() + (r * tokens + t0) * head_dim,
                static_cast<size_t>((t1 - t0) * head_dim) * sizeof(float));
  }
  return out;
}

void expect_same_bytes(const uint8_t* got, const std::vector<std::byte>& want, const kvtune::codec::PackedLayout& L,
                       const std::string& what) {
  if (std::memcmp(got, want.data(), want.size()) == 0) return;
  size_t i = 0;
  while (got[i] == static_cast<uint8_t>(want[i])) ++i;
  ADD_FAILURE() << what << ": byte " << i << " of " << want.size() << " is " << int(got[i]) << ", the CPU wrote "
                << int(want[i]) << " (minima at " << L.min_offset << ", codes at " << L.code_offset << ")";
}

void expect_same_bits(const float* got, const float* want, int64_t n, const std::string& what) {
  if (std::memcmp(got, want, static_cast<size_t>(n) * sizeof(float)) == 0) return;
  int64_t i = 0;
  while (std::memcmp(got + i, want + i, sizeof(float)) == 0) ++i;
  ADD_FAILURE() << what << ": element " << i << " of " << n << " is " << got[i] << ", the CPU gives " << want[i];
}

QuantizeParams append_params(const float* x, uint8_t* cache, const CacheDesc& desc, int32_t batch, int64_t first,
                             int64_t count) {
  QuantizeParams p;
  p.x = x;
  p.cache = cache;
  p.cache_desc = desc;
  p.batch = batch;
  p.first_token = first;
  p.new_tokens = count;
  return p;
}

DequantizeParams read_params(const uint8_t* cache, const CacheDesc& desc, float* out, int32_t batch, int64_t tokens) {
  DequantizeParams p;
  p.cache = cache;
  p.cache_desc = desc;
  p.out = out;
  p.batch = batch;
  p.tokens = tokens;
  return p;
}

// ---- host-only: sizes and parameter checks (no CUDA call, no device needed) ------------------

TEST(KvCacheLayout, RegionsAreTheSchemesFootprintAndDenseCachesPadThemTo16Bytes) {
  for (const std::string& spec : device_specs()) {
    const kvtune::SchemePtr scheme = make_scheme(spec);
    const DeviceFormat f = format_of(*scheme);
    for (int32_t head_dim : {64, 128}) {
      for (int64_t capacity : {1, 37, 129, 4099}) {
        SCOPED_TRACE(spec + " head_dim=" + std::to_string(head_dim) + " capacity=" + std::to_string(capacity));
        const int64_t region = kvtune::cuda::region_bytes(f, capacity, head_dim);
        EXPECT_EQ(region, int64_t(scheme->footprint(capacity, head_dim)));
        const CacheDesc c = kvtune::cuda::dense_cache(f, capacity, head_dim, 3);
        EXPECT_EQ(c.head_stride % 16, 0);
        EXPECT_GE(c.head_stride, region);
        EXPECT_LT(c.head_stride, region + 16);
        EXPECT_EQ(c.seq_stride, 3 * c.head_stride);
        EXPECT_EQ(kvtune::cuda::cache_bytes(c, 2), 2 * c.seq_stride);
        CacheDesc shared = c;
        shared.seq_stride = 0;
        EXPECT_EQ(kvtune::cuda::cache_bytes(shared, 2), 3 * c.head_stride);
      }
    }
  }
}

// Buffers a valid call could use: device memory where a device exists (so a call the checks wrongly
// let through writes somewhere legal), host memory that no check-failing call touches otherwise.
class CallBuffers {
 public:
  CallBuffers(size_t floats, size_t bytes) : host_x_(floats), host_cache_(bytes) {
    if (have_device()) {
      device_x_ = DeviceBuffer<float>(floats);
      device_cache_ = DeviceBuffer<uint8_t>(bytes);
    }
  }
  float* x() { return have_device() ? device_x_.data() : host_x_.data(); }
  uint8_t* cache() { return have_device() ? device_cache_.data() : host_cache_.data(); }

 private:
  std::vector<float> host_x_;
  std::vector<uint8_t> host_cache_;
  DeviceBuffer<float> device_x_;
  DeviceBuffer<uint8_t> device_cache_;
};

class KvCacheChecks : public ::testing::Test {
 protected:
  // A valid call: int4 per-token, 2 sequences x 2 KV heads x 129 tokens x 64 channels, the lot.
  KvCacheChecks()
      : desc_(kvtune::cuda::dense_cache(format_of("int:bits=4,axis=token"), kCapacity, 64, 2)),
        buffers_(size_t(2 * 2 * kCapacity * 64), size_t(kvtune::cuda::cache_bytes(desc_, 2))) {}

  QuantizeParams valid() { return append_params(buffers_.x(), buffers_.cache(), desc_, 2, 0, kCapacity); }

  // `p` is refused before launching; where a device exists, so is nothing else afterwards.
  static void expect_refused(const QuantizeParams& p, const char* why) {
    EXPECT_EQ(kvtune::cuda::quantize_append(p), cudaErrorInvalidValue) << why;
  }
  static void expect_refused(const DequantizeParams& p, const char* why) {
    EXPECT_EQ(kvtune::cuda::dequantize(p), cudaErrorInvalidValue) << why;
  }

  // Appends [first, first + count) of a cache in `spec` with this head_dim and capacity.
  QuantizeParams with(const std::string& spec, int32_t head_dim, int64_t capacity, int64_t first, int64_t count) {
    QuantizeParams p = valid();
    p.cache_desc = kvtune::cuda::dense_cache(format_of(spec), capacity, head_dim, 2);
    p.batch = 1;
    p.first_token = first;
    p.new_tokens = count;
    return p;
  }

  static constexpr int64_t kCapacity = 129;
  CacheDesc desc_;
  CallBuffers buffers_;
};

TEST_F(KvCacheChecks, RefusesMissingPointersAndEmptyShapes) {
  QuantizeParams p = valid();
  p.x = nullptr;
  expect_refused(p, "no input");
  p = valid();
  p.cache = nullptr;
  expect_refused(p, "no cache");
  for (int32_t batch : {0, -1}) {
    p = valid();
    p.batch = batch;
    expect_refused(p, "batch <= 0");
  }
  p = valid();
  p.cache_desc.kv_heads = 0;
  expect_refused(p, "kv_heads = 0");
  p = valid();
  p.cache_desc.head_dim = 0;
  expect_refused(p, "head_dim = 0");
  p = valid();
  p.cache_desc.capacity = 0;
  expect_refused(p, "capacity = 0");
  p = valid();
  p.cache_desc.capacity = -5;
  expect_refused(p, "capacity < 0");
}

TEST_F(KvCacheChecks, RefusesTokensOutsideTheCapacity) {
  QuantizeParams p = valid();
  p.first_token = 100;
  p.new_tokens = 30;  // ends at 130 > 129
  expect_refused(p, "past the capacity");
  p = valid();
  p.first_token = -1;
  p.new_tokens = 2;
  expect_refused(p, "first_token < 0");
  p = valid();
  p.new_tokens = -1;
  expect_refused(p, "new_tokens < 0");
  p = valid();
  p.first_token = int64_t{1} << 62;
  p.new_tokens = int64_t{1} << 62;  // the sum overflows
  expect_refused(p, "overflowing end");
}

TEST_F(KvCacheChecks, WholeBlockFitsNeedTheWholeBlock) {
  for (const char* spec : {"int:bits=4", "int:bits=4,axis=tensor,asym,scale=f16", "int:bits=2,axis=channel",
                           "fp8:scale=dynamic", "fp8:format=e5m2,scale=calibrated"}) {
    SCOPED_TRACE(spec);
    ASSERT_TRUE(kvtune::codec::needs_whole_block(format_of(spec)));
    expect_refused(with(spec, 64, 37, 0, 36), "one token short");
    expect_refused(with(spec, 64, 37, 1, 36), "starting at 1");
    expect_refused(with(spec, 64, 37, 0, 1), "one token");
    expect_refused(with(spec, 64, 37, 0, 0), "no token");
  }
}

TEST_F(KvCacheChecks, PerChannelGroupsAppendWholeGroups) {
  const char* spec = "int:bits=4,axis=channel,group=32";
  expect_refused(with(spec, 64, 129, 16, 16), "starting inside a group");
  expect_refused(with(spec, 64, 129, 0, 40), "ending inside a group");
  expect_refused(with(spec, 64, 140, 128, 7), "ending inside the tail group [128, 140)");
  expect_refused(with(spec, 64, 129, 1, 128), "the tail group from a misaligned start");
}

TEST_F(KvCacheChecks, IntegerCodesStartAndEndOnAByte) {
  // 3-bit codes of 5 channels: 15 bits a token, so token t starts on a byte when 8 divides t.
  const char* spec = "int:bits=3,axis=token";
  expect_refused(with(spec, 5, 37, 1, 4), "starting inside a byte");
  expect_refused(with(spec, 5, 37, 0, 3), "ending inside a byte before the capacity");
  expect_refused(with(spec, 5, 37, 3, 34), "starting inside a byte, ending at the capacity");
}

TEST_F(KvCacheChecks, RefusesFormatsWithoutADeviceLayout) {
  expect_refused(with("q4_0", 48, 37, 0, 37), "ggml with head_dim 48");
  expect_refused(with("iq4_nl", 80, 37, 0, 37), "ggml with head_dim 80");
  QuantizeParams p = valid();
  p.cache_desc.format.kind = static_cast<CodecKind>(99);
  expect_refused(p, "unknown CodecKind");
  for (int bits : {0, 1, 9}) {
    p = valid();
    p.cache_desc.format.bits = static_cast<uint8_t>(bits);
    expect_refused(p, "integer bits outside 2..8");
  }
  p = valid();
  p.cache_desc.format.group = 48;  // per-token groups of 48 channels do not divide 64
  expect_refused(p, "token groups not dividing head_dim");
  p = valid();
  p.cache_desc.format.axis = static_cast<GroupAxis>(7);
  expect_refused(p, "unknown axis");
  p = valid();
  p.cache_desc.format.scale_type = static_cast<kvtune::ScaleType>(7);
  expect_refused(p, "unknown scale dtype");
  p = with("fp8:scale=dynamic,granularity=token", 64, 37, 0, 37);
  p.cache_desc.format.static_scale = -1.0f;
  expect_refused(p, "negative fp8 scale");
}

TEST_F(KvCacheChecks, RefusesOverlappingRegions) {
  QuantizeParams p = valid();
  p.cache_desc.head_stride -= 16;
  p.cache_desc.seq_stride = 2 * p.cache_desc.head_stride;
  expect_refused(p, "head_stride below the region");
  p = valid();
  p.cache_desc.seq_stride -= 16;
  expect_refused(p, "seq_stride below kv_heads * head_stride");
  p = valid();
  p.cache_desc.seq_stride = 0;
  expect_refused(p, "two sequences appending to one shared cache");
}

TEST_F(KvCacheChecks, DequantizeChecksItsParameters) {
  CallBuffers output(size_t(2 * 2 * kCapacity * 64), 0);
  float* out = output.x();
  const uint8_t* cache = buffers_.cache();
  expect_refused(read_params(nullptr, desc_, out, 2, 10), "no cache");
  expect_refused(read_params(cache, desc_, nullptr, 2, 10), "no output");
  expect_refused(read_params(cache, desc_, out, 0, 10), "batch = 0");
  expect_refused(read_params(cache, desc_, out, 2, kCapacity + 1), "tokens past the capacity");
  expect_refused(read_params(cache, desc_, out, 2, -1), "tokens < 0");
  CacheDesc bad = desc_;
  bad.head_stride = 8;
  expect_refused(read_params(cache, bad, out, 2, 10), "head_stride below the region");
  bad = kvtune::cuda::dense_cache(format_of("q5_1"), 37, 48, 2);
  expect_refused(read_params(cache, bad, out, 1, 10), "ggml with head_dim 48");
  bad = desc_;
  bad.format.kind = static_cast<CodecKind>(13);
  expect_refused(read_params(cache, bad, out, 2, 10), "unknown CodecKind");
}

TEST_F(KvCacheChecks, EmptyCallsSucceedWithoutLaunching) {
  QuantizeParams p = valid();
  p.first_token = 7;
  p.new_tokens = 0;
  EXPECT_EQ(kvtune::cuda::quantize_append(p), cudaSuccess);
  std::vector<float> host_out(1);
  EXPECT_EQ(kvtune::cuda::dequantize(read_params(buffers_.cache(), desc_, host_out.data(), 2, 0)), cudaSuccess);
}

TEST_F(KvCacheChecks, ValidCallsRunOnADevice) {
  KVTUNE_SKIP_WITHOUT_DEVICE();
  EXPECT_EQ(kvtune::cuda::quantize_append(valid()), cudaSuccess);
  const char* spec = "int:bits=4,axis=channel,group=32";
  EXPECT_EQ(kvtune::cuda::quantize_append(with(spec, 64, 129, 32, 64)), cudaSuccess);
  EXPECT_EQ(kvtune::cuda::quantize_append(with(spec, 64, 129, 96, 33)), cudaSuccess);
  EXPECT_EQ(kvtune::cuda::quantize_append(with("int:bits=3,axis=token", 5, 37, 8, 29)), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// ---- device: the kernels against the CPU schemes ----------------------------------------------

// Fills a [batch, kv_heads] cache in `spec` call by call and compares every region and its
// dequantization (all tokens, and a prefix) with the CPU scheme.
void check_against_cpu(const std::string& spec, int32_t head_dim, int64_t capacity, int32_t batch, int32_t kv_heads) {
  SCOPED_TRACE(spec + " head_dim=" + std::to_string(head_dim) + " capacity=" + std::to_string(capacity));
  const kvtune::SchemePtr scheme = make_scheme(spec);
  const DeviceFormat format = format_of(*scheme);
  const CacheDesc desc = kvtune::cuda::dense_cache(format, capacity, head_dim, kv_heads);
  const kvtune::codec::PackedLayout L = kvtune::codec::packed_layout(format, capacity, head_dim);
  const int64_t regions = int64_t{batch} * kv_heads, block = capacity * head_dim;

  std::vector<float> x(static_cast<size_t>(regions * block));  // [batch, kv_heads, capacity, head_dim]
  for (int64_t r = 0; r < regions; ++r) {
    const std::vector<float> data = region_data(capacity, head_dim, uint64_t(r + 1));
    std::copy(data.begin(), data.end(), x.begin() + r * block);
  }
  DeviceBuffer<uint8_t> cache(static_cast<size_t>(kvtune::cuda::cache_bytes(desc, batch)));
  kvtune::cuda::check(cudaMemset(cache.data(), 0xa5, cache.bytes()), "cudaMemset");  // no byte is left as is
  for (const auto& [t0, t1] : appends(format, capacity)) {
    const DeviceBuffer<float> chunk(token_slice(x, regions, capacity, head_dim, t0, t1));
    ASSERT_EQ(kvtune::cuda::quantize_append(append_params(chunk.data(), cache.data(), desc, batch, t0, t1 - t0)),
              cudaSuccess)
        << "appending [" << t0 << ", " << t1 << ")";
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  }
  const int64_t prefix = capacity / 2 + 1;
  DeviceBuffer<float> all(static_cast<size_t>(regions * block)),
      first(static_cast<size_t>(regions * prefix * head_dim));
  ASSERT_EQ(kvtune::cuda::dequantize(read_params(cache.data(), desc, all.data(), batch, capacity)), cudaSuccess);
  ASSERT_EQ(kvtune::cuda::dequantize(read_params(cache.data(), desc, first.data(), batch, prefix)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<uint8_t> bytes = cache.download();
  const std::vector<float> values = all.download(), prefix_values = first.download();

  for (int64_t r = 0; r < regions; ++r) {
    const std::string region = "region " + std::to_string(r);
    const std::vector<std::byte> want = scheme->quantize({x.data() + r * block, capacity, head_dim}, {});
    ASSERT_EQ(int64_t(want.size()), kvtune::cuda::region_bytes(format, capacity, head_dim));
    expect_same_bytes(bytes.data() + (r / kv_heads) * desc.seq_stride + (r % kv_heads) * desc.head_stride, want, L,
                      region);
    kvtune::Matrix want_values(capacity, head_dim);
    scheme->dequantize(want, {}, want_values);
    expect_same_bits(values.data() + r * block, want_values.data(), block, region + " dequantized");
    expect_same_bits(prefix_values.data() + r * prefix * head_dim, want_values.data(), prefix * head_dim,
                     region + " dequantized, first " + std::to_string(prefix) + " tokens");
  }
}

class KvCacheFormats : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { KVTUNE_SKIP_WITHOUT_DEVICE(); }
};

// batch 2, 3 KV heads, an odd capacity (129 for per-channel groups, so a partial tail group);
// whole-block fits once more over 5003 tokens, which the kernels reduce in many chunks.
TEST_P(KvCacheFormats, RegionsAreTheCpuBytesAndDequantizeBitForBit) {
  const DeviceFormat f = format_of(GetParam());
  if (GetParam().find("scale=static") != std::string::npos) {
    EXPECT_GT(f.static_scale, 0.0f) << "the scheme's device_format() does not carry its fixed scale";
  }
  const bool channel_groups = f.kind == CodecKind::integer && f.axis == GroupAxis::channel && f.group > 0;
  for (int32_t head_dim : {64, 128}) check_against_cpu(GetParam(), head_dim, channel_groups ? 129 : 37, 2, 3);
  if (kvtune::codec::needs_whole_block(f)) check_against_cpu(GetParam(), 128, 5003, 2, 3);
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = info.param;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(DeviceFormats, KvCacheFormats, ::testing::ValuesIn(device_specs()), test_name);

class KvCacheDevice : public ::testing::Test {
 protected:
  void SetUp() override { KVTUNE_SKIP_WITHOUT_DEVICE(); }
};

// seq_stride = 0: every sequence reads sequence 0's regions.
TEST_F(KvCacheDevice, SharedCachesDequantizeTheSameRegionsForEverySequence) {
  for (const char* spec : {"q4_0", "int:bits=4,axis=channel,asym"}) {
    SCOPED_TRACE(spec);
    const DeviceFormat f = format_of(spec);
    const int64_t capacity = 41;
    const int32_t head_dim = 64;
    CacheDesc desc = kvtune::cuda::dense_cache(f, capacity, head_dim, 2);
    std::vector<float> x(static_cast<size_t>(2 * capacity * head_dim));
    for (int64_t h = 0; h < 2; ++h) {
      const std::vector<float> data = region_data(capacity, head_dim, uint64_t(h + 11));
      std::copy(data.begin(), data.end(), x.begin() + h * capacity * head_dim);
    }
    const DeviceBuffer<float> dx(x);
    DeviceBuffer<uint8_t> cache(static_cast<size_t>(kvtune::cuda::cache_bytes(desc, 1)));
    ASSERT_EQ(kvtune::cuda::quantize_append(append_params(dx.data(), cache.data(), desc, 1, 0, capacity)), cudaSuccess);
    desc.seq_stride = 0;
    DeviceBuffer<float> out(static_cast<size_t>(3 * 2 * capacity * head_dim));
    ASSERT_EQ(kvtune::cuda::dequantize(read_params(cache.data(), desc, out.data(), 3, capacity)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<float> y = out.download();
    const int64_t per_sequence = 2 * capacity * head_dim;
    expect_same_bits(y.data() + per_sequence, y.data(), per_sequence, "sequence 1");
    expect_same_bits(y.data() + 2 * per_sequence, y.data(), per_sequence, "sequence 2");
  }
}

// A long context: 8 KV heads of 131072 tokens x 128 channels (134M elements), appended in three
// odd calls (one for the whole-block fit, reduced in 256 chunks per region); a sample of regions
// is compared with the CPU and no dequantized value is NaN. The host mode takes 32768 tokens
// (64 chunks per region): 131072 cost it 50 s.
TEST_F(KvCacheDevice, LongContextsMatchTheCpu) {
  const int64_t capacity = kvtune::testing::device_or_host<int64_t>(131072, 32768);
  const int32_t head_dim = 128, kv_heads = 8;
  const int64_t block = capacity * head_dim, regions = kv_heads;
  std::vector<float> x(static_cast<size_t>(regions * block));  // [1, 8, capacity, head_dim]
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < x.size(); ++i) {  // splitmix64: fast enough for 134M values
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    const float u = static_cast<float>(z >> 40) * 0x1p-24f - 0.5f;  // [-0.5, 0.5)
    x[i] = u * (int64_t(i) % head_dim == 7 ? 80.0f : 4.0f);
  }
  for (const char* spec : {"q4_0", "int:bits=4,axis=token", "int:bits=4,axis=tensor"}) {
    SCOPED_TRACE(spec);
    const kvtune::SchemePtr scheme = make_scheme(spec);
    const DeviceFormat f = format_of(*scheme);
    const CacheDesc desc = kvtune::cuda::dense_cache(f, capacity, head_dim, kv_heads);
    const kvtune::codec::PackedLayout L = kvtune::codec::packed_layout(f, capacity, head_dim);
    DeviceBuffer<uint8_t> cache(static_cast<size_t>(kvtune::cuda::cache_bytes(desc, 1)));
    kvtune::cuda::check(cudaMemset(cache.data(), 0xa5, cache.bytes()), "cudaMemset");
    const int64_t half = capacity / 2 + 1;
    std::vector<std::pair<int64_t, int64_t>> calls = {{0, half}, {half, capacity - 1}, {capacity - 1, capacity}};
    if (kvtune::codec::needs_whole_block(f)) calls = {{0, capacity}};
    for (const auto& [t0, t1] : calls) {
      const DeviceBuffer<float> chunk(token_slice(x, regions, capacity, head_dim, t0, t1));
      ASSERT_EQ(kvtune::cuda::quantize_append(append_params(chunk.data(), cache.data(), desc, 1, t0, t1 - t0)),
                cudaSuccess);
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    }
    DeviceBuffer<float> out(static_cast<size_t>(regions * block));
    ASSERT_EQ(kvtune::cuda::dequantize(read_params(cache.data(), desc, out.data(), 1, capacity)), cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const std::vector<uint8_t> bytes = cache.download();
    const std::vector<float> values = out.download();
    int64_t nans = 0;
    for (float v : values) nans += std::isnan(v) ? 1 : 0;
    EXPECT_EQ(nans, 0);
    for (int64_t r : {0, 3, 7}) {
      const std::string region = "region " + std::to_string(r);
      const std::vector<std::byte> want = scheme->quantize({x.data() + r * block, capacity, head_dim}, {});
      expect_same_bytes(bytes.data() + r * desc.head_stride, want, L, region);
      kvtune::Matrix want_values(capacity, head_dim);
      scheme->dequantize(want, {}, want_values);
      expect_same_bits(values.data() + r * block, want_values.data(), block, region + " dequantized");
    }
  }
}

}  // namespace
