// NF4 as a kvtune plugin: QLoRA's 4-bit NormalFloat codebook with one absmax scale per group of
// channels in each token row. Built out of tree against the installed kvtune package (README.md),
// and in-tree by kvtune's tests from this same file.
//
// Source of the format: Dettmers, Pagnoni, Holtzman, Zettlemoyer, "QLoRA: Efficient Finetuning of
// Quantized LLMs", NeurIPS 2023 (NormalFloat, §3 and appendix E); the 16 values are bitsandbytes'
// NF4 table (csrc/kernels.cu, dDequantizeNF4; bitsandbytes/functional.py), quantiles of N(0, 1)
// scaled to [-1, 1] with an exact zero.
//
// Per group:   s = absmax of the group's values, rounded to the scale dtype (f32 or f16)
//              code = the codebook entry nearest to x / s (s = 0: the zero entry, code 7)
//              x' = codebook[code] * s
// Rounding:    nearest entry; a value exactly halfway between two entries takes the lower one,
//              as bitsandbytes' dQuantizeNF4 does (its tests compare against the midpoints with >).
//              The midpoints are computed in double from the float entries and rounded to float.
// Layout of a [T, D] block with G = ceil(D / group) groups per row (the last one may be partial):
//   scales  T*G values, row-major (token, group), 4 bytes (f32) or 2 bytes (f16, IEEE binary16) each
//   codes   ceil(T*D / 2) bytes; element i = t*D + d goes to byte i/2, the high nibble for even i and
//           the low nibble for odd i (bitsandbytes' order); an odd last element leaves the low
//           nibble 0.
// Footprint:   T*G*scale_bytes + ceil(T*D/2), e.g. 4.5 bits/element at group=64 with f32 scales.
// K or V:      the same format for both roles; groups run along the channels of each token, so a
//              key outlier channel inflates the scale of its group in every token (use
//              rotation=hadamard around it, a kvtune policy key every family accepts).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kvtune/numeric/half.h"
#include "kvtune/plugin_sdk.h"

namespace {

using kvtune::ConstMatrixView;
using kvtune::InputError;
using kvtune::MatrixView;
using kvtune::ParamDomain;
using kvtune::QuantContext;

constexpr std::array<float, 16> kCodebook = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};
constexpr uint8_t kZeroCode = 7;

// midpoint[i] lies between entries i and i + 1.
const std::array<float, 15>& midpoints() {
  static const std::array<float, 15> m = [] {
    std::array<float, 15> out{};
    for (size_t i = 0; i < out.size(); ++i) {
      out[i] = static_cast<float>((double(kCodebook[i]) + double(kCodebook[i + 1])) / 2.0);
    }
    return out;
  }();
  return m;
}

// The nearest codebook entry to v (v within about [-1, 1]); ties go to the lower entry.
uint8_t nearest_code(float v) {
  const std::array<float, 15>& mid = midpoints();
  uint8_t code = 0;
  for (size_t i = 0; i < mid.size(); ++i) code = v > mid[i] ? static_cast<uint8_t>(i + 1) : code;
  return code;
}

class Nf4Scheme final : public kvtune::plugin::SchemeBase {
 public:
  Nf4Scheme(std::string spec, int64_t group, bool f16_scales)
      : spec_(std::move(spec)), group_(group), f16_scales_(f16_scales) {}

