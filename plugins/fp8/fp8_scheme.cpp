// The `fp8` scheme: one FP8 code per element and the scales it actually stores, in front.
//
//   packed block = [G float32 scales][T*D codes, row-major]
//   G = 0 (scale=unit), T (scale=dynamic,granularity=token), 1 (every other scale)
//
// A static scale is stored too, once per block: a runtime keeps one float per layer and role, and
// per block is the honest upper bound for a simulator that sees one head at a time.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "fp8_config.h"
#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/error.h"

namespace kvtune::builtin {
namespace {

using codec::Fp8Format;

// Every code's value, so the hot loops decode with a load; equal to fp8_to_f32 by construction.
const std::array<float, 256>& decode_table(Fp8Format format) {
  static const auto make = [](Fp8Format f) {
    std::array<float, 256> t{};
    for (uint32_t c = 0; c < 256; ++c) t[c] = codec::fp8_to_f32(static_cast<uint8_t>(c), f);
    return t;
  };
  static const std::array<float, 256> e4m3 = make(Fp8Format::e4m3);
  static const std::array<float, 256> e5m2 = make(Fp8Format::e5m2);
  return format == Fp8Format::e4m3 ? e4m3 : e5m2;
}

float abs_max(const float* x, int64_t n) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(x[i]));
  return amax;
}

class Fp8Scheme final : public Scheme {
 public:
  explicit Fp8Scheme(const Fp8Config& config) : config_(config), spec_(fp8_canonical_spec(config)) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "fp8"; }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(4 * stored_scales(tokens) + tokens * head_dim);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* scales = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* codes = scales + 4 * stored_scales(x.rows);
    for_each_group(x, [&](int64_t group, int64_t r0, int64_t r1, float scale) {
      if (stored_scales(x.rows) > 0) std::memcpy(scales + 4 * group, &scale, 4);
      for (int64_t i = r0 * x.cols; i < r1 * x.cols; ++i) {
        codes[i] = codec::fp8_quantize(x.data[i], scale, config_.format);
      }
    });
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const auto* scales = reinterpret_cast<const uint8_t*>(packed.data());
    const int64_t groups = stored_scales(out.rows);
    const uint8_t* codes = scales + 4 * groups;
    const std::array<float, 256>& value = decode_table(config_.format);
    const int64_t rows_per_group = groups == out.rows ? 1 : out.rows;
    for (int64_t r = 0; r < out.rows; ++r) {
      float scale = 1.0f;
      if (groups > 0) std::memcpy(&scale, scales + 4 * (r / rows_per_group), 4);
      for (int64_t i = r * out.cols; i < (r + 1) * out.cols; ++i) out.data[i] = value[codes[i]] * scale;
    }
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const std::array<float, 256>& value = decode_table(config_.format);
    for_each_group(x, [&](int64_t, int64_t r0, int64_t r1, float scale) {
      for (int64_t i = r0 * x.cols; i < r1 * x.cols; ++i) {
        out.data[i] = value[codec::fp8_quantize(x.data[i], scale, config_.format)] * scale;
      }
    });
  }

  // A calibrated scheme fixes amax / max_finite of the whole sample as a static scale; every other
  // scale mode has nothing to fit.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext&) const override {
    if (config_.scale != Fp8ScaleMode::calibrated) return shared_from_this();
    Fp8Config fitted = config_;
    fitted.scale = Fp8ScaleMode::fixed;
    fitted.value = codec::fp8_fit_scale(abs_max(sample.data, sample.size()), config_.format);
    return make_fp8_scheme(fitted);
  }

  std::optional<DeviceFormat> device_format() const override {
    DeviceFormat f;
    f.kind = config_.format == Fp8Format::e4m3 ? CodecKind::fp8_e4m3 : CodecKind::fp8_e5m2;
    f.bits = 8;
    f.axis = per_token() ? GroupAxis::token : GroupAxis::tensor;
    f.group = 0;
    f.scale_type = ScaleType::f32;
    f.scales_stored = config_.scale != Fp8ScaleMode::unit;
    return f;
  }

 private:
  bool per_token() const {
    return config_.scale == Fp8ScaleMode::dynamic && config_.granularity == Fp8Granularity::token;
  }

  int64_t stored_scales(int64_t tokens) const {
    if (config_.scale == Fp8ScaleMode::unit) return 0;
    return per_token() ? tokens : 1;
  }

  // Calls f(group, first row, end row, scale) for each group of rows sharing one scale. An
  // uncalibrated `calibrated` scheme fits its scale on the block it is given, like dynamic.
  template <class F>
  void for_each_group(ConstMatrixView x, F&& f) const {
    switch (config_.scale) {
      case Fp8ScaleMode::unit:
        return f(0, 0, x.rows, 1.0f);
      case Fp8ScaleMode::fixed:
        return f(0, 0, x.rows, config_.value);
      case Fp8ScaleMode::calibrated:
      case Fp8ScaleMode::dynamic:
        if (!per_token()) return f(0, 0, x.rows, codec::fp8_fit_scale(abs_max(x.data, x.size()), config_.format));
        for (int64_t r = 0; r < x.rows; ++r) {
          f(r, r, r + 1, codec::fp8_fit_scale(abs_max(x.row(r), x.cols), config_.format));
        }
        return;
    }
  }

  Fp8Config config_;
  std::string spec_;
};

}  // namespace

SchemePtr make_fp8_scheme(const Fp8Config& config) { return std::make_shared<Fp8Scheme>(config); }

}  // namespace kvtune::builtin
