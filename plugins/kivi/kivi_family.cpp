// The `kivi` family: KIVI's asymmetric 2/4-bit KV cache (Liu et al. 2024, "KIVI: A Tuning-Free
// Asymmetric 2bit Quantization for KV Cache", ICML 2024). Keys are quantized per channel over
// append blocks of G tokens, values per token in groups of G channels, each group with an f16
// scale and an f16 minimum (zero point) as KIVI stores them; the R most recent tokens stay f16, and
// keys of a block that has not filled yet stay f16 too. Written against the public headers only
// (kvtune/codecs/int_codec.h for the asymmetric codec), as an outside author would.
//
// Packed layout of a [T, D] block, q = the quantized rows (the oldest ones):
//   role=k: q = floor(max(0, T - R) / G) * G, for each of the q / G blocks:
//             [D f16 scales][D f16 minima][ceil(G * D * bits / 8) code bytes], then [(T - q) * D f16]
//   role=v: q = max(0, T - R):
//             [q * D/G f16 scales][q * D/G f16 minima][ceil(q * D * bits / 8) code bytes][(T - q) * D f16]
// A cache shorter than the window has nothing quantized, as in KIVI.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/error.h"
#include "kvtune/numeric/half.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

constexpr ScaleType kScale = ScaleType::f16;  // KIVI keeps scale and zero point in fp16

class KiviScheme final : public Scheme {
 public:
  KiviScheme(std::string spec, int bits, Role role, int64_t group, int64_t window)
      : spec_(std::move(spec)), bits_(bits), role_(role), group_(group), window_(window) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "kivi"; }
  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.role = role_;
    return t;
  }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (role_ == Role::value && head_dim % group_ != 0) {
      return "'" + spec_ + "': group=" + std::to_string(group_) + " channels does not divide head_dim " +
             std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    const int64_t q = quantized_rows(tokens);
    const int64_t exact = (tokens - q) * head_dim * 2;
    if (role_ == Role::key) return static_cast<size_t>(q / group_ * key_block_bytes(head_dim) + exact);
    const int64_t groups = q * (head_dim / group_);
    return static_cast<size_t>(groups * 4 + codec::packed_code_bytes(q * head_dim, bits_) + exact);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* out = reinterpret_cast<uint8_t*>(packed.data());
    const int64_t q = quantized_rows(x.rows);
    if (role_ == Role::key) {
      for (int64_t r0 = 0; r0 < q; r0 += group_) {
        out = quantize_tile(x.row_range(r0, group_), /*per_channel=*/true, out);
      }
    } else if (q > 0) {
      out = quantize_tile(x.row_range(0, q), /*per_channel=*/false, out);
    }
    for (int64_t i = q * x.cols; i < x.size(); ++i, out += 2) {
      const uint16_t h = f32_to_f16_bits(x.data[i]);
      std::memcpy(out, &h, 2);
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView y) const override {
    require_packed(packed, y.rows, y.cols);
    const auto* in = reinterpret_cast<const uint8_t*>(packed.data());
    const int64_t q = quantized_rows(y.rows);
    if (role_ == Role::key) {
      for (int64_t r0 = 0; r0 < q; r0 += group_) in = dequantize_tile(in, /*per_channel=*/true, {y.row(r0), group_, y.cols});
    } else if (q > 0) {
      in = dequantize_tile(in, /*per_channel=*/false, {y.data, q, y.cols});
    }
    for (int64_t i = q * y.cols; i < y.size(); ++i, in += 2) {
      uint16_t h;
      std::memcpy(&h, in, 2);
      y.data[i] = f16_bits_to_f32(h);
    }
  }

 private:
  int64_t quantized_rows(int64_t tokens) const {
    const int64_t old = std::max<int64_t>(0, tokens - window_);
    return role_ == Role::key ? old / group_ * group_ : old;
  }

  int64_t key_block_bytes(int64_t head_dim) const {
    return head_dim * 4 + codec::packed_code_bytes(group_ * head_dim, bits_);
  }

  // Group g of a tile: per_channel (keys) = channel g over all rows; else (values) = row g / (D/G),
  // channels [(g % (D/G)) * G, +G).
  int64_t group_count(ConstMatrixView t, bool per_channel) const {
    return per_channel ? t.cols : t.rows * (t.cols / group_);
  }
  int64_t group_of(int64_t r, int64_t c, int64_t cols, bool per_channel) const {
    return per_channel ? c : r * (cols / group_) + c / group_;
  }

  // Writes [scales][minima][codes] of one tile and returns the end.
  uint8_t* quantize_tile(ConstMatrixView t, bool per_channel, uint8_t* out) const {
    const int64_t groups = group_count(t, per_channel);
    std::vector<float> lo(static_cast<size_t>(groups), 0.0f), hi(static_cast<size_t>(groups), 0.0f);
    std::vector<bool> seen(static_cast<size_t>(groups), false);
    for (int64_t r = 0; r < t.rows; ++r) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const auto g = static_cast<size_t>(group_of(r, c, t.cols, per_channel));
        const float v = t(r, c);
        lo[g] = seen[g] ? std::min(lo[g], v) : v;
        hi[g] = seen[g] ? std::max(hi[g], v) : v;
        seen[g] = true;
      }
    }
    uint8_t* scales = out;
    uint8_t* minima = scales + groups * 2;
    uint8_t* codes = minima + groups * 2;
    std::vector<float> minimum(static_cast<size_t>(groups)), divisor(static_cast<size_t>(groups));
    for (int64_t g = 0; g < groups; ++g) {
      const auto i = static_cast<size_t>(g);
      minimum[i] = codec::stored_minimum(lo[i], kScale);
      const float s = codec::int_asym_scale(minimum[i], hi[i], bits_, kScale);
      divisor[i] = codec::int_divisor(s);
      codec::write_scale(scales, g, s, kScale);
      codec::write_scale(minima, g, minimum[i], kScale);
    }
    const float top = codec::int_asym_top(bits_);
    const int64_t code_bytes = codec::packed_code_bytes(t.size(), bits_);
    std::fill(codes, codes + code_bytes, uint8_t{0});
    for (int64_t r = 0; r < t.rows; ++r) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const auto g = static_cast<size_t>(group_of(r, c, t.cols, per_channel));
        const float level = codec::int_asym_level(t(r, c), minimum[g], divisor[g], top);
        codec::pack_code(codes, r * t.cols + c, bits_, static_cast<uint32_t>(codec::stored_level(level)));
      }
    }
    return codes + code_bytes;
  }

  const uint8_t* dequantize_tile(const uint8_t* in, bool per_channel, MatrixView t) const {
    const int64_t groups = group_count(t, per_channel);
    const uint8_t* minima = in + groups * 2;
    const uint8_t* codes = minima + groups * 2;
    for (int64_t r = 0; r < t.rows; ++r) {
      for (int64_t c = 0; c < t.cols; ++c) {
        const int64_t g = group_of(r, c, t.cols, per_channel);
        t(r, c) = codec::int_asym_value(codec::unpack_code(codes, r * t.cols + c, bits_),
                                        codec::read_scale(in, g, kScale), codec::read_scale(minima, g, kScale));
      }
    }
    return codes + codec::packed_code_bytes(t.size(), bits_);
  }

  std::string spec_;
  int bits_;
  Role role_;
  int64_t group_;   // keys: tokens per append block; values: channels per group
  int64_t window_;  // most recent tokens kept f16
};

