// Fused decode attention (kvtune/cuda/decode_attention.h) against a float64 attention on the CPU
// over the same dequantized values: caches are filled with the CPU schemes' quantize() bytes (the
// bytes a GPU cache holds by design, kvtune/codecs/packed_layout.h), the reference attends over
// the schemes' dequantize(). Relative L2 error <= 1e-3 and no NaN, for every codec family as K and
// as V, mixed pairs, groups 1/4/8, head_dim 64/128/256, odd lengths from 1 to 131072 tokens,
// batches up to 64 and split counts from 1 to more splits than tokens.
//
// The DecodeAttentionHost tests need no device (support queries, split heuristic, workspace
// size, parameter validation, layout agreement); DecodeAttentionGpu skips with the reason on a
// machine without one.
#include "kvtune/cuda/decode_attention.h"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"
#include "host_mode.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/device_buffer.h"
#include "kvtune/cuda/device_info.h"

namespace {

namespace kc = kvtune::cuda;
using kvtune::CodecKind;
using kvtune::DeviceFormat;
using kvtune::GroupAxis;
using kvtune::ScaleType;

// ---- formats: a CPU scheme spec and the device format the kernels decode it as ---------------

struct Format {
  std::string spec;
  DeviceFormat device;
};

DeviceFormat float_format(CodecKind kind) {
  DeviceFormat f;
  f.kind = kind;
  f.bits = 16;
  return f;
}

DeviceFormat fp8_format(CodecKind kind, GroupAxis axis, bool scales_stored) {
  DeviceFormat f;
  f.kind = kind;
  f.bits = 8;
  f.axis = axis;
  f.scales_stored = scales_stored;
  return f;
}

DeviceFormat int_format(int bits, GroupAxis axis, int group, ScaleType scale_type, bool asymmetric) {
  DeviceFormat f;
  f.kind = CodecKind::integer;
  f.bits = static_cast<uint8_t>(bits);
  f.axis = axis;
  f.group = group;
  f.scale_type = scale_type;
  f.asymmetric = asymmetric;
  return f;
}

DeviceFormat micro_format(CodecKind kind, int group, float static_scale = 0.0f) {
  DeviceFormat f;
  f.kind = kind;
  f.bits = kind == CodecKind::mxfp8 ? 8 : 4;
  f.axis = GroupAxis::token;
  f.group = group;
  f.static_scale = static_scale;
  return f;
}

DeviceFormat ggml_format(CodecKind kind) {
  DeviceFormat f;
  f.kind = kind;
  return f;
}

// Every family, and within families the variants whose decoding differs: fp8 scale modes, integer
// bit widths (odd ones read byte by byte), groups wider and narrower than a lane's 8-channel run,
// tile lengths that are not powers of two, scale dtypes, code offsets that are not 8-byte aligned
// (int8 with one f16 scale), every ggml kind.
const std::vector<Format>& formats() {
  static const std::vector<Format> all = {
      {"f16", float_format(CodecKind::f16)},
      {"bf16", float_format(CodecKind::bf16)},
      {"fp8:format=e4m3,scale=dynamic,granularity=token", fp8_format(CodecKind::fp8_e4m3, GroupAxis::token, true)},
      {"fp8:format=e5m2,scale=unit", fp8_format(CodecKind::fp8_e5m2, GroupAxis::tensor, false)},
      {"fp8:format=e4m3,scale=static,value=0.05", fp8_format(CodecKind::fp8_e4m3, GroupAxis::tensor, true)},
      {"fp8:format=e5m2,scale=dynamic", fp8_format(CodecKind::fp8_e5m2, GroupAxis::tensor, true)},
      {"int:bits=8,axis=tensor,scale=f16", int_format(8, GroupAxis::tensor, 0, ScaleType::f16, false)},
      {"int:bits=8,axis=token", int_format(8, GroupAxis::token, 0, ScaleType::f32, false)},
      {"int:bits=4,axis=token,group=32,asym,scale=f16", int_format(4, GroupAxis::token, 32, ScaleType::f16, true)},
      {"int:bits=2,axis=channel,group=32,asym,scale=bf16",
       int_format(2, GroupAxis::channel, 32, ScaleType::bf16, true)},
      {"int:bits=3,axis=token", int_format(3, GroupAxis::token, 0, ScaleType::f32, false)},
      {"int:bits=5,axis=channel,group=24,asym", int_format(5, GroupAxis::channel, 24, ScaleType::f32, true)},
      {"int:bits=6,axis=token,group=4,scale=f16", int_format(6, GroupAxis::token, 4, ScaleType::f16, false)},
      {"int:bits=7,axis=channel", int_format(7, GroupAxis::channel, 0, ScaleType::f32, false)},
      {"int:bits=4,axis=token,group=2,asym,scale=bf16", int_format(4, GroupAxis::token, 2, ScaleType::bf16, true)},
      {"int:bits=3,axis=token,group=1,asym", int_format(3, GroupAxis::token, 1, ScaleType::f32, true)},
      {"int:bits=2,axis=token,group=16,asym,scale=f16", int_format(2, GroupAxis::token, 16, ScaleType::f16, true)},
      {"q8_0", ggml_format(CodecKind::q8_0)},
      {"q8_0:variant=x86", ggml_format(CodecKind::q8_0_x86)},
      {"q4_0", ggml_format(CodecKind::q4_0)},
      {"q4_1", ggml_format(CodecKind::q4_1)},
      {"q5_0", ggml_format(CodecKind::q5_0)},
      {"q5_1", ggml_format(CodecKind::q5_1)},
      {"iq4_nl", ggml_format(CodecKind::iq4_nl)},
      {"mxfp4", micro_format(CodecKind::mxfp4, 32)},
      {"mxfp4:block=16", micro_format(CodecKind::mxfp4, 16)},
      {"mxfp8", micro_format(CodecKind::mxfp8, 32)},
      {"nvfp4", micro_format(CodecKind::nvfp4, 16)},
      {"nvfp4:scale=static,value=0.004", micro_format(CodecKind::nvfp4, 16, 0.004f)},
  };
  return all;
}

const Format& format(const std::string& spec) {
  for (const Format& f : formats()) {
    if (f.spec == spec) return f;
  }
  throw std::invalid_argument("no test format " + spec);
}

// ---- caches filled with the CPU schemes' bytes ---------------------------------------------

// Keys with a few large channels and a per-channel offset (so asymmetric groups matter), values
// plain normal.
kvtune::Matrix kv_data(kvtune::Role role, int64_t tokens, int64_t head_dim, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  kvtune::Matrix x(tokens, head_dim);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < head_dim; ++c) {
      const float v = normal(engine);
      x(t, c) = role == kvtune::Role::key ? v * (c % 16 == 3 ? 6.0f : 1.5f) + 0.25f * static_cast<float>(c % 5) : v;
    }
  }
  return x;
}

