// The `fp8` scheme: one FP8 code per element and the scales it actually stores, in front.
//
//   packed block = [G float32 scales][T*D codes, row-major]
//   G = 0 (scale=unit), T (scale=dynamic,granularity=token), 1 (every other scale)
//
// A static scale is stored too, once per block: a runtime keeps one float per layer and role, and
// per block is the honest upper bound for a simulator that sees one head at a time.
#include <cstring>
#include <string>
#include <vector>

#include "fp8_config.h"
#include "fp8_kernels.h"
#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/error.h"

namespace kvtune::builtin {
namespace {

using codec::Fp8Format;

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
      fp8_kernels::quantize(x.data + r0 * x.cols, scale, codes + r0 * x.cols, (r1 - r0) * x.cols, config_.format);
    });
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const auto* scales = reinterpret_cast<const uint8_t*>(packed.data());
    const int64_t groups = stored_scales(out.rows);
    const uint8_t* codes = scales + 4 * groups;
    if (groups <= 1) {
      float scale = 1.0f;
      if (groups == 1) std::memcpy(&scale, scales, 4);
      fp8_kernels::dequantize(codes, scale, out.data, out.size(), config_.format);
      return;
    }
    for (int64_t r = 0; r < out.rows; ++r) {  // one scale per row
      float scale;
      std::memcpy(&scale, scales + 4 * r, 4);
      fp8_kernels::dequantize(codes + r * out.cols, scale, out.row(r), out.cols, config_.format);
    }
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    if (per_token()) {  // fused: a call per row costs as much as the row's arithmetic
      fp8_kernels::roundtrip_per_row(x.data, x.rows, x.cols, out.data, config_.format);
      return;
    }
    for_each_group(x, [&](int64_t, int64_t r0, int64_t r1, float scale) {
      fp8_kernels::roundtrip(x.data + r0 * x.cols, scale, out.data + r0 * x.cols, (r1 - r0) * x.cols, config_.format);
    });
  }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.static_scales = config_.scale == Fp8ScaleMode::calibrated;
    return t;
  }

  // A calibrated scheme fixes amax / max_finite of the whole sample as a static scale; every other
  // scale mode has nothing to fit.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext&) const override {
    if (config_.scale != Fp8ScaleMode::calibrated) return shared_from_this();
    Fp8Config fitted = config_;
    fitted.scale = Fp8ScaleMode::fixed;
    fitted.value = codec::fp8_fit_scale(fp8_kernels::abs_max(sample.data, sample.size()), config_.format);
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
    // A fixed scale (scale=static, or calibrated once calibrate() has fitted it) is stored in the
    // block like the others, but a kernel appending tokens must not refit it.
    if (config_.scale == Fp8ScaleMode::fixed) f.static_scale = config_.value;
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
        if (!per_token())
          return f(0, 0, x.rows, codec::fp8_fit_scale(fp8_kernels::abs_max(x.data, x.size()), config_.format));
        for (int64_t r = 0; r < x.rows; ++r) {
          f(r, r, r + 1, codec::fp8_fit_scale(fp8_kernels::abs_max(x.row(r), x.cols), config_.format));
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
