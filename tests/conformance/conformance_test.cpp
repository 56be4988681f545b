// One conformance suite instantiated over every registered scheme (DESIGN §3, STYLE.md "Testing"):
// the specs are enumerated from each family's parameter domains, so a new family or parameter is
// covered without touching this file.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <set>

#include "kvtune/conformance.h"
#include "kvtune/error.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

// Every combination the registry accepts, by canonical spec (kvtune/conformance.h enumerates them
// from the parameter domains, as check-plugin does for a plugin).
std::vector<std::string> all_specs() {
  std::set<std::string> out;
  for (const FamilyInfo* f : builtin_registry().families()) {
    for (const std::string& spec : conformance::enumerate_specs(*f, builtin_registry())) out.insert(spec);
  }
  return {out.begin(), out.end()};
}

// "int:bits=4,asym" -> "int_bits_4_asym": a spec as a test name.
std::string spec_test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string name;
  for (char c : param.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

using conformance::Shape;

// Each test runs the check of the same name in kvtune/conformance.h (shared with `kvtune
// check-plugin`) and fails with its message.
class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  SchemePtr scheme() const { return builtin_registry().make(GetParam()); }
  std::vector<Shape> shapes() const { return conformance::accepted_shapes(*scheme()); }
  static Matrix keys_like(Shape s, uint64_t seed) { return conformance::keys_like(s, seed); }

  static Matrix roundtrip(const Scheme& s, const Matrix& x) {
    Matrix y(x.rows(), x.cols());
    s.roundtrip(x, {}, y);
    return y;
  }

  void expect_check(const char* name) const {
    const std::string why = conformance::run_check(name, *scheme(), builtin_registry());
    EXPECT_TRUE(why.empty()) << name << ": " << why;
  }
};

TEST_P(Conformance, AcceptsAtLeastOneShape) { expect_check("accepts_a_shape"); }

TEST_P(Conformance, CanonicalSpecRoundTrips) {
  expect_check("canonical_spec_round_trips");
  EXPECT_EQ(scheme()->spec(), GetParam());
}

TEST_P(Conformance, RoundtripEqualsDequantizeOfQuantizeBitForBit) {
  expect_check("roundtrip_equals_dequantize_of_quantize");
}

TEST_P(Conformance, FootprintEqualsPackedSize) { expect_check("footprint_equals_packed_size"); }

TEST_P(Conformance, IsDeterministic) { expect_check("deterministic"); }

TEST_P(Conformance, ZeroBlockStaysZero) { expect_check("zero_block_stays_zero"); }

TEST_P(Conformance, ConstantBlockIsKept) { expect_check("constant_block_is_kept"); }

TEST_P(Conformance, QuantizingARoundTrippedTensorChangesNothing) { expect_check("requantizing_is_a_fixed_point"); }

TEST_P(Conformance, DequantizeRejectsAPackedBlockOfAnyOtherSize) { expect_check("dequantize_rejects_other_sizes"); }

// Schemes may depend on the role (llama.cpp rotates K and V in different groups): the fused and
// packed paths must agree for values too.
TEST_P(Conformance, ValueRoleRoundtripEqualsDequantizeOfQuantize) {
  expect_check("value_role_roundtrip_equals_dequantize_of_quantize");
}

// Whatever the bits, a quantizer never moves a value by more than the block's whole range.
TEST_P(Conformance, OutputIsFiniteAndWithinTheBlockRange) { expect_check("output_finite_and_within_block_range"); }

TEST_P(Conformance, RefusedShapesThrowInputError) { expect_check("refused_shapes_throw_input_error"); }

// What a CUDA kernel reads through the scheme's device_format is what dequantize gives.
TEST_P(Conformance, DeviceFormatMatchesPackedLayout) { expect_check("device_format_matches_packed_layout"); }

// A scheme that declares it keeps its values in any channel order (a key layout skips it) does.
TEST_P(Conformance, ChannelOrderInvariant) { expect_check("reversing_channels_reverses_the_round_trip"); }