struct HostCache {
  kc::CacheDesc desc;
  std::vector<uint8_t> bytes;  // sets * kv_heads regions, gaps filled with 0xff (NaN as f16)
  std::vector<float> values;   // [sets, kv_heads, capacity, head_dim] the CPU scheme's dequantize()
};

int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }

// `sets` region sets (1 for a cache every sequence shares), each region quantized by the CPU
// scheme from its own data; `pad` extra bytes after every region.
HostCache make_cache(const Format& f, kvtune::Role role, int64_t capacity, int32_t head_dim, int32_t kv_heads,
                     int32_t sets, bool shared, int64_t pad, uint64_t seed) {
  const kvtune::SchemePtr scheme = kvtune::builtin_registry().make(f.spec);
  const kvtune::codec::PackedLayout layout = kvtune::codec::packed_layout(f.device, capacity, head_dim);
  if (static_cast<int64_t>(scheme->footprint(capacity, head_dim)) != layout.bytes) {
    throw std::runtime_error(f.spec + ": the scheme's footprint is not packed_layout's");
  }
  HostCache c;
  c.desc.format = f.device;
  c.desc.head_dim = head_dim;
  c.desc.capacity = capacity;
  c.desc.kv_heads = kv_heads;
  c.desc.head_stride = round_up16(layout.bytes + pad);
  c.desc.seq_stride = shared ? 0 : round_up16(kv_heads * c.desc.head_stride + pad);
  const int64_t set_bytes = shared ? kv_heads * c.desc.head_stride : c.desc.seq_stride;
  c.bytes.assign(static_cast<size_t>(sets * set_bytes), 0xff);
  c.values.resize(static_cast<size_t>(int64_t{sets} * kv_heads * capacity * head_dim));
  kvtune::QuantContext ctx;
  ctx.role = role;
  for (int32_t s = 0; s < sets; ++s) {
    for (int32_t h = 0; h < kv_heads; ++h) {
      const kvtune::Matrix x =
          kv_data(role, capacity, head_dim, seed * 1000003 + static_cast<uint64_t>(s * kv_heads + h));
      const std::vector<std::byte> packed = scheme->quantize(x, ctx);
      std::memcpy(c.bytes.data() + s * set_bytes + h * c.desc.head_stride, packed.data(), packed.size());
      const int64_t region = int64_t{s} * kv_heads + h;
      kvtune::MatrixView out{c.values.data() + region * capacity * head_dim, capacity, head_dim};
      scheme->dequantize(packed, ctx, out);
    }
  }
  return c;
}

// ---- one attention problem --------------------------------------------------------------

struct Problem {
  const Format* k = nullptr;
  const Format* v = nullptr;
  int32_t head_dim = 128;
  int32_t group = 4;
  int32_t kv_heads = 2;
  std::vector<int32_t> seq_lens;
  int64_t capacity = 0;  // 0: the longest sequence
  bool shared = false;   // seq_stride = 0: every sequence reads the same regions
  int64_t pad = 0;       // bytes of 0xff after every region
  uint64_t seed = 1;
};

