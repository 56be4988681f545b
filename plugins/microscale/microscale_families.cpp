// Block-scaled float caches, as GPU runtimes store them: `mxfp4` (E2M1, an E8M0 scale per 32
// channels, or per 16 with block=16: SGLang's fp4_mx_block16, whose ties round away from zero with
// round=away), `mxfp8` (E4M3, E8M0 per 32) and
// `nvfp4` (E2M1, an E4M3 scale per 16 and a float32 scale per block of tokens, fitted as it is
// quantized, calibrated on a sample, or given). The codec is kvtune/codecs/microscale.h; the byte
// layout and the per-block steps are codec::packed_layout of the scheme's device_format()
// (kvtune/codecs/packed_layout.h), the same functions the CUDA kernels run. docs/schemes.md has
// the formulas.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/microscale.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "float_param.h"
#include "fp8/fp8_kernels.h"
#include "microscale_kernels.h"

namespace kvtune::builtin {
namespace {

// nvfp4's per-tensor scale.
enum class TensorScale { dynamic, calibrated, fixed };

struct MicroConfig {
  std::string family;  // "mxfp4", "mxfp8", "nvfp4"
  CodecKind kind = CodecKind::mxfp4;
  int32_t block = 32;
  TensorScale scale = TensorScale::dynamic;  // nvfp4 only
  float value = 0.0f;                        // nvfp4 scale=static: the per-tensor scale
  float bound = 0.0f;                        // nvfp4 fitted scales: amax / bound (0: 448 * 6)
  bool ties_away = false;                    // mxfp4 round=away
};

const std::vector<ParamDomain>& mxfp4_domains() {
  static const std::vector<ParamDomain> d = {
      {.name = "block", .kind = ParamDomain::Kind::choice,
       .help = "channels per E8M0 scale: 32 (OCP MX) or 16 (SGLang's fp4_mx_block16)",
       .default_value = "32", .choices = {"32", "16"}},
      {.name = "round", .kind = ParamDomain::Kind::choice,
       .help = "E2M1 ties: even (OCP MX, CUDA's conversion) or away from zero (SGLang's fp4_mx_block16)",
       .default_value = "even", .choices = {"even", "away"}},
  };
  return d;
}

const std::vector<ParamDomain>& nvfp4_domains() {
  static const std::vector<ParamDomain> d = {
      {.name = "scale", .kind = ParamDomain::Kind::choice,
       .help = "the float32 scale per block of tokens: dynamic = amax / (448 * 6) of the block, calibrated = "
               "that of a calibration sample (of each block until calibrated), static = 'value'",
       .default_value = "dynamic", .choices = {"dynamic", "calibrated", "static"}, .in_canonical = true},
      {.name = "value", .kind = ParamDomain::Kind::real,
       .help = "the per-tensor scale of scale=static (elements decode as e2m1 * e4m3 * value), rounded to float32"},
      {.name = "bound", .kind = ParamDomain::Kind::real,
       .help = "scale=calibrated (or dynamic): the per-tensor scale is amax / bound, rounded to float32, instead of "
               "amax / (448 * 6) = amax / 2688; 448 is current ModelOpt checkpoints' k_scale (Model-Optimizer PR "
               "#790), at most 2688 (a smaller scale would overflow the E4M3 block scales)"},
  };
  return d;
}

std::string canonical_spec(const MicroConfig& c) {
  if (c.kind == CodecKind::mxfp8) return "mxfp8";
  if (c.kind == CodecKind::mxfp4) {
    std::map<std::string, std::string> v;
    if (c.block != 32) v["block"] = std::to_string(c.block);
    if (c.ties_away) v["round"] = "away";
    return SchemeParams("mxfp4", mxfp4_domains(), std::move(v)).canonical();
  }
  std::map<std::string, std::string> v = {
      {"scale", c.scale == TensorScale::fixed ? "static" : c.scale == TensorScale::calibrated ? "calibrated" : "dynamic"}};
  if (c.scale == TensorScale::fixed) v["value"] = spell_float32(c.value);
  if (c.bound > 0.0f) v["bound"] = spell_float32(c.bound);
  return SchemeParams("nvfp4", nvfp4_domains(), std::move(v)).canonical();
}

class MicroScheme final : public Scheme {
 public:
  explicit MicroScheme(const MicroConfig& c) : config_(c), spec_(canonical_spec(c)), format_(make_format(c)) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return config_.family; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (head_dim % config_.block != 0) {
      return "'" + spec_ + "': head_dim " + std::to_string(head_dim) + " is not a multiple of its " +
             std::to_string(config_.block) + "-channel scale block";
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(layout(tokens, head_dim).bytes);
  }

