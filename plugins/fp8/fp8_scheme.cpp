// The `fp8` scheme: one FP8 code per element and the scales it actually stores, in front.
//
//   packed block = [G float32 scales][T*D codes, row-major]
//   G = 0 (scale=unit), T (scale=dynamic,granularity=token), 1 (every other scale)
//
// A static scale is stored too, once per block: a runtime keeps one float per layer and role, and
// per block is the honest upper bound for a simulator that sees one head at a time.
//
// The footprint and where the scales and codes lie are codec::packed_layout of the scheme's
// device_format(), the layout the CUDA kernels use (kvtune/codecs/packed_layout.h); this file
// only fits the scales and converts the codes.
#include <string>
#include <vector>

#include "fp8_config.h"
#include "fp8_kernels.h"
#include "kvtune/codecs/fp8_codec.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"

namespace kvtune::builtin {
namespace {

using codec::Fp8Format;

class Fp8Scheme final : public Scheme {
 public:
  explicit Fp8Scheme(const Fp8Config& config)
      : config_(config), spec_(fp8_canonical_spec(config)), format_(make_format(config)) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "fp8"; }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(layout(tokens, head_dim).bytes);
  }

  // Group g (one per block, or one per token) keeps its float32 scale at scale_offset + 4 g.
  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const codec::PackedLayout L = layout(x.rows, x.cols);
    std::vector<std::byte> packed(static_cast<size_t>(L.bytes));
    auto* block_start = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* scales = block_start + L.scale_offset;
    uint8_t* codes = block_start + L.code_offset;
    for_each_group(x, [&](int64_t group, int64_t r0, int64_t r1, float scale) {
      if (L.groups > 0) codec::write_scale(scales, group, scale, ScaleType::f32);
      fp8_kernels::quantize(x.data + r0 * x.cols, scale, codes + r0 * x.cols, (r1 - r0) * x.cols, config_.format);
    });
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const codec::PackedLayout L = layout(out.rows, out.cols);
    const auto* block_start = reinterpret_cast<const uint8_t*>(packed.data());
    const uint8_t* codes = block_start + L.code_offset;
    if (L.groups <= 1) {
      const float scale = codec::fp8_block_scale(L, block_start, 0);
      fp8_kernels::dequantize(codes, scale, out.data, out.size(), config_.format);
      return;
    }
    for (int64_t r = 0; r < out.rows; ++r) {  // one scale per row
      const float scale = codec::fp8_block_scale(L, block_start, r);
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
    t.calibrates_per_head = t.static_scales && config_.granularity == Fp8Granularity::head;
    // A given scale, or one per token; a dynamic or not yet calibrated scale spans the block.
    t.rows_independent = config_.scale == Fp8ScaleMode::unit || config_.scale == Fp8ScaleMode::fixed || per_token();
    t.channel_order_invariant = true;  // every scale spans whole rows, heads or the tensor
    return t;
  }

  // A calibrated scheme fixes amax / max_finite of the whole sample as a static scale; every other
  // scale mode has nothing to fit.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext&) const override {
    if (config_.scale != Fp8ScaleMode::calibrated) return shared_from_this();
    Fp8Config fitted = config_;
    fitted.scale = Fp8ScaleMode::fixed;
    fitted.value = fitted_scale(sample.data, sample.size());
    return make_fp8_scheme(fitted);
  }

  std::shared_ptr<const Scheme> with_static_scale(double scale) const override {
    if (config_.scale != Fp8ScaleMode::calibrated) return nullptr;
    Fp8Config fixed = config_;
    fixed.scale = Fp8ScaleMode::fixed;
    fixed.value = static_cast<float>(scale);
    return make_fp8_scheme(fixed);
  }

  // A scale fitted on the block (dynamic per tensor, or calibrated before calibrate()): that scale as
  // a static one, which round-trips any rows with the block's bits.
  std::shared_ptr<const Scheme> with_scales_fixed_on(ConstMatrixView block) const override {
    if (traits().rows_independent || !check_shape(block.rows, block.cols).empty()) return nullptr;
    Fp8Config fixed = config_;
    fixed.scale = Fp8ScaleMode::fixed;
    fixed.value = fitted_scale(block.data, block.size());
    return make_fp8_scheme(fixed);
  }

  std::optional<double> static_scale() const override {
    if (config_.scale == Fp8ScaleMode::unit) return 1.0;
    if (config_.scale == Fp8ScaleMode::fixed) return config_.value;
    return std::nullopt;
  }

  std::optional<DeviceFormat> device_format() const override { return format_; }

 private:
  static bool per_token(const Fp8Config& c) {
    return c.scale == Fp8ScaleMode::dynamic && c.granularity == Fp8Granularity::token;
  }
  bool per_token() const { return per_token(config_); }

  // What the block holds, and so (through packed_layout) how many scales it stores and where.
  static DeviceFormat make_format(const Fp8Config& c) {
    DeviceFormat f;
    f.kind = c.format == Fp8Format::e4m3 ? CodecKind::fp8_e4m3 : CodecKind::fp8_e5m2;
    f.bits = 8;
    f.axis = per_token(c) ? GroupAxis::token : GroupAxis::tensor;
    f.group = 0;
    f.scale_type = ScaleType::f32;
    f.scales_stored = c.scale != Fp8ScaleMode::unit;
    // A fixed scale (scale=static, or calibrated once calibrate() has fitted it) is stored in the
    // block like the others, but a kernel appending tokens must not refit it.
    if (c.scale == Fp8ScaleMode::fixed) f.static_scale = c.value;
    return f;
  }

  codec::PackedLayout layout(int64_t tokens, int64_t head_dim) const {
    return codec::packed_layout(format_, tokens, head_dim);
  }

  // amax / max_finite of n floats: the scale a dynamic or calibrated scheme fits on them.
  float fitted_scale(const float* x, int64_t n) const {
    return codec::fp8_fit_scale(fp8_kernels::abs_max(x, n), config_.format);
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
          return f(0, 0, x.rows, fitted_scale(x.data, x.size()));
        for (int64_t r = 0; r < x.rows; ++r) {
          f(r, r, r + 1, fitted_scale(x.row(r), x.cols));
        }
        return;
    }
  }

  Fp8Config config_;
  std::string spec_;
  DeviceFormat format_;  // the one description of the block's layout
};

}  // namespace

SchemePtr make_fp8_scheme(const Fp8Config& config) { return std::make_shared<Fp8Scheme>(config); }

}  // namespace kvtune::builtin