// check-plugin runs exactly these checks; a check added to the library needs a test here too.
TEST(ConformanceCoverage, EveryLibraryCheckHasATest) { EXPECT_EQ(conformance::checks().size(), 14u); }

INSTANTIATE_TEST_SUITE_P(AllRegisteredSchemes, Conformance, ::testing::ValuesIn(all_specs()),
                         spec_test_name);

// Where the scales are stored in 16 bits the fixed point is exact, bit for bit.
class SixteenBitScales : public Conformance {};

TEST_P(SixteenBitScales, MakeRequantizingExact) {
  for (Shape shape : shapes()) {
    const Matrix once = roundtrip(*scheme(), keys_like(shape, 6));
    EXPECT_EQ(roundtrip(*scheme(), once), once);
  }
}

std::vector<std::string> sixteen_bit_scale_specs() {
  std::vector<std::string> out;
  for (const std::string& spec : all_specs()) {
    if (spec.rfind("int:", 0) == 0 && spec.find("rotation") == std::string::npos &&
        (spec.find("scale=f16") != std::string::npos || spec.find("scale=bf16") != std::string::npos)) {
      out.push_back(spec);
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(IntWith16BitScales, SixteenBitScales, ::testing::ValuesIn(sixteen_bit_scale_specs()),
                         spec_test_name);

// A scheme that declares rows_independent (SchemeTraits) round-trips a slice of rows to the bits
// those rows have inside the whole block: the rotation wrapper then goes a few rows at a time. The
// first row alone and the rest together, in every accepted shape of two or more tokens.
class RowsIndependent : public Conformance {};

TEST_P(RowsIndependent, ASliceOfRowsRoundTripsToTheWholeBlocksBits) {
  const SchemePtr s = scheme();
  ASSERT_TRUE(s->traits().rows_independent);
  int64_t slices = 0;
  for (Shape shape : shapes()) {
    if (shape.tokens < 2) continue;
    const Matrix x = keys_like(shape, 11);
    const Matrix whole = roundtrip(*s, x);
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, shape.tokens - 1}}) {
      if (!s->check_shape(count, shape.head_dim).empty()) continue;
      Matrix part(count, shape.head_dim);
      s->roundtrip(x.view().row_range(first, count), {}, part);
      ++slices;
      for (int64_t i = 0; i < part.size(); ++i) {
        ASSERT_EQ(float_bits(part.data()[i]), float_bits(whole.data()[first * shape.head_dim + i]))
            << shape.tokens << "x" << shape.head_dim << ": rows " << first << ".." << first + count - 1
            << " alone, element " << i << ": " << part.data()[i] << " against " << whole.data()[first * shape.head_dim + i];
      }
    }
  }
  EXPECT_GT(slices, 0) << "no accepted shape has a slice to compare";
}

