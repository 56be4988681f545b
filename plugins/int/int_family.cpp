// The `int` family: symmetric absmax or asymmetric min/max integer quantization with one scale per
// tensor, per channel or per token, optionally in groups along the other axis. Formulas and the
// packed layout are in kvtune/codecs/int_codec.h and docs/schemes.md.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "builtin.h"
#include "int_kernels.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

ScaleType parse_scale_type(const std::string& s) {
  return s == "f16" ? ScaleType::f16 : (s == "bf16" ? ScaleType::bf16 : ScaleType::f32);
}

class IntScheme final : public Scheme {
 public:
  IntScheme(std::string spec, int bits, GroupAxis axis, int64_t group, bool asym, ScaleType scale_type)
      : spec_(std::move(spec)), bits_(bits), axis_(axis), group_(group), asym_(asym), scale_type_(scale_type) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "int"; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (axis_ == GroupAxis::token && group_ > 0 && head_dim % group_ != 0) {
      return "'" + spec_ + "': group=" + std::to_string(group_) + " channels does not divide head_dim " +
             std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    const Tiling t = tiling(tokens, head_dim);
    const int64_t meta = t.groups() * codec::scale_bytes(scale_type_) * (asym_ ? 2 : 1);
    return static_cast<size_t>(meta + codec::packed_code_bytes(tokens * head_dim, bits_));
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const Tiling t = tiling(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* scales = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* mins = scales + t.groups() * codec::scale_bytes(scale_type_);
    uint8_t* codes = mins + (asym_ ? t.groups() * codec::scale_bytes(scale_type_) : 0);
    const int offset = asym_ ? 0 : codec::int_sym_offset(bits_);
    BlockParams p(t, x.cols);
    std::vector<float> levels(static_cast<size_t>(x.cols));
    for (int64_t block = 0; block < t.token_blocks; ++block) {
      const auto [r0, r1] = fit_block(x, t, block, p);
      for (int64_t g = 0; g < t.groups_per_row; ++g) {
        codec::write_scale(scales, block * t.groups_per_row + g, p.scale[g], scale_type_);
        if (asym_) codec::write_scale(mins, block * t.groups_per_row + g, p.minimum[g], scale_type_);
      }
      for (int64_t r = r0; r < r1; ++r) {
        apply_row(x.row(r), t, p, /*levels_only=*/true, levels.data());
        for (int64_t c = 0; c < x.cols; ++c) {
          codec::pack_code(codes, r * x.cols + c, bits_, static_cast<uint32_t>(static_cast<int>(levels[c]) + offset));
        }
      }
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const Tiling t = tiling(out.rows, out.cols);
    const auto* scales = reinterpret_cast<const uint8_t*>(packed.data());
    const uint8_t* mins = scales + t.groups() * codec::scale_bytes(scale_type_);
    const uint8_t* codes = mins + (asym_ ? t.groups() * codec::scale_bytes(scale_type_) : 0);
    for (int64_t r = 0; r < out.rows; ++r) {
      const int64_t first = (r / t.rows_per_tile) * t.groups_per_row;
      float* y = out.row(r);
      for (int64_t c = 0; c < out.cols; ++c) {
        const int64_t g = first + c / t.cols_per_group;
        const float s = codec::read_scale(scales, g, scale_type_);
        const uint32_t code = codec::unpack_code(codes, r * out.cols + c, bits_);
        y[c] = asym_ ? codec::int_asym_value(code, s, codec::read_scale(mins, g, scale_type_))
                     : codec::int_sym_value(code, bits_, s);
      }
    }
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const Tiling t = tiling(x.rows, x.cols);
    if (axis_ == GroupAxis::token && scale_type_ == ScaleType::f32 &&
        int_kernels::token_groups_f32(x.data, x.rows, x.cols, t.cols_per_group, bits_, asym_, out.data)) {
      return;
    }
    BlockParams p(t, x.cols);
    for (int64_t block = 0; block < t.token_blocks; ++block) {
      const auto [r0, r1] = fit_block(x, t, block, p);
      for (int64_t r = r0; r < r1; ++r) apply_row(x.row(r), t, p, /*levels_only=*/false, out.row(r));
    }
  }

  std::optional<DeviceFormat> device_format() const override {
    DeviceFormat f;
    f.kind = CodecKind::integer;
    f.bits = static_cast<uint8_t>(bits_);
    f.axis = axis_;
    f.group = static_cast<int32_t>(group_);
    f.scale_type = scale_type_;
    f.asymmetric = asym_;
    return f;
  }

 private:
  // Groups are tiles of rows_per_tile tokens x cols_per_group channels, numbered token block by
  // token block: group = (row / rows_per_tile) * groups_per_row + col / cols_per_group.
  struct Tiling {
    int64_t rows_per_tile, cols_per_group, groups_per_row, token_blocks;
    int64_t groups() const { return groups_per_row * token_blocks; }
  };

  Tiling tiling(int64_t tokens, int64_t head_dim) const {
    if (tokens < 1 || head_dim < 1) return {1, 1, 0, 0};  // an empty block has no groups
    int64_t rows = tokens, cols = head_dim;
    if (axis_ == GroupAxis::channel) {
      cols = 1;
      rows = group_ > 0 ? group_ : tokens;
    } else if (axis_ == GroupAxis::token) {
      rows = 1;
      cols = group_ > 0 ? group_ : head_dim;
    }
    return {rows, cols, head_dim / cols, (tokens + rows - 1) / rows};
  }

  // Stored parameters of the groups of one token block, one entry per group in a row (per channel
  // for axis=channel, so the row loop reads them as arrays).
  struct BlockParams {
    BlockParams(const Tiling& t, int64_t head_dim)
        : scale(size_t(t.groups_per_row)), minimum(size_t(t.groups_per_row)), divisor(size_t(t.groups_per_row)),
          reciprocal(size_t(t.groups_per_row)), lo(size_t(t.groups_per_row)), hi(size_t(t.groups_per_row)),
          ones(size_t(head_dim), 1.0f), zeros(size_t(head_dim), 0.0f) {}
    std::vector<float> scale, minimum, divisor, reciprocal, lo, hi, ones, zeros;
    bool all_reciprocals = true;  // every divisor has a finite reciprocal: the kernels may multiply
  };

  // Fits the groups of token block `block` and returns its row range.
  std::pair<int64_t, int64_t> fit_block(ConstMatrixView x, const Tiling& t, int64_t block, BlockParams& p) const {
    const int64_t r0 = block * t.rows_per_tile;
    const int64_t r1 = std::min(x.rows, r0 + t.rows_per_tile);
    if (t.cols_per_group == 1) {
      int_kernels::column_min_max(x.row(r0), r1 - r0, x.cols, p.lo.data(), p.hi.data());
    } else if (t.cols_per_group == x.cols) {  // rows are contiguous: one segment
      int_kernels::min_max(x.row(r0), (r1 - r0) * x.cols, p.lo[0], p.hi[0]);
    } else {
      for (int64_t g = 0; g < t.groups_per_row; ++g) {
        const int64_t c0 = g * t.cols_per_group;
        int_kernels::min_max(x.row(r0) + c0, t.cols_per_group, p.lo[g], p.hi[g]);
        for (int64_t r = r0 + 1; r < r1; ++r) {
          float l, h;
          int_kernels::min_max(x.row(r) + c0, t.cols_per_group, l, h);
          p.lo[g] = std::min(p.lo[g], l);
          p.hi[g] = std::max(p.hi[g], h);
        }
      }
    }
    for (int64_t g = 0; g < t.groups_per_row; ++g) {
      if (asym_) {
        p.minimum[g] = codec::stored_minimum(p.lo[g], scale_type_);
        p.scale[g] = codec::int_asym_scale(p.minimum[g], p.hi[g], bits_, scale_type_);
      } else {
        p.minimum[g] = 0.0f;
        p.scale[g] = codec::int_sym_scale(std::max(-p.lo[g], p.hi[g]), bits_, scale_type_);
      }
      p.divisor[g] = codec::int_divisor(p.scale[g]);
      p.reciprocal[g] = int_kernels::fast_reciprocal(p.divisor[g]);
    }
    p.all_reciprocals = std::find(p.reciprocal.begin(), p.reciprocal.end(), 0.0f) == p.reciprocal.end();
    return {r0, r1};
  }

  // y = level(x) * scale (+ minimum) for one row, or the levels themselves.
  void apply_row(const float* x, const Tiling& t, const BlockParams& p, bool levels_only, float* y) const {
    const float qmax = codec::int_sym_qmax(bits_), top = codec::int_asym_top(bits_);
    if (t.cols_per_group == 1) {
      const float* scale = levels_only ? p.ones.data() : p.scale.data();
      const float* reciprocal = p.all_reciprocals ? p.reciprocal.data() : nullptr;
      if (asym_) {
        const float* out_min = levels_only ? p.zeros.data() : p.minimum.data();
        int_kernels::asym_columns(x, p.minimum.data(), p.divisor.data(), reciprocal, scale, out_min, top, y,
                                  t.groups_per_row);
      } else {
        int_kernels::sym_columns(x, p.divisor.data(), reciprocal, scale, qmax, y, t.groups_per_row);
      }
      return;
    }
    for (int64_t g = 0; g < t.groups_per_row; ++g) {
      const int64_t c0 = g * t.cols_per_group;
      const float scale = levels_only ? 1.0f : p.scale[g];
      if (asym_) {
        const float out_min = levels_only ? 0.0f : p.minimum[g];
        int_kernels::asym_segment(x + c0, p.minimum[g], p.divisor[g], p.reciprocal[g], scale, out_min, top, y + c0,
                                  t.cols_per_group);
      } else {
        int_kernels::sym_segment(x + c0, p.divisor[g], p.reciprocal[g], scale, qmax, y + c0, t.cols_per_group);
      }
    }
  }

  std::string spec_;
  int bits_;
  GroupAxis axis_;
  int64_t group_;
  bool asym_;
  ScaleType scale_type_;
};

SchemePtr make_int(const SchemeParams& p) {
  const std::string& axis_name = p.choice("axis");
  const GroupAxis axis = axis_name == "channel" ? GroupAxis::channel
                         : axis_name == "token" ? GroupAxis::token
                                                : GroupAxis::tensor;
  const int64_t group = p.has("group") ? p.integer("group") : 0;
  if (axis == GroupAxis::tensor && group > 0) {
    throw InputError("scheme spec '" + p.canonical() +
                     "': 'group' needs axis=channel (tokens per group) or axis=token (channels per group)");
  }
  return std::make_shared<IntScheme>(p.canonical(), static_cast<int>(p.integer("bits")), axis, group,
                                     p.flag("asym"), parse_scale_type(p.choice("scale")));
}

}  // namespace

void register_int_family(Registry& registry) {
  FamilyInfo f;
  f.name = "int";
  f.summary = "integer codes with absmax (symmetric) or min/max (asym) scales per tensor, channel or token";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = {
      {.name = "bits", .kind = ParamDomain::Kind::integer, .help = "code width",
       .default_value = "8", .min = 2, .max = 8, .in_canonical = true},
      {.name = "axis", .kind = ParamDomain::Kind::choice,
       .help = "one scale per tensor, per channel (across tokens) or per token (across channels)",
       .default_value = "tensor", .choices = {"tensor", "channel", "token"}, .in_canonical = true},
      {.name = "group", .kind = ParamDomain::Kind::integer,
       .help = "group size along the other axis: tokens per group for axis=channel, channels for axis=token",
       .min = 1, .max = 1 << 16, .examples = {"32", "64", "128"}},
      {.name = "asym", .kind = ParamDomain::Kind::flag,
       .help = "min/max with a minimum per group (x = code*s + min) instead of symmetric absmax"},
      {.name = "scale", .kind = ParamDomain::Kind::choice, .help = "dtype the scales (and minima) are stored in",
       .default_value = "f32", .choices = {"f32", "f16", "bf16"}},
  };
  f.make = make_int;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