  // The kernels' steps, in order: the per-tensor scale (nvfp4), then every scale block.
  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const codec::PackedLayout L = layout(x.rows, x.cols);
    std::vector<std::byte> packed(static_cast<size_t>(L.bytes));
    auto* bytes = reinterpret_cast<uint8_t*>(packed.data());
    auto src = [&](int64_t t, int64_t c) { return x.data[t * x.cols + c]; };
    for (int64_t g = 0; g < L.groups; ++g) codec::encode_group(L, bytes, g, src);
    int64_t u0 = 0, u1 = 0;
    codec::units_of_tokens(L, 0, x.rows, u0, u1);
    for (int64_t u = u0; u < u1; ++u) codec::encode_unit(L, bytes, u, src);
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const codec::PackedLayout L = layout(out.rows, out.cols);
    const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
    const codec::MicroElement e = codec::micro_element(config_.kind);
    const int64_t n = out.size(), b = config_.block;
    for (int64_t k = 0; k < n / b; ++k) {  // one scale per block of b elements
      const float scale = codec::micro_scale(L, bytes, k);
      for (int64_t i = k * b; i < (k + 1) * b; ++i) {
        out.data[i] = codec::micro_dequantize(codec::micro_code(L, bytes, i), scale, e);
      }
    }
  }

  // dequantize(quantize(x)) without the packed bytes: the same per-tensor scale, the same scale
  // code of each block from the same largest magnitude, the same element codes, decoded the same
  // way (MicroSchemes.FusedRoundTripIsThePackedOne checks every variant bit for bit).
  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const codec::MicroElement e = codec::micro_element(config_.kind);
    const bool nvfp4 = config_.kind == CodecKind::nvfp4;
    const int64_t b = config_.block, blocks = x.size() / b;
    // nvfp4's per-tensor scale: the packed path's max(-min, max) over the tensor is the largest
    // block amax (both +0 for an all-zero tensor, where the scale is 1 either way). It needs the
    // whole tensor first; every other block scale depends on its block alone, so the blocks go in
    // tiles that stay in L1 between the maximum and the round trip (one pass over memory; tiles of
    // 8 KiB ran 1.3x faster than the 128 KiB ones that stayed in L2: the reads and the writes to
    // memory then interleave finely, as in a copy). 8 KiB for both block sizes: blocks of 16 had
    // gone in tiles of 4 KiB, whose calls per tile weighed more (docs/performance.md).
    const int64_t tile_blocks = 2048 / b;  // 8 KiB of input
    float global = 1.0f;
    if (nvfp4 && config_.scale == TensorScale::fixed) global = config_.value;
    if (nvfp4 && config_.scale != TensorScale::fixed) {
      std::vector<float> amax;
      global = fitted_tensor_scale(x, amax);
      for (int64_t k0 = 0; k0 < blocks; k0 += tile_blocks) {  // the scales of a tile stay in L1 (1.2x)
        roundtrip_blocks(x.data, k0, std::min(tile_blocks, blocks - k0), amax.data() + k0, e, global, 0, out.data);
      }
      return;
    }
    std::vector<float> scale(static_cast<size_t>(std::min(blocks, tile_blocks)));
    for (int64_t k0 = 0; k0 < blocks; k0 += tile_blocks) {
      const int64_t n = std::min(tile_blocks, blocks - k0);
      microscale_kernels::block_abs_max(x.data + k0 * b, n, b, scale.data());
      const int64_t ahead = std::min(n, blocks - k0 - n);  // the next tile, read while this one runs
      roundtrip_blocks(x.data, k0, n, scale.data(), e, nvfp4 ? global : 0.0f, ahead, out.data);
    }
  }