  std::string spec() const override { return spec_; }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    if (tokens < 1 || head_dim < 1) return 0;
    return static_cast<size_t>(tokens * groups_per_row(head_dim) * scale_bytes() + (tokens * head_dim + 1) / 2);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* out = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* codes = out + x.rows * groups_per_row(x.cols) * scale_bytes();
    const int64_t groups = groups_per_row(x.cols);
    for (int64_t r = 0; r < x.rows; ++r) {
      const float* row = x.row(r);
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t c0 = g * group_, c1 = std::min(x.cols, c0 + group_);
        float absmax = 0.0f;
        for (int64_t c = c0; c < c1; ++c) {
          if (!std::isfinite(row[c])) {
            throw InputError("'" + spec_ + "': element (" + std::to_string(r) + ", " + std::to_string(c) +
                             ") is not finite");
          }
          absmax = std::max(absmax, std::abs(row[c]));
        }
        const float s = write_scale(out, r * groups + g, absmax);
        for (int64_t c = c0; c < c1; ++c) {
          const uint8_t code = s > 0.0f ? nearest_code(row[c] / s) : kZeroCode;
          const int64_t i = r * x.cols + c;
          codes[i / 2] |= static_cast<uint8_t>(i % 2 == 0 ? code << 4 : code);
        }
      }
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    const auto* in = reinterpret_cast<const uint8_t*>(packed.data());
    const int64_t groups = groups_per_row(out.cols);
    const uint8_t* codes = in + out.rows * groups * scale_bytes();
    for (int64_t r = 0; r < out.rows; ++r) {
      float* y = out.row(r);
      for (int64_t g = 0; g < groups; ++g) {
        const float s = read_scale(in, r * groups + g);
        const int64_t c1 = std::min(out.cols, (g + 1) * group_);
        for (int64_t c = g * group_; c < c1; ++c) {
          const int64_t i = r * out.cols + c;
          const uint8_t code = i % 2 == 0 ? codes[i / 2] >> 4 : codes[i / 2] & 0x0F;
          y[c] = kCodebook[code] * s;
        }
      }
    }
  }

 private:
  int64_t groups_per_row(int64_t head_dim) const { return (head_dim + group_ - 1) / group_; }
  int64_t scale_bytes() const { return f16_scales_ ? 2 : 4; }

  // Stores the group's scale and returns it as dequantize will read it.
  float write_scale(uint8_t* scales, int64_t index, float absmax) const {
    if (!f16_scales_) {
      std::memcpy(scales + 4 * index, &absmax, 4);
      return absmax;
    }
    if (absmax > kvtune::kF16MaxFinite) {
      throw InputError("'" + spec_ + "': a group's absmax " + std::to_string(absmax) +
                       " exceeds the f16 scale range (65504); use scale=f32");
    }
    const uint16_t bits = kvtune::f32_to_f16_bits(absmax);
    std::memcpy(scales + 2 * index, &bits, 2);
    return kvtune::f16_bits_to_f32(bits);
  }

  float read_scale(const uint8_t* scales, int64_t index) const {
    if (f16_scales_) {
      uint16_t bits = 0;
      std::memcpy(&bits, scales + 2 * index, 2);
      return kvtune::f16_bits_to_f32(bits);
    }
    float s = 0.0f;
    std::memcpy(&s, scales + 4 * index, 4);
    return s;
  }

  std::string spec_;
  int64_t group_;
  bool f16_scales_;
};

std::vector<kvtune::plugin::Family> nf4_families() {
  kvtune::plugin::Family f;
  f.name = "nf4";
  f.summary = "QLoRA 4-bit NormalFloat codebook with an absmax scale per group of channels (out-of-tree plugin)";
  f.params = {
      {.name = "group", .kind = ParamDomain::Kind::integer,
       .help = "channels per absmax scale in each token row (the last group of a row may be partial)",
       .default_value = "64", .min = 1, .max = 1 << 16, .in_canonical = true, .examples = {"32", "64", "128"}},
      {.name = "scale", .kind = ParamDomain::Kind::choice, .help = "dtype the absmax scales are stored in",
       .default_value = "f32", .choices = {"f32", "f16"}},
  };
  f.make = [](const kvtune::plugin::Params& p) -> std::shared_ptr<const kvtune::plugin::SchemeBase> {
    return std::make_shared<Nf4Scheme>(p.canonical(), p.integer("group"), p.choice("scale") == "f16");
  };
  return {f};
}

}  // namespace

KVTUNE_PLUGIN("kvtune-nf4", "1.0.0", nf4_families)