struct Prepared {
  Problem problem;
  int64_t capacity = 0, max_seq_len = 0;
  HostCache k, v;
  std::vector<float> q;  // [batch, kv_heads * group, head_dim]
  float softmax_scale = 0.0f;
};

Prepared prepare(const Problem& pr) {
  Prepared p;
  p.problem = pr;
  p.max_seq_len = *std::max_element(pr.seq_lens.begin(), pr.seq_lens.end());
  p.capacity = pr.capacity > 0 ? pr.capacity : p.max_seq_len;
  const int32_t batch = static_cast<int32_t>(pr.seq_lens.size());
  const int32_t sets = pr.shared ? 1 : batch;
  p.k = make_cache(*pr.k, kvtune::Role::key, p.capacity, pr.head_dim, pr.kv_heads, sets, pr.shared, pr.pad, pr.seed);
  p.v = make_cache(*pr.v, kvtune::Role::value, p.capacity, pr.head_dim, pr.kv_heads, sets, pr.shared, pr.pad,
                   pr.seed + 77);
  std::mt19937_64 engine(pr.seed + 5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.q.resize(static_cast<size_t>(int64_t{batch} * pr.kv_heads * pr.group * pr.head_dim));
  for (float& x : p.q) x = normal(engine);
  p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(pr.head_dim));
  return p;
}

// softmax(scale * q . k) v in float64 over the dequantized values.
std::vector<double> reference(const Prepared& p) {
  const Problem& pr = p.problem;
  const int64_t d = pr.head_dim, cap = p.capacity;
  const int32_t batch = static_cast<int32_t>(pr.seq_lens.size());
  std::vector<double> out(p.q.size(), 0.0);
  std::vector<double> logits;
  for (int32_t b = 0; b < batch; ++b) {
    const int64_t set = pr.shared ? 0 : b;
    const int64_t n = pr.seq_lens[static_cast<size_t>(b)];
    for (int32_t h = 0; h < pr.kv_heads; ++h) {
      const float* k = p.k.values.data() + (set * pr.kv_heads + h) * cap * d;
      const float* v = p.v.values.data() + (set * pr.kv_heads + h) * cap * d;
      for (int32_t g = 0; g < pr.group; ++g) {
        const int64_t head = (int64_t{b} * pr.kv_heads + h) * pr.group + g;
        const float* q = p.q.data() + head * d;
        logits.assign(static_cast<size_t>(n), 0.0);
        double m = -INFINITY;
        for (int64_t t = 0; t < n; ++t) {
          double s = 0.0;
          for (int64_t c = 0; c < d; ++c) s += double(q[c]) * double(k[t * d + c]);
          logits[static_cast<size_t>(t)] = double(p.softmax_scale) * s;
          m = std::max(m, logits[static_cast<size_t>(t)]);
        }
        double sum = 0.0;
        double* o = out.data() + head * d;
        for (int64_t t = 0; t < n; ++t) {
          const double w = std::exp(logits[static_cast<size_t>(t)] - m);
          sum += w;
          for (int64_t c = 0; c < d; ++c) o[c] += w * double(v[t * d + c]);
        }
        for (int64_t c = 0; c < d; ++c) o[c] /= sum;
      }
    }
  }
  return out;
}

int sm_count() {
  int n = 0;
  kc::check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
  return n;
}

// Runs the kernels with `num_splits` splits and returns `out`.
std::vector<float> run_device(const Prepared& p, int32_t num_splits) {
  const Problem& pr = p.problem;
  const int32_t batch = static_cast<int32_t>(pr.seq_lens.size());
  kc::DeviceBuffer<uint8_t> k_cache(p.k.bytes), v_cache(p.v.bytes);
  kc::DeviceBuffer<float> q(p.q), out(p.q.size());
  kc::DeviceBuffer<int32_t> seq_lens(pr.seq_lens);
  const size_t ws_bytes = kc::decode_attention_workspace_bytes(batch, pr.kv_heads, pr.group, pr.head_dim, num_splits);
  kc::DeviceBuffer<float> workspace(ws_bytes / sizeof(float));
  // NaN in out and the workspace, so a position the kernels fail to write shows up.
  kc::check(cudaMemset(out.data(), 0xff, out.bytes()), "cudaMemset");
  if (ws_bytes > 0) kc::check(cudaMemset(workspace.data(), 0xff, ws_bytes), "cudaMemset");

  kc::DecodeAttentionParams params;
  params.q = q.data();
  params.k_cache = k_cache.data();
  params.v_cache = v_cache.data();
  params.k = p.k.desc;
  params.v = p.v.desc;
  params.seq_lens = seq_lens.data();
  params.out = out.data();
  params.batch = batch;
  params.group = pr.group;
  params.max_seq_len = p.max_seq_len;
  params.num_splits = num_splits;
  params.softmax_scale = p.softmax_scale;
  params.workspace = ws_bytes > 0 ? workspace.data() : nullptr;
  kc::check(kc::decode_attention(params), "decode_attention");
  kc::check(cudaDeviceSynchronize(), "decode_attention kernels");
  return out.download();
}