  // nvfp4's per-tensor scale fitted on x, from its block maxima (left in amax).
  float fitted_tensor_scale(ConstMatrixView x, std::vector<float>& amax) const {
    const int64_t blocks = x.size() / config_.block;
    amax.resize(static_cast<size_t>(blocks));
    microscale_kernels::block_abs_max(x.data, blocks, config_.block, amax.data());
    // The block maxima are >= +0 and never NaN, so their largest |a| (vectorized) is their maximum.
    return codec::nvfp4_global_scale(fp8_kernels::abs_max(amax.data(), blocks), config_.bound);
  }

  // Blocks k0 .. k0 + n of x through their scales, from their amax (overwritten): `global` > 0 is
  // nvfp4's per-tensor scale, 0 the MX formats'. The `ahead` blocks after them are read ahead.
  void roundtrip_blocks(const float* x, int64_t k0, int64_t n, float* amax, codec::MicroElement e, float global,
                        int64_t ahead, float* y) const {
    const int64_t b = config_.block;
    microscale_kernels::scales_from_amax(amax, n, codec::micro_element_max(e), global);
    if (e == codec::MicroElement::e2m1) {
      return microscale_kernels::e2m1_roundtrip(x + k0 * b, amax, n, b, config_.ties_away, y + k0 * b, ahead);
    }
    // mxfp8: E4M3 elements through the fp8 family's vectorized codec (scales are >= 2^-127 > 0).
    fp8_kernels::roundtrip_blocks(x + k0 * b, amax, n, b, y + k0 * b, codec::Fp8Format::e4m3, ahead);
  }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.static_scales = config_.scale == TensorScale::calibrated;
    t.coarse_scales = true;
    // A fitted tensor scale above amax / 2688 puts the largest block's E4M3 scale off its exact value
    // (at bound=448, 448/6 = 74.7 rounds to 72, and the largest element saturates at 6 x 72/448 of
    // amax): the round trip's amax moves, and so does a re-fitted tensor scale.
    t.requantize_drifts = config_.scale != TensorScale::fixed && config_.bound > 0.0f && config_.bound < 2688.0f;
    // Blocks within a token; nvfp4's per-tensor scale spans the block unless it is given.
    t.rows_independent = config_.kind != CodecKind::nvfp4 || config_.scale == TensorScale::fixed;
    return t;
  }

  // nvfp4 scale=calibrated fixes the per-tensor scale from the sample's largest magnitude.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext&) const override {
    if (config_.scale != TensorScale::calibrated) return shared_from_this();
    float amax = 0.0f;
    for (int64_t i = 0; i < sample.size(); ++i) amax = std::max(amax, std::fabs(sample.data[i]));
    MicroConfig fitted = config_;
    fitted.scale = TensorScale::fixed;
    fitted.value = codec::nvfp4_global_scale(amax, config_.bound);
    fitted.bound = 0.0f;  // the scale is given now
    return std::make_shared<MicroScheme>(fitted);
  }

  // nvfp4 with its per-tensor scale fitted on the block (dynamic, or calibrated before calibrate()):
  // that scale as a static one, which round-trips any rows with the block's bits.
  std::shared_ptr<const Scheme> with_scales_fixed_on(ConstMatrixView block) const override {
    if (traits().rows_independent || !check_shape(block.rows, block.cols).empty()) return nullptr;
    std::vector<float> amax;
    MicroConfig fixed = config_;
    fixed.scale = TensorScale::fixed;
    fixed.value = fitted_tensor_scale(block, amax);
    fixed.bound = 0.0f;
    return std::make_shared<MicroScheme>(fixed);
  }

  std::optional<DeviceFormat> device_format() const override { return format_; }

 private:
  static DeviceFormat make_format(const MicroConfig& c) {
    DeviceFormat f;
    f.kind = c.kind;
    f.bits = c.kind == CodecKind::mxfp8 ? 8 : 4;
    f.axis = GroupAxis::token;
    f.group = c.block;
    f.scale_type = ScaleType::f32;
    if (c.scale == TensorScale::fixed) f.static_scale = c.value;
    f.tensor_bound = c.bound;
    f.ties_away = c.ties_away;
    return f;
  }

  codec::PackedLayout layout(int64_t tokens, int64_t head_dim) const {
    return codec::packed_layout(format_, tokens, head_dim);
  }

  MicroConfig config_;
  std::string spec_;
  DeviceFormat format_;  // the one description of the block's layout
};

