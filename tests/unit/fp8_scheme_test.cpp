// The `fp8` family: what unit, static, calibrated and dynamic scales do to keys with an outlier
// channel, calibration and its round-tripping spec, the packed layout and footprint, and the
// parameter combinations it refuses.
#include <gtest/gtest.h>

#include <cmath>

#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/error.h"
#include "kvtune/numeric/bits.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::make_scheme;
using testing::read_f32;

Matrix roundtrip(const Scheme& s, const Matrix& x) {
  Matrix out(x.rows(), x.cols());
  s.roundtrip(x, {}, out);
  return out;
}

float abs_max(const float* x, int64_t n) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  return amax;
}

// ‖y − x‖ / ‖x‖ over the whole block.
double relative_error(const Matrix& x, const Matrix& y) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < x.size(); ++i) {
    num += (double(y.data()[i]) - x.data()[i]) * (double(y.data()[i]) - x.data()[i]);
    den += double(x.data()[i]) * x.data()[i];
  }
  return std::sqrt(num / den);
}

// Keys N(0, 1) with channel 7 scaled x1000: its values reach a few thousand, far past 448.
Matrix keys_with_outlier_channel() {
  Matrix k = testing::normal_matrix(256, 128, 42);
  for (int64_t r = 0; r < k.rows(); ++r) k(r, 7) *= 1000.0f;
  return k;
}

TEST(Fp8Scheme, CanonicalSpelling) {
  EXPECT_EQ(make_scheme("fp8")->spec(), "fp8:format=e4m3,scale=unit");
  EXPECT_EQ(make_scheme("fp8:granularity=tensor,format=e5m2")->spec(), "fp8:format=e5m2,scale=unit");
  EXPECT_EQ(make_scheme("fp8:granularity=head")->spec(), "fp8:format=e4m3,scale=unit,granularity=head");
  EXPECT_EQ(make_scheme("fp8:scale=dynamic,granularity=token")->spec(),
            "fp8:format=e4m3,scale=dynamic,granularity=token");
  // The value is spelled as the float32 the scheme uses, in its shortest form.
  EXPECT_EQ(make_scheme("fp8:scale=static,value=0.50")->spec(), "fp8:format=e4m3,scale=static,value=0.5");
  EXPECT_EQ(make_scheme("fp8:value=2e-3,scale=static")->spec(), "fp8:format=e4m3,scale=static,value=0.002");
  EXPECT_EQ(make_scheme("fp8:scale=static,value=0.1000000001")->spec(), "fp8:format=e4m3,scale=static,value=0.1");
  for (const char* spec :
       {"fp8:scale=static,value=3.14159", "fp8:format=e5m2,scale=static,value=1e-30,granularity=head",
        "fp8:scale=calibrated", "fp8:scale=dynamic"}) {
    const std::string canonical = make_scheme(spec)->spec();
    EXPECT_EQ(make_scheme(canonical)->spec(), canonical) << spec;
  }
}