// ||got - want|| / ||want|| and every value finite.
void expect_close(const std::vector<float>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  double num = 0.0, den = 0.0;
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) {
      ++bad;
      continue;
    }
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += want[i] * want[i];
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " outputs are not finite";
  ASSERT_GT(den, 0.0) << what;
  EXPECT_LE(std::sqrt(num / den), 1e-3) << what;
}

std::string describe(const Problem& pr) {
  std::string lens;
  for (size_t i = 0; i < pr.seq_lens.size() && i < 8; ++i) lens += (i ? "," : "") + std::to_string(pr.seq_lens[i]);
  if (pr.seq_lens.size() > 8) lens += ",...";
  return "K=" + pr.k->spec + " V=" + pr.v->spec + " D=" + std::to_string(pr.head_dim) +
         " group=" + std::to_string(pr.group) + " kv_heads=" + std::to_string(pr.kv_heads) +
         " batch=" + std::to_string(pr.seq_lens.size()) + " seq_lens=" + lens + (pr.shared ? " shared" : "") +
         (pr.pad > 0 ? " padded" : "");
}

// One problem at each split count (by default 1, the heuristic's and 5), against one reference.
void check_problem(const Problem& pr, std::vector<int32_t> splits = {}) {
  const Prepared p = prepare(pr);
  const std::vector<double> want = reference(p);
  const int32_t batch = static_cast<int32_t>(pr.seq_lens.size());
  if (splits.empty()) splits = {1, kc::choose_num_splits(batch, pr.kv_heads, p.max_seq_len, sm_count()), 5};
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  for (const int32_t s : splits) {
    expect_close(run_device(p, s), want, describe(pr) + " num_splits=" + std::to_string(s));
  }
}

// Batches mixing the odd lengths of the suite: 1, 2, 31, 257 and a capacity-long sequence.
const std::vector<int32_t> kOddLengths = {257, 1, 31, 2, 300};

class DecodeAttentionGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kc::device_count() == 0) {
      GTEST_SKIP() << "no CUDA device on this machine (" << kc::device_description() << ")";
    }
  }
};

TEST_F(DecodeAttentionGpu, EveryFormatAsKeysWithF16Values) {
  for (const Format& f : formats()) {
    check_problem({.k = &f, .v = &format("f16"), .seq_lens = kOddLengths, .seed = 11});
  }
}

TEST_F(DecodeAttentionGpu, EveryFormatAsValuesWithF16Keys) {
  for (const Format& f : formats()) {
    check_problem({.k = &format("f16"), .v = &f, .seq_lens = kOddLengths, .seed = 12});
  }
}

TEST_F(DecodeAttentionGpu, MixedPairs) {
  const std::pair<const char*, const char*> pairs[] = {
      {"int:bits=4,axis=token,group=32,asym,scale=f16", "q4_0"},
      {"fp8:format=e4m3,scale=dynamic,granularity=token", "int:bits=2,axis=channel,group=32,asym,scale=bf16"},
      {"q8_0", "bf16"},
      {"int:bits=8,axis=tensor,scale=f16", "fp8:format=e5m2,scale=unit"},
      {"iq4_nl", "q5_1"},
      {"int:bits=3,axis=token", "int:bits=5,axis=channel,group=24,asym"},
      {"bf16", "fp8:format=e4m3,scale=static,value=0.05"},
      {"q5_0", "int:bits=7,axis=channel"},
  };
  for (const auto& [k, v] : pairs) {
    check_problem({.k = &format(k), .v = &format(v), .group = 8, .seq_lens = kOddLengths, .seed = 13});
  }
}

// Every one of the 225 kernel instances: each K family with each V family (f16 and bf16 both, which
// share the half family's instances) at each head dim and group bound (groups 1, 3 and 8 run the
// bounds 1, 4 and 8), over odd lengths and several splits (so the merge runs too).
TEST_F(DecodeAttentionGpu, EveryFamilyPairAtEveryHeadDim) {
  const char* families[] = {"f16", "bf16", "fp8:format=e4m3,scale=dynamic,granularity=token",
                            "int:bits=4,axis=token,group=32,asym,scale=f16", "q4_0", "nvfp4"};
  for (const char* k : families) {
    for (const char* v : families) {
      for (const int32_t d : {64, 128, 256}) {
        for (const int32_t group : {1, 3, 8}) {
          check_problem({.k = &format(k), .v = &format(v), .head_dim = d, .group = group, .seq_lens = {1, 31, 257},
                         .seed = 14});
        }
      }
    }
  }
}

TEST_F(DecodeAttentionGpu, GroupsAndHeadDimsOverOddLengths) {
  const std::vector<int32_t> lens = {1, 2, 31, 257, 4099};
  for (const int32_t d : {64, 128, 256}) {
    for (const int32_t group : {1, 4, 8}) {
      check_problem(
          {.k = &format("f16"), .v = &format("f16"), .head_dim = d, .group = group, .seq_lens = lens, .seed = 21});
      check_problem({.k = &format("int:bits=4,axis=token,group=32,asym,scale=f16"),
                     .v = &format("q8_0"),
                     .head_dim = d,
                     .group = group,
                     .seq_lens = lens,
                     .seed = 22});
    }
  }
  // Runtime group sizes between the powers of two.
  for (const int32_t group : {2, 3, 5, 7}) {
    check_problem({.k = &format("q4_1"),
                   .v = &format("fp8:format=e4m3,scale=dynamic,granularity=token"),
                   .group = group,
                   .seq_lens = {33, 257},
                   .seed = 23});
  }
}