SchemePtr make_nvfp4(const SchemeParams& p) {
  MicroConfig c{.family = "nvfp4", .kind = CodecKind::nvfp4, .block = 16};
  const std::string& scale = p.choice("scale");
  c.scale = scale == "static" ? TensorScale::fixed : scale == "calibrated" ? TensorScale::calibrated : TensorScale::dynamic;
  if (c.scale == TensorScale::fixed) {
    const std::string where = "scheme spec '" + p.canonical() + "': ";
    if (!p.has("value")) throw InputError(where + "'scale=static' needs 'value' (the per-tensor scale, a number > 0)");
    c.value = positive_float32(p, "value");
    if (c.value == 0.0f) {
      throw InputError(where + "'value' must be a scale > 0 that fits a float32");
    }
  } else if (p.has("value")) {
    throw InputError("scheme spec '" + p.canonical() + "': 'value' is only for 'scale=static' (found scale=" + scale +
                     ")");
  }
  if (p.has("bound")) {
    const std::string where = "scheme spec '" + p.canonical() + "': ";
    if (c.scale == TensorScale::fixed) throw InputError(where + "'bound' is for a fitted scale, not 'scale=static'");
    c.bound = positive_float32(p, "bound");
    if (!(c.bound > 0.0f && c.bound <= 2688.0f)) {
      throw InputError(where + "'bound' must be a number in (0, 2688]: the per-tensor scale is amax / bound, and below "
                               "amax / 2688 the E4M3 block scales would overflow");
    }
  }
  return std::make_shared<MicroScheme>(c);
}

}  // namespace

void register_microscale_families(Registry& registry) {
  auto add = [&](const char* name, const char* summary, std::vector<ParamDomain> params,
                 std::function<SchemePtr(const SchemeParams&)> make) {
    FamilyInfo f;
    f.name = name;
    f.summary = summary;
    f.origin = KVTUNE_BUILTIN_ORIGIN;
    f.params = std::move(params);
    f.make = std::move(make);
    registry.add(std::move(f));
  };
  add("mxfp4", "OCP MXFP4: E2M1 codes with a power-of-two (E8M0) scale per 32 channels (or 16)", mxfp4_domains(),
      [](const SchemeParams& p) -> SchemePtr {
        return std::make_shared<MicroScheme>(MicroConfig{.family = "mxfp4",
                                                         .kind = CodecKind::mxfp4,
                                                         .block = p.choice("block") == "16" ? 16 : 32,
                                                         .ties_away = p.choice("round") == "away"});
      });
  add("mxfp8", "OCP MXFP8: E4M3 codes with a power-of-two (E8M0) scale per 32 channels", {},
      [](const SchemeParams&) -> SchemePtr {
        return std::make_shared<MicroScheme>(MicroConfig{.family = "mxfp8", .kind = CodecKind::mxfp8, .block = 32});
      });
  add("nvfp4", "NVFP4: E2M1 codes, an E4M3 scale per 16 channels and a float32 scale per tensor", nvfp4_domains(),
      make_nvfp4);
}

}  // namespace kvtune::builtin