TEST(Fp8Scheme, RefusesInvalidCombinationsNamingTheKeys) {
  auto message = [](const std::string& spec) -> std::string {
    try {
      make_scheme(spec);
    } catch (const InputError& e) {
      return e.what();
    }
    return "accepted";
  };
  EXPECT_NE(message("fp8:scale=static").find("'scale=static' needs 'value'"), std::string::npos);
  EXPECT_NE(message("fp8:value=2").find("'value' is only for 'scale=static' (found scale=unit)"), std::string::npos);
  EXPECT_NE(message("fp8:scale=dynamic,value=2").find("found scale=dynamic"), std::string::npos);
  EXPECT_NE(message("fp8:granularity=token").find("'granularity=token' needs 'scale=dynamic'"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=1,granularity=token").find("granularity=token"), std::string::npos);
  EXPECT_NE(message("fp8:scale=calibrated,granularity=token").find("granularity=token"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=0").find("'value' must be a scale > 0"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=-1").find("'value' must be a scale > 0"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=1e39").find("fits a float32"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=1e-50").find("fits a float32"), std::string::npos);
  EXPECT_NE(message("fp8:format=e3m4").find("e4m3|e5m2"), std::string::npos);
  EXPECT_NE(message("fp8:scale=static,value=abc").find("'value' = 'abc' is not valid"), std::string::npos);
}

// With no calibrated scale a runtime divides by 1, so ±448 is a hard clip on raw key magnitudes.
TEST(Fp8Scheme, UnitScaleClipsAnOutlierChannelAndCalibrationRecoversIt) {
  const Matrix k = keys_with_outlier_channel();
  const Matrix unit = roundtrip(*make_scheme("fp8"), k);
  int64_t clipped = 0;
  for (int64_t r = 0; r < k.rows(); ++r) {
    if (std::abs(k(r, 7)) >= 448.0f) {
      ++clipped;
      EXPECT_EQ(std::abs(unit(r, 7)), 448.0f) << r;
    }
  }
  EXPECT_GT(clipped, k.rows() / 2);
  EXPECT_GT(relative_error(k, unit), 0.4);  // the outlier channel lost its magnitude

  const SchemePtr calibrated = make_scheme("fp8:scale=calibrated")->calibrate(k, {});
  const Matrix fitted = roundtrip(*calibrated, k);
  // E4M3 keeps 3 mantissa bits: each normal value is within 2^-4 relative of its input.
  const float scale = abs_max(k.data(), k.size()) / 448.0f;
  for (int64_t i = 0; i < k.size(); ++i) {
    ASSERT_LE(std::abs(fitted.data()[i] - k.data()[i]), std::abs(k.data()[i]) / 16 + scale * 0x1p-10f) << i;
  }
  EXPECT_LT(relative_error(k, fitted), 0.05);
}

TEST(Fp8Scheme, CalibrateFixesAStaticScaleWhoseSpecRoundTrips) {
  const Matrix k = keys_with_outlier_channel();
  const SchemePtr calibrated = make_scheme("fp8:scale=calibrated,granularity=head")->calibrate(k, {});
  const float expected = abs_max(k.data(), k.size()) / 448.0f;
  const std::string spec = calibrated->spec();
  EXPECT_EQ(spec.rfind("fp8:format=e4m3,scale=static,granularity=head,value=", 0), 0u) << spec;
  const SchemePtr remade = make_scheme(spec);
  EXPECT_EQ(remade->spec(), spec);
  // The spelled value is the fitted float32 exactly, so the remade scheme quantizes identically.
  const std::vector<std::byte> packed = remade->quantize(k, {});
  EXPECT_EQ(read_f32(packed, 0), expected);
  EXPECT_EQ(packed, calibrated->quantize(k, {}));
  // Calibrated once, the scale no longer follows the data: a block with twice the range clips.
  Matrix doubled = k;
  for (int64_t i = 0; i < doubled.size(); ++i) doubled.data()[i] *= 2.0f;
  EXPECT_EQ(read_f32(remade->quantize(doubled, {}), 0), expected);
  // E5M2 fits against its own maximum.
  const SchemePtr e5m2 = make_scheme("fp8:format=e5m2,scale=calibrated")->calibrate(k, {});
  EXPECT_EQ(read_f32(e5m2->quantize(k, {}), 0), abs_max(k.data(), k.size()) / 57344.0f);
}

TEST(Fp8Scheme, CalibrateLeavesOtherScaleModesAlone) {
  const Matrix k = keys_with_outlier_channel();
  for (const char* spec :
       {"fp8", "fp8:scale=static,value=2", "fp8:scale=dynamic", "fp8:scale=dynamic,granularity=token"}) {
    const SchemePtr s = make_scheme(spec);
    EXPECT_EQ(s->calibrate(k, {}), s) << spec;
  }
  // An all-zero sample has no range to fit: the scale is 1, as unit.
  EXPECT_EQ(make_scheme("fp8:scale=calibrated")->calibrate(Matrix(4, 8), {})->spec(),
            "fp8:format=e4m3,scale=static,value=1");
}

// Used before calibration, `calibrated` fits its scale on the block it is given, as dynamic does.
TEST(Fp8Scheme, UncalibratedFitsOnTheBlock) {
  const Matrix k = keys_with_outlier_channel();
  const Matrix a = roundtrip(*make_scheme("fp8:scale=calibrated"), k);
  const Matrix b = roundtrip(*make_scheme("fp8:scale=dynamic"), k);
  EXPECT_EQ(a, b);
  EXPECT_EQ(read_f32(make_scheme("fp8:scale=calibrated")->quantize(k, {}), 0), abs_max(k.data(), k.size()) / 448.0f);
}

TEST(Fp8Scheme, FootprintCountsTheStoredScales) {
  const int64_t t = 100, d = 128;
  EXPECT_EQ(make_scheme("fp8")->footprint(t, d), size_t(t * d));
  EXPECT_EQ(make_scheme("fp8:scale=static,value=2")->footprint(t, d), size_t(t * d + 4));
  EXPECT_EQ(make_scheme("fp8:scale=calibrated")->footprint(t, d), size_t(t * d + 4));
  EXPECT_EQ(make_scheme("fp8:scale=dynamic,granularity=head")->footprint(t, d), size_t(t * d + 4));
  EXPECT_EQ(make_scheme("fp8:scale=dynamic,granularity=token")->footprint(t, d), size_t(t * d + 4 * t));
  EXPECT_DOUBLE_EQ(make_scheme("fp8")->bits_per_element(t, d), 8.0);
  EXPECT_DOUBLE_EQ(make_scheme("fp8:scale=dynamic,granularity=token")->bits_per_element(t, d), 8.0 + 32.0 / d);
}

TEST(Fp8Scheme, DynamicPerTokenStoresOneScalePerRowThenTheCodes) {
  Matrix x(3, 4);
  const float rows[3][4] = {{1.0f, -2.0f, 0.5f, 4.0f}, {0, 0, 0, 0}, {-896.0f, 3.0f, 100.0f, 1e-3f}};
  for (int r = 0; r < 3; ++r) std::copy(rows[r], rows[r] + 4, x.row(r));
  const SchemePtr s = make_scheme("fp8:scale=dynamic,granularity=token");
  const std::vector<std::byte> packed = s->quantize(x, {});
  ASSERT_EQ(packed.size(), size_t(3 * 4 + 4 * 3));
  EXPECT_EQ(read_f32(packed, 0), 4.0f / 448.0f);
  EXPECT_EQ(read_f32(packed, 4), 1.0f);  // an all-zero row gets scale 1
  EXPECT_EQ(read_f32(packed, 8), 2.0f);  // 896 / 448
  const auto* codes = reinterpret_cast<const uint8_t*>(packed.data()) + 12;
  EXPECT_EQ(codes[3], 0x7e);  // the row maximum lands on 448
  EXPECT_EQ(codes[4], 0x00);
  EXPECT_EQ(codes[8], 0xfe);   // -896 / 2 = -448
  EXPECT_EQ(codes[9], 0x3c);   // 3 / 2 = 1.5
  EXPECT_EQ(codes[11], 0x00);  // 5e-4 is below half of E4M3's smallest subnormal 2^-9
  Matrix y(3, 4);
  s->dequantize(packed, {}, y);
  EXPECT_EQ(y(2, 0), -896.0f);
  EXPECT_EQ(y(2, 1), 3.0f);
  EXPECT_EQ(y(2, 3), 0.0f);
  EXPECT_EQ(y, roundtrip(*s, x));
}

TEST(Fp8Scheme, StaticScaleIsStoredAndDividesBeforeConverting) {
  Matrix x(1, 3);
  x(0, 0) = 3.0f;     // 3 / 2 = 1.5, exact
  x(0, 1) = 1000.0f;  // 500 saturates to 448, so it comes back as 896
  x(0, 2) = -0.0f;
  const SchemePtr s = make_scheme("fp8:scale=static,value=2");
  const std::vector<std::byte> packed = s->quantize(x, {});
  ASSERT_EQ(packed.size(), 4u + 3u);
  EXPECT_EQ(read_f32(packed, 0), 2.0f);
  EXPECT_EQ(uint8_t(packed[4]), 0x3c);
  EXPECT_EQ(uint8_t(packed[5]), 0x7e);
  EXPECT_EQ(uint8_t(packed[6]), 0x80);
  const Matrix y = roundtrip(*s, x);
  EXPECT_EQ(y(0, 0), 3.0f);
  EXPECT_EQ(y(0, 1), 896.0f);
  EXPECT_EQ(float_bits(y(0, 2)), 0x80000000u);
}

// Conformance data stays below 448; here unit and static scales saturate and E5M2 has subnormals.
TEST(Fp8Scheme, RoundtripEqualsDequantizeOfQuantizeWhenSaturating) {
  Matrix k = keys_with_outlier_channel();
  for (int64_t r = 0; r < k.rows(); r += 3) k(r, 9) = 1e-6f * float(r);  // tiny values: subnormal codes
  for (const char* spec : {"fp8", "fp8:format=e5m2", "fp8:scale=static,value=0.25", "fp8:scale=calibrated",
                           "fp8:format=e5m2,scale=dynamic,granularity=token", "fp8:scale=dynamic,granularity=head"}) {
    const SchemePtr s = make_scheme(spec);
    Matrix via_packed(k.rows(), k.cols());
    s->dequantize(s->quantize(k, {}), {}, via_packed);
    const Matrix fused = roundtrip(*s, k);
    for (int64_t i = 0; i < k.size(); ++i) {
      ASSERT_EQ(float_bits(fused.data()[i]), float_bits(via_packed.data()[i])) << spec << " element " << i;
    }
  }
}

// FP8 gives range, not precision: on data in range E4M3's extra mantissa bit halves the error.
TEST(Fp8Scheme, E4M3IsMorePreciseThanE5M2OnNormalData) {
  const Matrix v = testing::normal_matrix(512, 128, 9);
  for (const char* scale : {"unit", "dynamic", "dynamic,granularity=token"}) {
    const double e4m3 = relative_error(v, roundtrip(*make_scheme(std::string("fp8:format=e4m3,scale=") + scale), v));
    const double e5m2 = relative_error(v, roundtrip(*make_scheme(std::string("fp8:format=e5m2,scale=") + scale), v));
    EXPECT_LT(e4m3, 0.04) << scale;
    EXPECT_GT(e5m2, 1.6 * e4m3) << scale;
  }
}

TEST(Fp8Scheme, DeviceFormatDescribesTheLayout) {
  const auto unit = make_scheme("fp8")->device_format();
  ASSERT_TRUE(unit);
  EXPECT_EQ(unit->kind, CodecKind::fp8_e4m3);
  EXPECT_EQ(unit->bits, 8);
  EXPECT_EQ(unit->axis, GroupAxis::tensor);
  EXPECT_FALSE(unit->scales_stored);
  const auto token = make_scheme("fp8:format=e5m2,scale=dynamic,granularity=token")->device_format();
  ASSERT_TRUE(token);
  EXPECT_EQ(token->kind, CodecKind::fp8_e5m2);
  EXPECT_EQ(token->axis, GroupAxis::token);
  EXPECT_EQ(token->group, 0);
  EXPECT_EQ(token->scale_type, ScaleType::f32);
  EXPECT_TRUE(token->scales_stored);
  EXPECT_TRUE(make_scheme("fp8:scale=static,value=3")->device_format()->scales_stored);
}

TEST(Fp8Scheme, DequantizeRejectsAWrongPackedSize) {
  const SchemePtr s = make_scheme("fp8:scale=dynamic,granularity=token");
  std::vector<std::byte> packed = s->quantize(Matrix(4, 8, 1.0f), {});
  packed.pop_back();
  Matrix out(4, 8);
  EXPECT_THROW(s->dequantize(packed, {}, out), InputError);
}

}  // namespace
}  // namespace kvtune
