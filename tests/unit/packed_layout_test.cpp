// kvtune/codecs/packed_layout.h against the CPU schemes, on the host: for every kind of device
// format, the layout's size is the scheme's footprint, decode_element is dequantize() bit for bit,
// and the encode steps the CUDA quantize kernel runs (encode_group, then encode_unit) write
// exactly quantize()'s bytes, for the whole block at once and, where the format allows appending,
// a few tokens at a time. The families take their footprint and offsets from packed_layout itself
// (the header says why); EveryBuiltinDeviceFormatIsItsSchemesLayout keeps a new family or a new
// parameter combination from slipping past these checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "kvtune/codecs/packed_layout.h"
#include "kvtune/conformance.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

using codec::PackedLayout;
using testing::make_scheme;

// A scheme under test: a spec, optionally calibrated on a sample first (fp8 scale=calibrated
// becomes scale=static with the fitted value).
struct LayoutCase {
  std::string spec;
  bool calibrated = false;
};

// Every device format kind; for int every bits value, axis and group, scale dtype and sym/asym
// at least twice (SpecListCoversEveryDeviceFormatOption checks it).
const std::vector<LayoutCase>& cases() {
  static const std::vector<LayoutCase> all = {
      {"int:bits=2,axis=tensor"},
      {"int:bits=3,axis=tensor,asym,scale=f16"},
      {"int:bits=5,axis=tensor,asym,scale=bf16"},
      {"int:bits=8,axis=tensor,scale=f16"},
      {"int:bits=4,axis=token"},
      {"int:bits=3,axis=token,asym"},
      {"int:bits=8,axis=token,asym"},
      {"int:bits=4,axis=token,group=32,asym,scale=bf16"},
      {"int:bits=5,axis=token,group=32,scale=f16"},
      {"int:bits=2,axis=token,group=32,scale=bf16"},
      {"int:bits=8,axis=channel"},
      {"int:bits=3,axis=channel,asym,scale=bf16"},
      {"int:bits=2,axis=channel,group=32,asym"},
      {"int:bits=5,axis=channel,group=32,asym,scale=bf16"},
      {"int:bits=4,axis=channel,group=32"},
      {"int:bits=4,axis=channel,group=128,scale=f16"},
      {"int:bits=8,axis=channel,group=128,asym,scale=f16"},
      {"fp8:format=e4m3,scale=unit"},
      {"fp8:format=e5m2,scale=unit"},
      {"fp8:format=e4m3,scale=static,value=0.125"},  // saturates the outlier channels
      {"fp8:format=e5m2,scale=static,value=0.0137"},
      {"fp8:format=e4m3,scale=dynamic,granularity=token"},
      {"fp8:format=e5m2,scale=dynamic,granularity=token"},
      {"fp8:format=e4m3,scale=dynamic"},
      {"fp8:format=e5m2,scale=dynamic,granularity=head"},
      {"fp8:format=e4m3,scale=calibrated"},
      {"fp8:format=e5m2,scale=calibrated"},
      {"fp8:format=e4m3,scale=calibrated", true},
      {"fp8:format=e5m2,scale=calibrated", true},
      {"q8_0"},
      {"q8_0:variant=x86"},
      {"q4_0"},
      {"q4_1"},
      {"q5_0"},
      {"q5_1"},
      {"iq4_nl"},
      {"f16"},
      {"bf16"},
      {"f32"},
      {"none"},
      {"mxfp4"},
      {"mxfp4:block=16"},
      {"mxfp4:block=16,round=away"},
      {"mxfp8"},
      {"nvfp4"},
      {"nvfp4:scale=static,value=0.004"},  // small blocks' E4M3 scales underflow to 0
      {"nvfp4:scale=calibrated"},
      {"nvfp4:scale=calibrated", true},
  };
  return all;
}

// gtest prints a failing parameter with this rather than as raw bytes.
void PrintTo(const LayoutCase& c, std::ostream* os) { *os << (c.calibrated ? "calibrated " : "") << c.spec; }

SchemePtr scheme_of(const LayoutCase& c) {
  SchemePtr s = make_scheme(c.spec);
  if (c.calibrated) s = s->calibrate(testing::normal_matrix(48, 64, 11, 3.0f), {});
  return s;
}

