// One conformance suite instantiated over every registered scheme (DESIGN §3, STYLE.md "Testing"):
// the specs are enumerated from each family's parameter domains, so a new family or parameter is
// covered without touching this file.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <set>

#include "kvtune/error.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

// Values to try for one parameter: its examples, else the domain's ends (and middle for small ranges), every choice,
// the flag on and off. Unset is always one of the options.
std::vector<std::optional<std::string>> values_of(const ParamDomain& d) {
  std::vector<std::optional<std::string>> v;
  if (d.default_value.empty()) v.push_back(std::nullopt);
  switch (d.kind) {
    case ParamDomain::Kind::integer:
      if (!d.examples.empty()) {
        for (const std::string& e : d.examples) v.push_back(e);
        break;
      }
      v.push_back(std::to_string(d.min));
      if (d.max - d.min <= 16) v.push_back(std::to_string((d.min + d.max) / 2));
      v.push_back(std::to_string(d.max));
      break;
    case ParamDomain::Kind::choice:
      for (const std::string& c : d.choices) v.push_back(c);
      break;
    case ParamDomain::Kind::flag:
      v.push_back("");
      break;
    case ParamDomain::Kind::real:
      v.push_back(d.default_value.empty() ? std::string("1") : d.default_value);
      break;
  }
  return v;
}

// Every combination the registry accepts (cross-parameter refusals are skipped), by canonical spec.
std::vector<std::string> all_specs() {
  std::set<std::string> out;
  for (const FamilyInfo* f : builtin_registry().families()) {
    std::vector<std::string> partial = {""};
    for (const ParamDomain& d : f->params) {
      std::vector<std::string> next;
      for (const std::string& p : partial) {
        for (const auto& v : values_of(d)) {
          if (!v) {
            next.push_back(p);
            continue;
          }
          const std::string item = d.kind == ParamDomain::Kind::flag ? d.name : d.name + "=" + *v;
          next.push_back(p.empty() ? item : p + "," + item);
        }
      }
      partial = std::move(next);
    }
    // The family's default spec also runs under each rotation policy.
    partial.push_back("rotation=hadamard");
    partial.push_back("rotation=hadamard,rotation_group=16");
    partial.push_back("sink_tokens=2,residual_window=3,block_tokens=2");
    for (const std::string& p : partial) {
      try {
        out.insert(builtin_registry().make(p.empty() ? f->name : f->name + ":" + p)->spec());
      } catch (const InputError&) {
      }
    }
  }
  return {out.begin(), out.end()};
}

// "int:bits=4,asym" -> "int_bits_4_asym": a spec as a test name.
std::string spec_test_name(const ::testing::TestParamInfo<std::string>& param) {
  std::string name;
  for (char c : param.param) name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return name;
}

struct Shape {
  int64_t tokens, head_dim;
};
// Single token, odd lengths, a partial last group and a typical head.
const Shape kShapes[] = {{1, 16}, {7, 32}, {33, 64}, {64, 128}};

class Conformance : public ::testing::TestWithParam<std::string> {
 protected:
  SchemePtr scheme() const { return builtin_registry().make(GetParam()); }

  // Shapes this scheme can store (a token group must divide head_dim, for instance).
  std::vector<Shape> shapes() const {
    std::vector<Shape> ok;
    for (Shape s : kShapes) {
      if (scheme()->check_shape(s.tokens, s.head_dim).empty()) ok.push_back(s);
    }
    return ok;
  }

  // Normal data with two outlier channels and an offset channel, as keys have.
  static Matrix keys_like(Shape s, uint64_t seed) {
    Matrix m = testing::normal_matrix(s.tokens, s.head_dim, seed);
    for (int64_t r = 0; r < s.tokens; ++r) {
      m(r, 1) *= 20.0f;
      m(r, s.head_dim - 2) *= 20.0f;
      m(r, 3) += 4.0f;
    }
    return m;
  }

  static Matrix roundtrip(const Scheme& s, const Matrix& x) {
    Matrix y(x.rows(), x.cols());
    s.roundtrip(x, {}, y);
    return y;
  }
};

TEST_P(Conformance, AcceptsAtLeastOneShape) { EXPECT_FALSE(shapes().empty()); }

TEST_P(Conformance, CanonicalSpecRoundTrips) {
  EXPECT_EQ(builtin_registry().make(scheme()->spec())->spec(), scheme()->spec());
  EXPECT_EQ(scheme()->spec(), GetParam());
}

TEST_P(Conformance, RoundtripEqualsDequantizeOfQuantizeBitForBit) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    const Matrix x = keys_like(shape, 1);
    Matrix via_packed(shape.tokens, shape.head_dim);
    s->dequantize(s->quantize(x, {}), {}, via_packed);
    const Matrix fused = roundtrip(*s, x);
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(float_bits(fused.data()[i]), float_bits(via_packed.data()[i]))
          << "element " << i << " of " << shape.tokens << "x" << shape.head_dim;
    }
  }
}