TEST_F(DecodeAttentionGpu, BatchOf64WithDifferentLengths) {
  std::mt19937_64 engine(31);
  std::uniform_int_distribution<int32_t> len(1, 600);
  std::vector<int32_t> lens(64);
  for (int32_t& n : lens) n = len(engine);
  lens[0] = 600;
  lens[1] = 1;
  check_problem({.k = &format("f16"), .v = &format("f16"), .group = 8, .seq_lens = lens, .seed = 32});
  check_problem({.k = &format("q4_0"),
                 .v = &format("int:bits=8,axis=token"),
                 .head_dim = 64,
                 .group = 1,
                 .seq_lens = lens,
                 .seed = 33});
}

TEST_F(DecodeAttentionGpu, OneSequenceOf131072Tokens) {
  check_problem({.k = &format("int:bits=8,axis=token"),
                 .v = &format("q4_0"),
                 .group = 4,
                 .kv_heads = 1,
                 .seq_lens = {131072},
                 .seed = 41},
                {1, kc::choose_num_splits(1, 1, 131072, sm_count())});
}

TEST_F(DecodeAttentionGpu, SharedCacheAndPaddedRegions) {
  // Four sequences of different lengths over one set of regions (seq_stride = 0), as the
  // evaluator runs many queries over one cache; then regions with 0xff gaps between them.
  check_problem({.k = &format("f16"),
                 .v = &format("q4_1"),
                 .seq_lens = {300, 1, 77, 299},
                 .capacity = 300,
                 .shared = true,
                 .seed = 51});
  check_problem({.k = &format("int:bits=3,axis=token"),
                 .v = &format("bf16"),
                 .seq_lens = {5, 300, 64},
                 .capacity = 333,
                 .pad = 48,
                 .seed = 52});
}

TEST_F(DecodeAttentionGpu, MoreSplitsThanTokens) {
  // Most splits of the short sequences see no token: they must weigh nothing, not NaN.
  check_problem({.k = &format("q5_0"), .v = &format("f16"), .group = 8, .seq_lens = {1, 2, 31, 40}, .seed = 61},
                {7, 40, 64});
}

// The decoders alone against decode_element, bit for bit, for every format at every head dim. The
// attention tests above see a decoder only through the attention's rounding (1e-3 relative), which
// would hide one off by an ulp, or wrong in a few elements. Rows of zeros (zero blocks and scales),
// rows 1000 times larger (saturation under static scales), rows of quarter steps (ties) and key-like
// rows; 67 tokens, so the int formats' 24-token tiles end partway.
TEST_F(DecodeAttentionGpu, DecodersMatchDecodeElementBitForBit) {
  constexpr int64_t kTokens = 67;
  for (const int32_t d : {64, 128, 256}) {
    kvtune::Matrix x = kv_data(kvtune::Role::key, kTokens, d, 71);
    for (int64_t t = 0; t < kTokens; ++t) {
      for (int64_t c = 0; c < d; ++c) {
        if (t % 7 == 0) x(t, c) = 0.0f;
        if (t % 7 == 1) x(t, c) *= 1000.0f;
        if (t % 7 == 2) x(t, c) = 0.25f * static_cast<float>((c * 5 + t) % 17 - 8);
      }
    }
    for (const Format& f : formats()) {
      SCOPED_TRACE(f.spec + " D=" + std::to_string(d));
      const kvtune::SchemePtr scheme = kvtune::builtin_registry().make(f.spec);
      kvtune::QuantContext ctx;
      ctx.role = kvtune::Role::key;
      const std::vector<std::byte> packed = scheme->quantize(x, ctx);
      const kvtune::codec::PackedLayout layout = kvtune::codec::packed_layout(f.device, kTokens, d);
      ASSERT_EQ(static_cast<int64_t>(packed.size()), layout.bytes);
      std::vector<uint8_t> bytes(static_cast<size_t>(round_up16(layout.bytes)), 0xff);
      std::memcpy(bytes.data(), packed.data(), packed.size());
      kc::CacheDesc desc;
      desc.format = f.device;
      desc.head_dim = d;
      desc.capacity = kTokens;
      desc.kv_heads = 1;
      desc.head_stride = static_cast<int64_t>(bytes.size());
      kc::DeviceBuffer<uint8_t> cache(bytes);
      kc::DeviceBuffer<float> out(static_cast<size_t>(kTokens * d));
      kc::check(cudaMemset(out.data(), 0xff, out.bytes()), "cudaMemset");
      kc::check(kc::decode_attention_decoders(desc, cache.data(), kTokens, out.data()), "decode_attention_decoders");
      kc::check(cudaDeviceSynchronize(), "decoders kernel");
      const std::vector<float> got = out.download();
      int64_t mismatches = 0;
      std::string first;
      for (int64_t t = 0; t < kTokens; ++t) {
        for (int64_t c = 0; c < d; ++c) {
          const float want = kvtune::codec::decode_element(layout, bytes.data(), t, c);
          const float have = got[static_cast<size_t>(t * d + c)];
          if (std::memcmp(&want, &have, sizeof want) == 0) continue;
          if (mismatches++ == 0) {
            auto bits = [](float v) {
              uint32_t u;
              std::memcpy(&u, &v, sizeof u);
              char buf[48];
              std::snprintf(buf, sizeof buf, "%.9g (0x%08x)", double(v), u);
              return std::string(buf);
            };
            first = "token " + std::to_string(t) + " channel " + std::to_string(c) + ": decode_element " + bits(want) +
                    ", the kernel's decoder " + bits(have);
          }
        }
      }
      EXPECT_EQ(mismatches, 0) << "first: " << first;
    }
  }
}