std::string case_name(const ::testing::TestParamInfo<LayoutCase>& info) {
  std::string name = info.param.calibrated ? "calibrated_" : "";
  for (char c : info.param.spec) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

// Rows that stress a quantizer, by row index mod 5: Gaussian with a x24 outlier channel, a
// negative x-9 one and a +4 offset one; half-integers from -7 to 7 (exact ties for a 4-bit symmetric
// per-token scale, s = 7/7); one constant; Gaussian with every third element exactly 0; all zeros.
Matrix awkward_block(int64_t tokens, int64_t head_dim, uint32_t seed) {
  std::mt19937 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix m(tokens, head_dim);
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t c = 0; c < head_dim; ++c) {
      switch (t % 5) {
        case 0:
          m(t, c) = normal(engine);
          break;
        case 1:
          m(t, c) = 0.5f * static_cast<float>(c % 29 - 14);
          break;
        case 2:
          m(t, c) = -0.8125f;
          break;
        case 3:
          m(t, c) = c % 3 == 0 ? 0.0f : normal(engine);
          break;
        default:
          m(t, c) = 0.0f;
      }
    }
    if (t % 5 == 0 || t % 5 == 3) {
      m(t, 1) *= 24.0f;
      m(t, head_dim - 2) = -9.0f * std::abs(m(t, head_dim - 2));
      m(t, 3) += 4.0f;
    }
  }
  return m;
}

std::vector<uint8_t> bytes_of(const std::vector<std::byte>& packed) {
  std::vector<uint8_t> out(packed.size());
  std::memcpy(out.data(), packed.data(), packed.size());
  return out;
}

// "" when equal, else the first differing byte.
std::string first_difference(const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " bytes, want " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      return "byte " + std::to_string(i) + " of " + std::to_string(got.size()) + " is " + std::to_string(got[i]) +
             ", quantize() wrote " + std::to_string(want[i]);
    }
  }
  return "";
}

// The source of an encode: x(t, c), counting reads of tokens outside [t0, t1) (a kernel appending
// those tokens has no others).
struct ChunkSource {
  ConstMatrixView x;
  int64_t t0, t1;
  int64_t* stray_reads;
  float operator()(int64_t t, int64_t c) const {
    if (t < t0 || t >= t1 || c < 0 || c >= x.cols) {
      ++*stray_reads;
      return 0.0f;
    }
    return x(t, c);
  }
};

// Encodes tokens [t0, t1) into `packed` the way the CUDA quantize kernel does: the groups those
// tokens touch, then their payload units.
void encode_tokens(const PackedLayout& L, uint8_t* packed, ConstMatrixView x, int64_t t0, int64_t t1,
                   int64_t& stray_reads) {
  const ChunkSource src{x, t0, t1, &stray_reads};
  int64_t g0, g1, u0, u1;
  codec::groups_of_tokens(L, t0, t1, g0, g1);
  for (int64_t g = g0; g < g1; ++g) codec::encode_group(L, packed, g, src);
  codec::units_of_tokens(L, t0, t1, u0, u1);
  for (int64_t u = u0; u < u1; ++u) codec::encode_unit(L, packed, u, src);
}

// Chunk ends for appending a block of `tokens`: odd sizes 1, 5, 3, 8, 2, 13, ... or, for per-channel
// groups of G tokens, 1, 2, 1, 3, ... groups; the last chunk ends at `tokens`.
std::vector<int64_t> chunk_ends(const DeviceFormat& f, int64_t tokens) {
  static const int64_t kOdd[] = {1, 5, 3, 8, 2, 13, 7};
  static const int64_t kGroups[] = {1, 2, 1, 3};
  const bool channel_groups = f.kind == CodecKind::integer && f.axis == GroupAxis::channel;
  std::vector<int64_t> ends;
  int64_t t = 0;
  for (size_t i = 0; t < tokens; ++i) {
    t += channel_groups ? kGroups[i % 4] * f.group : kOdd[i % 7];
    ends.push_back(std::min(t, tokens));
  }
  return ends;
}