TEST_P(Conformance, FootprintEqualsPackedSize) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    EXPECT_EQ(s->quantize(keys_like(shape, 2), {}).size(), s->footprint(shape.tokens, shape.head_dim))
        << shape.tokens << "x" << shape.head_dim;
  }
}

TEST_P(Conformance, IsDeterministic) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    const Matrix x = keys_like(shape, 3);
    EXPECT_EQ(s->quantize(x, {}), s->quantize(x, {}));
    EXPECT_EQ(roundtrip(*s, x), roundtrip(*s, x));
  }
}

TEST_P(Conformance, ZeroBlockStaysZero) {
  for (Shape shape : shapes()) {
    const Matrix zeros(shape.tokens, shape.head_dim);
    EXPECT_EQ(roundtrip(*scheme(), zeros), zeros);
  }
}

// Kept to the precision of the stored scale: a bf16 scale is good to 2^-9 relative. Under a
// rotation a constant row becomes one large coefficient per group and zeros, which formats
// without an exact zero code (iq4_nl, min/max types) cannot keep; the row mean (the large
// coefficient) must still survive, to within half a step of a 2-mantissa-bit float (fp8 e5m2).
TEST_P(Conformance, ConstantBlockIsKept) {
  const bool rotated = GetParam().find("rotation=hadamard") != std::string::npos;
  for (Shape shape : shapes()) {
    const Matrix constant(shape.tokens, shape.head_dim, -2.5f);
    const Matrix y = roundtrip(*scheme(), constant);
    for (int64_t r = 0; r < y.rows(); ++r) {
      double mean = 0;
      for (int64_t c = 0; c < y.cols(); ++c) {
        if (!rotated) {
          ASSERT_NEAR(y(r, c), -2.5f, 2.5f / 256) << r << ", " << c;
        }
        mean += y(r, c);
      }
      ASSERT_NEAR(mean / double(y.cols()), -2.5, rotated ? 2.5 / 8 : 2.5 / 256) << "row " << r;
    }
  }
}

// The round trip is a fixed point. Scales stored in f16/bf16 make it exact; a recomputed float32
// scale may move by an ulp, so values may move by float32 rounding of the block's magnitude.
TEST_P(Conformance, QuantizingARoundTrippedTensorChangesNothing) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    const Matrix once = roundtrip(*s, keys_like(shape, 4));
    const Matrix twice = roundtrip(*s, once);
    float amax = 0;
    for (int64_t i = 0; i < once.size(); ++i) amax = std::max(amax, std::abs(once.data()[i]));
    for (int64_t i = 0; i < once.size(); ++i) {
      ASSERT_NEAR(twice.data()[i], once.data()[i], 1e-6f * amax) << "element " << i;
    }
  }
}

TEST_P(Conformance, DequantizeRejectsAPackedBlockOfAnyOtherSize) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    std::vector<std::byte> packed = s->quantize(keys_like(shape, 7), {});
    packed.push_back(std::byte{0});
    Matrix out(shape.tokens, shape.head_dim);
    EXPECT_THROW(s->dequantize(packed, {}, out), InputError);
  }
}

// Schemes may depend on the role (llama.cpp rotates K and V in different groups): the fused and
// packed paths must agree for values too.
TEST_P(Conformance, ValueRoleRoundtripEqualsDequantizeOfQuantize) {
  const SchemePtr s = scheme();
  const QuantContext value_ctx{Role::value, {}, 0};
  for (Shape shape : shapes()) {
    const Matrix x = keys_like(shape, 8);
    Matrix via_packed(shape.tokens, shape.head_dim), fused(shape.tokens, shape.head_dim);
    s->dequantize(s->quantize(x, value_ctx), value_ctx, via_packed);
    s->roundtrip(x, value_ctx, fused);
    EXPECT_EQ(fused, via_packed);
  }
}

// Whatever the bits, a quantizer never moves a value by more than the block's whole range.
TEST_P(Conformance, OutputIsFiniteAndWithinTheBlockRange) {
  const SchemePtr s = scheme();
  for (Shape shape : shapes()) {
    const Matrix x = keys_like(shape, 5);
    const Matrix y = roundtrip(*s, x);
    const auto [lo, hi] = std::minmax_element(x.data(), x.data() + x.size());
    for (int64_t i = 0; i < x.size(); ++i) {
      ASSERT_TRUE(std::isfinite(y.data()[i])) << i;
      ASSERT_LE(std::abs(y.data()[i] - x.data()[i]), (*hi - *lo) * 1.001f) << i;
    }
  }
}

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