// ---- host-only: no device needed, never skipped ------------------------------------------

TEST(DecodeAttentionHost, TheDecodersAloneRefuseWhatTheKernelsWould) {
  const auto* fake_cache = reinterpret_cast<const uint8_t*>(uintptr_t{0x20000});
  auto* fake_out = reinterpret_cast<float*>(uintptr_t{0x40000});
  kc::CacheDesc desc;
  desc.format = float_format(CodecKind::f16);
  desc.head_dim = 128;
  desc.capacity = 1024;
  desc.kv_heads = 1;
  desc.head_stride = 1024 * 128 * 2;
  EXPECT_EQ(kc::decode_attention_decoders(desc, fake_cache, 1024, nullptr), cudaErrorInvalidValue) << "out null";
  EXPECT_EQ(kc::decode_attention_decoders(desc, fake_cache, 0, fake_out), cudaErrorInvalidValue) << "no tokens";
  EXPECT_EQ(kc::decode_attention_decoders(desc, fake_cache, 1025, fake_out), cudaErrorInvalidValue)
      << "beyond capacity";
  EXPECT_EQ(kc::decode_attention_decoders(desc, fake_cache + 8, 1024, fake_out), cudaErrorInvalidValue)
      << "misaligned cache";
  kc::CacheDesc f32 = desc;
  f32.format.kind = CodecKind::f32;
  f32.head_stride = 1024 * 128 * 4;  // the region an f32 cache needs: only the format is refused
  EXPECT_EQ(kc::decode_attention_decoders(f32, fake_cache, 1024, fake_out), cudaErrorInvalidValue) << "f32";
  kc::CacheDesc d96 = desc;
  d96.head_dim = 96;
  d96.head_stride = 1024 * 96 * 2;
  EXPECT_EQ(kc::decode_attention_decoders(d96, fake_cache, 1024, fake_out), cudaErrorInvalidValue) << "head_dim 96";
}

TEST(DecodeAttentionHost, EveryTestFormatIsSupportedAtEveryHeadDim) {
  for (const Format& f : formats()) {
    for (const int32_t d : {64, 128, 256}) {
      for (const int32_t group : {1, 8}) {
        EXPECT_EQ(kc::decode_attention_unsupported(f.device, f.device, d, group), "") << f.spec << " D=" << d;
      }
    }
  }
}

TEST(DecodeAttentionHost, UnsupportedSaysWhy) {
  const DeviceFormat f16 = float_format(CodecKind::f16);
  DeviceFormat f32 = float_format(CodecKind::f32);
  f32.bits = 32;
  auto why = [](const DeviceFormat& k, const DeviceFormat& v, int32_t d, int32_t g) {
    return kc::decode_attention_unsupported(k, v, d, g);
  };
  EXPECT_NE(why(f32, f16, 128, 4).find("K format: codec kind f32"), std::string::npos) << why(f32, f16, 128, 4);
  EXPECT_NE(why(f16, f32, 128, 4).find("V format: codec kind f32"), std::string::npos) << why(f16, f32, 128, 4);
  EXPECT_NE(why(f16, f16, 96, 4).find("head_dim 96"), std::string::npos);
  EXPECT_NE(why(f16, f16, 32, 4).find("head_dim 32"), std::string::npos);
  EXPECT_NE(why(f16, f16, 128, 0).find("group of 0"), std::string::npos);
  EXPECT_NE(why(f16, f16, 128, 9).find("group of 9"), std::string::npos);
  EXPECT_NE(why(int_format(9, GroupAxis::token, 0, ScaleType::f32, false), f16, 128, 1).find("9 bits"),
            std::string::npos);
  EXPECT_NE(why(f16, int_format(1, GroupAxis::token, 0, ScaleType::f32, false), 128, 1).find("1 bits"),
            std::string::npos);
  EXPECT_NE(why(int_format(4, GroupAxis::token, 48, ScaleType::f16, false), f16, 128, 1).find("48"), std::string::npos);
  DeviceFormat unknown = f16;
  unknown.kind = static_cast<CodecKind>(200);
  EXPECT_NE(why(f16, unknown, 128, 1).find("codec kind 200"), std::string::npos) << why(f16, unknown, 128, 1);
  // Every reason at once, K before V.
  const std::string all = why(f32, unknown, 96, 9);
  EXPECT_LT(all.find("head_dim 96"), all.find("group of 9"));
  EXPECT_LT(all.find("K format"), all.find("V format"));
}