class PackedLayoutMatchesScheme : public ::testing::TestWithParam<LayoutCase> {
 protected:
  // Checks (a) to (d) on one block. Stops at the first mismatch (a fatal failure), so a broken
  // layout reports once per shape rather than once per element.
  static void check_block(const Scheme& s, const DeviceFormat& f, ConstMatrixView x) {
    const int64_t T = x.rows, D = x.cols;
    const std::string shape = std::to_string(T) + "x" + std::to_string(D);
    const PackedLayout L = codec::packed_layout(f, T, D);

    // (a) the layout's size is the footprint.
    ASSERT_EQ(L.bytes, static_cast<int64_t>(s.footprint(T, D))) << shape;

    // (b) decode_element is dequantize() bit for bit.
    const std::vector<uint8_t> want = bytes_of(s.quantize(x, {}));
    ASSERT_EQ(static_cast<int64_t>(want.size()), L.bytes) << shape;
    Matrix y(T, D);
    s.dequantize(std::as_bytes(std::span(want)), {}, y);
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t c = 0; c < D; ++c) {
        const float got = codec::decode_element(L, want.data(), t, c);
        ASSERT_EQ(float_bits(got), float_bits(y(t, c)))
            << shape << " element (" << t << ", " << c << "): decode_element " << got << ", dequantize " << y(t, c);
      }
    }

    // (c) the encode steps over the whole block write quantize()'s bytes.
    std::vector<uint8_t> whole(static_cast<size_t>(L.bytes), 0);
    int64_t stray = 0;
    encode_tokens(L, whole.data(), x, 0, T, stray);
    EXPECT_EQ(stray, 0) << shape;
    ASSERT_EQ(first_difference(whole, want), "") << shape << ", whole block";

    // (d) appending a few tokens at a time writes the same bytes and reads only those tokens.
    if (codec::needs_whole_block(f)) return;
    std::vector<uint8_t> appended(static_cast<size_t>(L.bytes), 0);
    int64_t t0 = 0;
    for (int64_t t1 : chunk_ends(f, T)) {
      encode_tokens(L, appended.data(), x, t0, t1, stray);
      t0 = t1;
    }
    EXPECT_EQ(stray, 0) << shape << ": the appending encode read tokens outside its chunk";
    ASSERT_EQ(first_difference(appended, want), "") << shape << ", appended in chunks";
  }
};