SchemePtr make_kivi(const SchemeParams& p) {
  if (!p.has("role")) {
    throw InputError("scheme spec '" + p.canonical() +
                     "': kivi needs role=k or role=v (keys per channel, values per token; the layouts differ)");
  }
  return std::make_shared<KiviScheme>(p.canonical(), static_cast<int>(p.integer("bits")),
                                      p.choice("role") == "k" ? Role::key : Role::value, p.integer("group"),
                                      p.integer("residual"));
}

}  // namespace

void register_kivi_family(Registry& registry) {
  FamilyInfo f;
  f.name = "kivi";
  f.summary = "KIVI (Liu et al. 2024): asymmetric 2/4-bit, K per channel in G-token blocks, V per token in "
              "G-channel groups, f16 scale and zero point, the R most recent tokens f16";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = {
      {.name = "bits", .kind = ParamDomain::Kind::integer, .help = "code width (KIVI uses 2 and 4)",
       .default_value = "2", .min = 2, .max = 8, .in_canonical = true, .examples = {"2", "4"}},
      // No default: the K and V layouts differ and the footprint has no role to go by.
      {.name = "role", .kind = ParamDomain::Kind::choice,
       .help = "k = per channel over G-token append blocks, v = per token over G-channel groups",
       .choices = {"k", "v"}, .in_canonical = true},
      {.name = "group", .kind = ParamDomain::Kind::integer,
       .help = "G: tokens per key block (a partial block stays f16), channels per value group",
       .default_value = "32", .min = 1, .max = 1 << 16, .in_canonical = true, .examples = {"8", "32"}},
      {.name = "residual", .kind = ParamDomain::Kind::integer,
       .help = "R: the most recent tokens kept f16 (KIVI's full-precision residual)",
       .default_value = "128", .min = 0, .max = 1 << 24, .in_canonical = true, .examples = {"0", "16"}},
  };
  f.make = make_kivi;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