TEST(DecodeAttentionHost, ChooseNumSplitsFillsTheDeviceWithSplitsOfAtLeast256Tokens) {
  EXPECT_EQ(kc::choose_num_splits(1, 8, 131072, 132), 66);  // 8 blocks -> 4 per SM on 132 SMs
  EXPECT_EQ(kc::choose_num_splits(1, 8, 4096, 132), 16);    // capped: 4096 / 16 = 256 tokens each
  EXPECT_EQ(kc::choose_num_splits(64, 8, 131072, 132), 2);
  EXPECT_EQ(kc::choose_num_splits(128, 8, 131072, 132), 1);  // 1024 blocks are enough already
  EXPECT_EQ(kc::choose_num_splits(1, 1, 300, 132), 1);       // too short to split
  EXPECT_EQ(kc::choose_num_splits(1, 1, 1, 132), 1);
  for (const int32_t bad : {0, -1}) {
    EXPECT_EQ(kc::choose_num_splits(bad, 8, 4096, 132), 1);
    EXPECT_EQ(kc::choose_num_splits(1, bad, 4096, 132), 1);
    EXPECT_EQ(kc::choose_num_splits(1, 8, bad, 132), 1);
    EXPECT_EQ(kc::choose_num_splits(1, 8, 4096, bad), 1);
  }
  for (const int32_t batch : {1, 3, 64}) {
    for (const int64_t t : {int64_t{1}, int64_t{255}, int64_t{256}, int64_t{4099}, int64_t{131072}}) {
      for (const int sms : {1, 108, 132}) {
        const int32_t s = kc::choose_num_splits(batch, 8, t, sms);
        EXPECT_GE(s, 1);
        if (s > 1) {
          EXPECT_GE(t / s, 256) << batch << " " << t << " " << sms;
        }
      }
    }
  }
}

TEST(DecodeAttentionHost, WorkspaceHoldsEverySplitsOutputAndStatistics) {
  EXPECT_EQ(kc::decode_attention_workspace_bytes(3, 8, 4, 128, 1), 0u);
  EXPECT_EQ(kc::decode_attention_workspace_bytes(3, 8, 4, 128, 16), size_t{3} * 8 * 4 * 16 * (128 + 2) * 4);
  EXPECT_EQ(kc::decode_attention_workspace_bytes(64, 8, 8, 256, 2), size_t{64} * 8 * 8 * 2 * (256 + 2) * 4);
  EXPECT_EQ(kc::decode_attention_workspace_bytes(0, 8, 4, 128, 16), 0u);
  EXPECT_EQ(kc::decode_attention_workspace_bytes(3, 8, 4, 128, 0), 0u);
}