TEST_P(PackedLayoutMatchesScheme, OnAwkwardBlocksOfEveryShape) {
  const SchemePtr s = scheme_of(GetParam());
  const std::optional<DeviceFormat> f = s->device_format();
  ASSERT_TRUE(f.has_value()) << s->spec();
  int checked = 0;
  for (int64_t T : {1, 7, 33, 130}) {
    for (int64_t D : {64, 128}) {
      if (!s->check_shape(T, D).empty()) continue;
      check_block(*s, *f, awkward_block(T, D, static_cast<uint32_t>(1000 * T + D)));
      if (HasFatalFailure()) return;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 8) << s->spec();  // every scheme listed takes every shape
}

// An all-zero block: every scale is fitted on zeros (a zero or unit scale, a zero span).
TEST_P(PackedLayoutMatchesScheme, OnAllZeroBlocks) {
  const SchemePtr s = scheme_of(GetParam());
  const std::optional<DeviceFormat> f = s->device_format();
  ASSERT_TRUE(f.has_value()) << s->spec();
  for (int64_t T : {1, 33}) {
    check_block(*s, *f, Matrix(T, 64));
    if (HasFatalFailure()) return;
  }
}

INSTANTIATE_TEST_SUITE_P(DeviceFormats, PackedLayoutMatchesScheme, ::testing::ValuesIn(cases()), case_name);

// The spec list reaches every codec kind and, for the integer codec, every option twice.
TEST(PackedLayout, SpecListCoversEveryDeviceFormatOption) {
  std::set<int> kinds;
  std::multiset<int> bits, axis_groups, scale_types, asym;
  std::multiset<std::pair<bool, bool>> fp8_modes;  // (stores scales, static scale)
  for (const LayoutCase& c : cases()) {
    const DeviceFormat f = *scheme_of(c)->device_format();
    kinds.insert(static_cast<int>(f.kind));
    if (f.kind == CodecKind::integer) {
      bits.insert(f.bits);
      axis_groups.insert(100 * static_cast<int>(f.axis) + f.group);
      scale_types.insert(static_cast<int>(f.scale_type));
      asym.insert(f.asymmetric);
    }
    if (codec::is_fp8(f.kind)) fp8_modes.insert({f.scales_stored, f.static_scale > 0.0f});
  }
  EXPECT_EQ(kinds.size(), 16u);
  for (int b : {2, 3, 4, 5, 8}) EXPECT_GE(bits.count(b), 2u) << b;
  const GroupAxis token = GroupAxis::token, channel = GroupAxis::channel, tensor = GroupAxis::tensor;
  for (int ag : {100 * int(token), 100 * int(token) + 32, 100 * int(channel), 100 * int(channel) + 32,
                 100 * int(channel) + 128, 100 * int(tensor)}) {
    EXPECT_GE(axis_groups.count(ag), 2u) << ag;
  }
  for (ScaleType t : {ScaleType::f32, ScaleType::f16, ScaleType::bf16}) EXPECT_GE(scale_types.count(int(t)), 2u);
  EXPECT_GE(asym.count(true), 2u);
  EXPECT_GE(asym.count(false), 2u);
  EXPECT_EQ(fp8_modes.count({false, false}), 2u);  // unit
  EXPECT_EQ(fp8_modes.count({true, true}), 4u);    // static, and calibrated once calibrate() ran
  EXPECT_EQ(fp8_modes.count({true, false}), 6u);   // dynamic, and calibrated before calibrate()
}

// SGLang's fp4_mx_block16 by hand (kvfp4_tensor.py FP4MXBlock16KVQuantizeUtil: the block's scale
// 2^ceil(log2(amax / 6)), codes from the E2M1 bounds compared with >=): amax 6 gives the scale 1, so
// every midpoint is a tie; round=away takes the larger magnitude, the default the even code.
TEST(PackedLayout, Mxfp4RoundAwayQuantizesABlockAsSglangDoes) {
  const std::vector<float> row = {6.0f, 0.25f, 1.25f, 2.5f, 5.0f, -0.25f, -1.25f, -2.5f,
                                  -5.0f, 0.75f, 1.75f, 3.5f, 0.0f, -0.0f, 0.5f, 3.0f};
  const std::vector<float> away = {6.0f, 0.5f, 1.5f, 3.0f, 6.0f, -0.5f, -1.5f, -3.0f,
                                   -6.0f, 1.0f, 2.0f, 4.0f, 0.0f, -0.0f, 0.5f, 3.0f};
  const std::vector<float> even = {6.0f, 0.0f, 1.0f, 2.0f, 4.0f, -0.0f, -1.0f, -2.0f,
                                   -4.0f, 1.0f, 2.0f, 4.0f, 0.0f, -0.0f, 0.5f, 3.0f};
  const ConstMatrixView x{row.data(), 1, 16};
  for (const auto& [spec, want] : {std::pair{"mxfp4:block=16,round=away", away}, std::pair{"mxfp4:block=16", even}}) {
    const SchemePtr s = make_scheme(spec);
    EXPECT_EQ(s->device_format()->ties_away, std::string(spec).find("away") != std::string::npos);
    const std::vector<std::byte> packed = s->quantize(x, {});
    EXPECT_EQ(std::to_integer<uint8_t>(packed[0]), 127) << spec;  // E8M0 of 2^0
    Matrix y(1, 16);
    s->dequantize(packed, {}, y);
    for (int c = 0; c < 16; ++c) {
      EXPECT_EQ(float_bits(y(0, c)), float_bits(want[size_t(c)])) << spec << " channel " << c;
    }
  }
  EXPECT_EQ(make_scheme("mxfp4:round=even")->spec(), "mxfp4");
  EXPECT_EQ(make_scheme("mxfp4:round=away,block=16")->spec(), "mxfp4:block=16,round=away");
  EXPECT_EQ(make_scheme("mxfp4:round=away")->footprint(64, 128), make_scheme("mxfp4")->footprint(64, 128));
}

TEST(PackedLayout, DeviceFormatsDescribeTheirSchemes) {
  const DeviceFormat q41 = *make_scheme("q4_1")->device_format();
  EXPECT_EQ(q41.kind, CodecKind::q4_1);
  EXPECT_EQ(q41.bits, 4);
  EXPECT_EQ(q41.axis, GroupAxis::token);
  EXPECT_EQ(q41.group, 32);
  EXPECT_EQ(q41.scale_type, ScaleType::f16);
  EXPECT_TRUE(q41.asymmetric);
  EXPECT_EQ(make_scheme("q8_0:variant=x86")->device_format()->kind, CodecKind::q8_0_x86);
  EXPECT_EQ(make_scheme("q8_0")->device_format()->kind, CodecKind::q8_0);
  EXPECT_EQ(make_scheme("q5_0")->device_format()->bits, 5);
  EXPECT_FALSE(make_scheme("iq4_nl")->device_format()->asymmetric);

  EXPECT_EQ(make_scheme("fp8:scale=static,value=0.375")->device_format()->static_scale, 0.375f);
  EXPECT_EQ(make_scheme("fp8:scale=dynamic")->device_format()->static_scale, 0.0f);
  EXPECT_EQ(make_scheme("fp8:scale=calibrated")->device_format()->static_scale, 0.0f);
  // calibrate() fixes amax / 448 of the sample.
  Matrix sample(2, 32, 1.0f);
  sample(1, 7) = -89.6f;
  const SchemePtr fitted = make_scheme("fp8:scale=calibrated")->calibrate(sample, {});
  EXPECT_EQ(fitted->device_format()->static_scale, 89.6f / 448.0f);
  EXPECT_TRUE(codec::needs_whole_block(*make_scheme("fp8:scale=calibrated")->device_format()));
  EXPECT_FALSE(codec::needs_whole_block(*fitted->device_format()));
}

using DequantizeBlock = void (*)(const uint8_t*, float*);

// Each ggml kind with ggml's own block dequantizer.
const std::pair<CodecKind, DequantizeBlock> kGgmlKinds[] = {
    {CodecKind::q8_0, ggml::dequantize_q8_0},     {CodecKind::q8_0_x86, ggml::dequantize_q8_0},
    {CodecKind::q4_0, ggml::dequantize_q4_0},     {CodecKind::q4_1, ggml::dequantize_q4_1},
    {CodecKind::q5_0, ggml::dequantize_q5_0},     {CodecKind::q5_1, ggml::dequantize_q5_1},
    {CodecKind::iq4_nl, ggml::dequantize_iq4_nl},
};

// ggml_element is ggml::dequantize_* element by element, on blocks quantized by the kind's own
// quantizer: Gaussian blocks with an outlier, a block of ties, a constant block.
TEST(PackedLayout, GgmlElementEqualsGgmlDequantize) {
  std::mt19937 engine(29);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const auto& [kind, dequantize] : kGgmlKinds) {
    for (int b = 0; b < 20; ++b) {
      float x[ggml::kBlock];
      for (int j = 0; j < ggml::kBlock; ++j) {
        x[j] = b == 0 ? 0.5f * static_cast<float>(j - 16) : (b == 1 ? 3.25f : normal(engine));
      }
      if (b > 1) x[b % ggml::kBlock] *= 40.0f;
      uint8_t block[ggml::kMaxBlockBytes] = {};
      codec::quantize_ggml_block(kind, x, block);
      float want[ggml::kBlock];
      dequantize(block, want);
      for (int j = 0; j < ggml::kBlock; ++j) {
        ASSERT_EQ(float_bits(codec::ggml_element(kind, block, j)), float_bits(want[j]))
            << "kind " << int(kind) << " block " << b << " element " << j;
      }
    }
  }
}