std::vector<std::string> rows_independent_specs() {
  std::vector<std::string> out;
  for (const std::string& spec : all_specs()) {
    if (builtin_registry().make(spec)->traits().rows_independent) out.push_back(spec);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(DeclaredRowsIndependent, RowsIndependent, ::testing::ValuesIn(rows_independent_specs()),
                         spec_test_name);

// A scheme that declares row_block (SchemeTraits) round-trips a slice of whole blocks, starting on a
// multiple of it, to the bits those rows have inside the whole block: the evaluator then goes a
// few blocks at a time. A cache of two and a half blocks, at the first accepted head size: the
// first block alone, the second alone, and the rest from the second on (the last block partial).
class RowBlocksIndependent : public Conformance {};

TEST_P(RowBlocksIndependent, ASliceOfWholeBlocksRoundTripsToTheWholeBlocksBits) {
  const SchemePtr s = scheme();
  const int64_t block = s->traits().row_block;
  ASSERT_GT(block, 0);
  ASSERT_FALSE(s->traits().rows_independent);
  const Shape shape{2 * block + block / 2 + 1, shapes().front().head_dim};
  ASSERT_TRUE(s->check_shape(shape.tokens, shape.head_dim).empty()) << s->check_shape(shape.tokens, shape.head_dim);
  const Matrix x = keys_like(shape, 13);
  const Matrix whole = roundtrip(*s, x);
  for (const auto& [first, count] :
       {std::pair<int64_t, int64_t>{0, block}, {block, block}, {block, shape.tokens - block}}) {
    Matrix part(count, shape.head_dim);
    s->roundtrip(x.view().row_range(first, count), {}, part);
    for (int64_t i = 0; i < part.size(); ++i) {
      ASSERT_EQ(float_bits(part.data()[i]), float_bits(whole.data()[first * shape.head_dim + i]))
          << shape.tokens << "x" << shape.head_dim << ": rows " << first << ".." << first + count - 1
          << " alone, element " << i << ": " << part.data()[i] << " against " << whole.data()[first * shape.head_dim + i];
    }
  }
}

std::vector<std::string> row_block_specs() {
  std::vector<std::string> out;
  for (const std::string& spec : all_specs()) {
    if (builtin_registry().make(spec)->traits().row_block > 0) out.push_back(spec);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(DeclaredRowBlocks, RowBlocksIndependent, ::testing::ValuesIn(row_block_specs()),
                         spec_test_name);

// Who declares it: int per channel in groups of tokens, and a rotation around it; not int per
// channel over the whole block, nor a token policy around a grouped one.
TEST(ConformanceCoverage, RowBlocksAreDeclaredWhereScalesSpanGroupsOfTokens) {
  auto block = [](const char* spec) { return builtin_registry().make(spec)->traits().row_block; };
  EXPECT_EQ(block("int:bits=4,axis=channel,group=32,asym"), 32);
  EXPECT_EQ(block("int:bits=2,axis=channel,group=128"), 128);
  EXPECT_EQ(block("int:bits=4,axis=channel,group=32,rotation=hadamard"), 32);
  for (const char* spec : {"int:bits=4,axis=channel", "int:bits=4,axis=token,group=32", "q4_0",
                           "int:bits=4,axis=channel,group=32,sink_tokens=4"}) {
    EXPECT_EQ(block(spec), 0) << spec;
  }
}

// A scheme that fixes its scales on a block (Scheme::with_scales_fixed_on) hands back one whose rows
// are independent and whose slices round-trip to the bits the whole block has through the scheme
// itself, by the fused path and by quantize + dequantize alike: the evaluator then goes a few rows
// at a time. The first row alone and the rest together, in every accepted shape of two or more
// tokens.
class ScalesFixedOnABlock : public Conformance {};

TEST_P(ScalesFixedOnABlock, SlicesRoundTripToTheWholeBlocksBits) {
  const SchemePtr s = scheme();
  int64_t slices = 0;
  for (Shape shape : shapes()) {
    if (shape.tokens < 2) continue;
    const Matrix x = keys_like(shape, 12);
    const SchemePtr fixed = s->with_scales_fixed_on(x);
    if (!fixed) continue;
    EXPECT_TRUE(fixed->traits().rows_independent);
    // A device form must carry the fixed scale (fp8's and nvfp4's copies: a static one), or the
    // kernels would fit their own; int's copy has none.
    if (const std::optional<DeviceFormat> f = fixed->device_format()) {
      EXPECT_NE(f->static_scale, 0.0f) << "a device form without the fixed scale";
    }
    const Matrix whole = roundtrip(*s, x);
    for (const auto& [first, count] : {std::pair<int64_t, int64_t>{0, 1}, {1, shape.tokens - 1}}) {
      const ConstMatrixView rows = x.view().row_range(first, count);
      Matrix fused(count, shape.head_dim), unfused(count, shape.head_dim);
      fixed->roundtrip(rows, {}, fused);
      fixed->dequantize(fixed->quantize(rows, {}), {}, unfused);
      ++slices;
      for (int64_t i = 0; i < fused.size(); ++i) {
        const float w = whole.data()[first * shape.head_dim + i];
        ASSERT_EQ(float_bits(fused.data()[i]), float_bits(w))
            << shape.tokens << "x" << shape.head_dim << ": rows " << first << ".." << first + count - 1
            << ", element " << i << ": " << fused.data()[i] << " against " << w;
        ASSERT_EQ(float_bits(unfused.data()[i]), float_bits(w))
            << shape.tokens << "x" << shape.head_dim << ": rows " << first << ".." << first + count - 1
            << " by quantize + dequantize, element " << i << ": " << unfused.data()[i] << " against " << w;
      }
    }
  }
  EXPECT_GT(slices, 0) << "no accepted shape has scales to fix";
}

std::vector<std::string> scales_fixed_specs() {
  std::vector<std::string> out;
  for (const std::string& spec : all_specs()) {
    const SchemePtr s = builtin_registry().make(spec);
    for (Shape shape : conformance::accepted_shapes(*s)) {
      if (shape.tokens >= 2 && s->with_scales_fixed_on(conformance::keys_like(shape, 12))) {
        out.push_back(spec);
        break;
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(OffersScalesFixedOnABlock, ScalesFixedOnABlock, ::testing::ValuesIn(scales_fixed_specs()),
                         spec_test_name);

// Who offers it: int per tensor and per channel with one group of tokens over the block, fp8 and
// nvfp4 with a scale fitted on the block; not int in groups of tokens (several sets of scales), nor
// a scheme whose rows are independent already.
TEST(ConformanceCoverage, ScalesAreFixedOnABlockWhereOneSetSpansItsTokens) {
  const Matrix x = conformance::keys_like({64, 128}, 12);
  auto offers = [&](const char* spec) { return builtin_registry().make(spec)->with_scales_fixed_on(x) != nullptr; };
  for (const char* spec : {"int:bits=4,axis=channel", "int:bits=8,axis=tensor", "int:bits=2,axis=channel,asym",
                           "int:bits=4,axis=channel,group=64", "fp8:scale=dynamic", "fp8:format=e5m2,scale=calibrated",
                           "nvfp4", "nvfp4:scale=calibrated"}) {
    EXPECT_TRUE(offers(spec)) << spec;
  }
  for (const char* spec : {"int:bits=4,axis=channel,group=32", "int:bits=4,axis=token", "q4_0",
                           "fp8:scale=dynamic,granularity=token", "fp8:scale=static,value=0.5", "fp8", "mxfp4"}) {
    EXPECT_FALSE(offers(spec)) << spec;
  }
}

// Who declares it: ggml blocks, per-token int, fp8 with a per-token or given scale, the MX formats,
// the float formats, and a rotation around any of them; not a scale over the block's tokens
// (int per channel, fp8 and nvfp4 dynamic per tensor) nor a token policy (sinks are rows by index).
TEST(ConformanceCoverage, RowsIndependentIsDeclaredWhereRowsRoundTripAlone) {
  auto declared = [](const char* spec) { return builtin_registry().make(spec)->traits().rows_independent; };
  for (const char* spec : {"q4_0", "iq4_nl", "int:bits=4,axis=token,group=32", "fp8:scale=dynamic,granularity=token",
                           "fp8", "mxfp4", "f16", "q4_0:rotation=hadamard", "int:bits=8,axis=token,rotation=random"}) {
    EXPECT_TRUE(declared(spec)) << spec;
  }
  for (const char* spec : {"int:bits=4,axis=channel", "int:bits=8,axis=tensor", "fp8:scale=dynamic", "fp8:scale=calibrated",
                           "nvfp4", "q4_0:sink_tokens=4"}) {
    EXPECT_FALSE(declared(spec)) << spec;
  }
}

// Every registered family contributes at least one spec.
TEST(ConformanceCoverage, EveryFamilyIsInstantiated) {
  const std::vector<std::string> specs = all_specs();
  for (const FamilyInfo* f : builtin_registry().families()) {
    const bool found = std::any_of(specs.begin(), specs.end(), [&](const std::string& s) {
      return s == f->name || s.rfind(f->name + ":", 0) == 0;
    });
    EXPECT_TRUE(found) << f->name;
  }
}

}  // namespace
}  // namespace kvtune