TEST(DecodeAttentionHost, InvalidParamsAreRefusedBeforeAnyLaunch) {
  // Fake, aligned device addresses: every case below is refused before anything touches them.
  const auto* fake_q = reinterpret_cast<const float*>(uintptr_t{0x10000});
  const auto* fake_cache = reinterpret_cast<const uint8_t*>(uintptr_t{0x20000});
  const auto* fake_lens = reinterpret_cast<const int32_t*>(uintptr_t{0x30000});
  auto* fake_out = reinterpret_cast<float*>(uintptr_t{0x40000});
  auto* fake_ws = reinterpret_cast<float*>(uintptr_t{0x50000});
  const DeviceFormat f16 = float_format(CodecKind::f16);
  kc::CacheDesc desc;
  desc.format = f16;
  desc.head_dim = 128;
  desc.capacity = 1024;
  desc.kv_heads = 8;
  desc.head_stride = 1024 * 128 * 2;
  desc.seq_stride = 8 * desc.head_stride;
  kc::DecodeAttentionParams base;
  base.q = fake_q;
  base.k_cache = base.v_cache = fake_cache;
  base.k = base.v = desc;
  base.seq_lens = fake_lens;
  base.out = fake_out;
  base.batch = 2;
  base.group = 4;
  base.max_seq_len = 1000;
  base.num_splits = 2;
  base.softmax_scale = 0.125f;
  base.workspace = fake_ws;

  struct Mutation {
    const char* what;
    void (*apply)(kc::DecodeAttentionParams&);
  };
  const Mutation mutations[] = {
      {"q null", [](kc::DecodeAttentionParams& p) { p.q = nullptr; }},
      {"q misaligned", [](kc::DecodeAttentionParams& p) { p.q += 1; }},
      {"k_cache null", [](kc::DecodeAttentionParams& p) { p.k_cache = nullptr; }},
      {"v_cache misaligned", [](kc::DecodeAttentionParams& p) { p.v_cache += 8; }},
      {"seq_lens null", [](kc::DecodeAttentionParams& p) { p.seq_lens = nullptr; }},
      {"out null", [](kc::DecodeAttentionParams& p) { p.out = nullptr; }},
      {"batch 0", [](kc::DecodeAttentionParams& p) { p.batch = 0; }},
      {"group 0", [](kc::DecodeAttentionParams& p) { p.group = 0; }},
      {"group 9", [](kc::DecodeAttentionParams& p) { p.group = 9; }},
      {"head_dim mismatch", [](kc::DecodeAttentionParams& p) { p.v.head_dim = 64; }},
      {"head_dim 96", [](kc::DecodeAttentionParams& p) { p.k.head_dim = p.v.head_dim = 96; }},
      {"kv_heads mismatch", [](kc::DecodeAttentionParams& p) { p.v.kv_heads = 4; }},
      {"f32 keys", [](kc::DecodeAttentionParams& p) { p.k.format.kind = CodecKind::f32; }},
      {"max_seq_len 0", [](kc::DecodeAttentionParams& p) { p.max_seq_len = 0; }},
      {"max_seq_len beyond capacity", [](kc::DecodeAttentionParams& p) { p.max_seq_len = 1025; }},
      {"num_splits 0", [](kc::DecodeAttentionParams& p) { p.num_splits = 0; }},
      {"splits without workspace", [](kc::DecodeAttentionParams& p) { p.workspace = nullptr; }},
      {"softmax_scale NaN", [](kc::DecodeAttentionParams& p) { p.softmax_scale = NAN; }},
      {"head_stride below the region", [](kc::DecodeAttentionParams& p) { p.k.head_stride -= 16; }},
      {"head_stride unaligned", [](kc::DecodeAttentionParams& p) { p.v.head_stride += 8; }},
      {"seq_stride below the heads", [](kc::DecodeAttentionParams& p) { p.k.seq_stride = p.k.head_stride; }},
      {"capacity of 2^31 tokens",
       [](kc::DecodeAttentionParams& p) {
         p.k.capacity = int64_t{1} << 31;
         p.k.head_stride = p.k.capacity * 128 * 2;
         p.k.seq_stride = 8 * p.k.head_stride;
       }},
  };
  for (const Mutation& m : mutations) {
    kc::DecodeAttentionParams p = base;
    m.apply(p);
    EXPECT_EQ(kc::decode_attention(p), cudaErrorInvalidValue) << m.what;
  }
  // Without a device the unmutated parameters pass validation and fail only at the launch
  // (with a device they would launch on the fake addresses, so this runs only without one).
  if (kc::device_count() == 0) {
    const cudaError_t err = kc::decode_attention(base);
    EXPECT_NE(err, cudaErrorInvalidValue) << cudaGetErrorString(err);
    EXPECT_NE(err, cudaSuccess);
  }
}

TEST(DecodeAttentionHost, DeviceFormatsMatchTheCpuSchemes) {
  // The kernels decode bytes as packed_layout says; the reference uses the schemes' dequantize().
  // They must agree bit for bit, and a scheme that reports a device format must report these.
  for (const Format& f : formats()) {
    SCOPED_TRACE(f.spec);
    const kvtune::SchemePtr scheme = kvtune::builtin_registry().make(f.spec);
    if (const auto reported = scheme->device_format()) {
      EXPECT_EQ(reported->kind, f.device.kind);
      if (f.device.kind == CodecKind::integer) {
        EXPECT_EQ(reported->bits, f.device.bits);
        EXPECT_EQ(reported->axis, f.device.axis);
        EXPECT_EQ(reported->group, f.device.group);
        EXPECT_EQ(reported->scale_type, f.device.scale_type);
        EXPECT_EQ(reported->asymmetric, f.device.asymmetric);
      }
      if (kvtune::codec::is_fp8(f.device.kind)) {
        EXPECT_EQ(reported->axis == GroupAxis::token, f.device.axis == GroupAxis::token);
        EXPECT_EQ(reported->scales_stored, f.device.scales_stored);
      }
    }
    for (const int64_t tokens : {int64_t{1}, int64_t{37}}) {
      const kvtune::Matrix x = kv_data(kvtune::Role::key, tokens, 64, 7);
      const std::vector<std::byte> packed = scheme->quantize(x, {});
      const kvtune::codec::PackedLayout layout = kvtune::codec::packed_layout(f.device, tokens, 64);
      ASSERT_EQ(static_cast<int64_t>(packed.size()), layout.bytes);
      kvtune::Matrix want(tokens, 64);
      scheme->dequantize(packed, {}, want);
      const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t c = 0; c < 64; ++c) {
          const float got = kvtune::codec::decode_element(layout, bytes, t, c);
          ASSERT_EQ(kvtune::float_bits(got), kvtune::float_bits(want(t, c))) << "token " << t << " channel " << c;
        }
      }
    }
  }
}

}  // namespace