// ggml writes d = -0 for an all-zero q4_0/q5_0 block (0 / -8), so zeros come back as -0 there.
TEST(PackedLayout, GgmlElementOfAnAllZeroBlockIsZero) {
  for (const auto& [kind, dequantize] : kGgmlKinds) {
    const float zeros[ggml::kBlock] = {};
    uint8_t block[ggml::kMaxBlockBytes];
    std::memset(block, 0xa5, sizeof block);
    codec::quantize_ggml_block(kind, zeros, block);
    EXPECT_EQ(ggml::get_half(block), 0.0f) << int(kind);
    float want[ggml::kBlock];
    dequantize(block, want);
    for (int j = 0; j < ggml::kBlock; ++j) {
      const float got = codec::ggml_element(kind, block, j);
      ASSERT_EQ(got, 0.0f) << "kind " << int(kind) << " element " << j;
      ASSERT_EQ(float_bits(got), float_bits(want[j])) << "kind " << int(kind) << " element " << j;
    }
  }
}

// One source per layout (issue #13): every built-in scheme that reports a device_format() is laid
// out by packed_layout() of that format. PackedLayoutMatchesScheme proves it byte for byte for the
// specs of cases(); this test fails when a built-in family reports a device format but is missing
// from cases() (add it there), and checks every parameter combination the conformance suite
// enumerates (calibrated too) on shapes with partial groups and head dims other than 64 and 128:
// the footprint is the layout's size, and decode_element reads what dequantize() reads.
TEST(PackedLayout, EveryBuiltinDeviceFormatIsItsSchemesLayout) {
  std::set<std::string> listed;
  for (const LayoutCase& c : cases()) listed.insert(scheme_of(c)->family());
  const Matrix sample = testing::normal_matrix(40, 64, 5, 2.0f);
  const int64_t kTokens[] = {1, 2, 31, 32, 33, 64, 65, 129, 300};
  const int64_t kHeadDims[] = {32, 64, 96, 128, 160, 256};
  const std::pair<int64_t, int64_t> kDecodeShapes[] = {{33, 96}, {65, 64}, {3, 160}};
  int with_format = 0;
  for (const FamilyInfo* family : builtin_registry().families()) {
    for (const std::string& spec : conformance::enumerate_specs(*family, builtin_registry())) {
      const SchemePtr raw = make_scheme(spec);
      for (const SchemePtr& s : {raw, raw->calibrate(sample, {})}) {
        const std::optional<DeviceFormat> f = s->device_format();
        if (!f) continue;
        ++with_format;
        EXPECT_EQ(listed.count(s->family()), 1u)
            << s->spec() << ": family '" << s->family() << "' has a device format but no spec in cases()";
        for (int64_t T : kTokens) {
          for (int64_t D : kHeadDims) {
            if (!s->check_shape(T, D).empty()) continue;
            ASSERT_EQ(codec::packed_layout(*f, T, D).bytes, static_cast<int64_t>(s->footprint(T, D)))
                << s->spec() << " " << T << "x" << D;
          }
        }
        for (const auto& [T, D] : kDecodeShapes) {
          if (!s->check_shape(T, D).empty()) continue;
          const PackedLayout L = codec::packed_layout(*f, T, D);
          const std::vector<uint8_t> packed = bytes_of(s->quantize(awkward_block(T, D, 7), {}));
          ASSERT_EQ(static_cast<int64_t>(packed.size()), L.bytes) << s->spec() << " " << T << "x" << D;
          Matrix y(T, D);
          s->dequantize(std::as_bytes(std::span(packed)), {}, y);
          for (int64_t t = 0; t < T; ++t) {
            for (int64_t c = 0; c < D; ++c) {
              ASSERT_EQ(float_bits(codec::decode_element(L, packed.data(), t, c)), float_bits(y(t, c)))
                  << s->spec() << " " << T << "x" << D << " element (" << t << ", " << c << ")";
            }
          }
        }
      }
    }
  }
  EXPECT_GE(with_format, static_cast<int>(cases().size()));
}

// Hand-computed offsets: int:bits=3,axis=channel,group=32,asym,scale=bf16 on a [33, 64] block has
// two token blocks of 64 groups, 2-byte scales then minima, then ceil(33*64*3/8) code bytes.
TEST(PackedLayout, IntegerOffsetsByHand) {
  const DeviceFormat f = *make_scheme("int:bits=3,axis=channel,group=32,asym,scale=bf16")->device_format();
  const PackedLayout L = codec::packed_layout(f, 33, 64);
  EXPECT_EQ(L.rows_per_tile, 32);
  EXPECT_EQ(L.cols_per_group, 1);
  EXPECT_EQ(L.groups, 128);
  EXPECT_EQ(L.min_offset, 256);
  EXPECT_EQ(L.code_offset, 512);
  EXPECT_EQ(L.bytes, 512 + 792);
  EXPECT_EQ(codec::group_index(L, 32, 5), 69);
  EXPECT_EQ(codec::packed_layout(f, 0, 64).bytes, 0);
}

}  // namespace
}  // namespace kvtune
