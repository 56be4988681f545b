// The `int` family: symmetric absmax or asymmetric min/max integer quantization with one scale per
// tensor, per channel or per token, optionally in groups along the other axis. Formulas and the
// packed layout are in kvtune/codecs/int_codec.h and docs/schemes.md.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

using codec::int_asym_level;
using codec::int_divisor;
using codec::int_sym_level;

ScaleType parse_scale_type(const std::string& s) {
  return s == "f16" ? ScaleType::f16 : (s == "bf16" ? ScaleType::bf16 : ScaleType::f32);
}

// Min and max of n floats, in eight independent lanes so the compiler can use minps/maxps.
void segment_min_max(const float* x, int64_t n, float& lo, float& hi) {
  float l[8], h[8];
  for (int k = 0; k < 8; ++k) l[k] = h[k] = x[0];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      l[k] = x[i + k] < l[k] ? x[i + k] : l[k];
      h[k] = x[i + k] > h[k] ? x[i + k] : h[k];
    }
  }
  for (; i < n; ++i) {
    l[0] = x[i] < l[0] ? x[i] : l[0];
    h[0] = x[i] > h[0] ? x[i] : h[0];
  }
  lo = l[0];
  hi = h[0];
  for (int k = 1; k < 8; ++k) {
    lo = l[k] < lo ? l[k] : lo;
    hi = h[k] > hi ? h[k] : hi;
  }
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
    require_shape(x);
    const Tiling t = tiling(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* scales = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* mins = scales + t.groups() * codec::scale_bytes(scale_type_);
    uint8_t* codes = mins + (asym_ ? t.groups() * codec::scale_bytes(scale_type_) : 0);
    const int offset = codec::int_sym_offset(bits_);
    for_each_row_levels(x, t, [&](int64_t r, const float* levels, const RowParams& p) {
      if (r % t.rows_per_tile == 0) {  // first row of a token block: store its groups' parameters
        const int64_t first = (r / t.rows_per_tile) * t.groups_per_row;
        for (int64_t g = 0; g < t.groups_per_row; ++g) {
          codec::write_scale(scales, first + g, p.group_scale[g], scale_type_);
          if (asym_) codec::write_scale(mins, first + g, p.group_min[g], scale_type_);
        }
      }
      const int64_t base = r * x.cols;
      for (int64_t c = 0; c < x.cols; ++c) {
        const int level = static_cast<int>(levels[c]);
        codec::pack_code(codes, base + c, bits_, static_cast<uint32_t>(asym_ ? level : level + offset));
      }
    });
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_shape(out);
    if (packed.size() != footprint(out.rows, out.cols)) {
      throw InputError("'" + spec_ + "': packed block has " + std::to_string(packed.size()) + " bytes, expected " +
                       std::to_string(footprint(out.rows, out.cols)));
    }
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
    require_shape(x);
    const Tiling t = tiling(x.rows, x.cols);
    for_each_row_levels(x, t, [&](int64_t r, const float* levels, const RowParams& p) {
      float* y = out.row(r);
      const int64_t n = x.cols;
      if (asym_) {
        for (int64_t c = 0; c < n; ++c) y[c] = levels[c] * p.scale[c] + p.min[c];
      } else {
        for (int64_t c = 0; c < n; ++c) y[c] = levels[c] * p.scale[c];
      }
    });
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

  void require_shape(ConstMatrixView x) const {
    const std::string why = check_shape(x.rows, x.cols);
    if (!why.empty()) throw InputError(why);
  }

  // Per-row view of the quantization parameters, expanded to one entry per channel so the inner
  // loops are element-wise and vectorize.
  struct RowParams {
    std::vector<float> group_scale, group_min;  // [groups_per_row] stored values
    std::vector<float> scale, min, divisor;     // [head_dim]
  };

  void set_groups(const Tiling& t, const float* lo, const float* hi, RowParams& p) const {
    for (int64_t g = 0; g < t.groups_per_row; ++g) {
      if (asym_) {
        p.group_min[g] = codec::stored_minimum(lo[g], scale_type_);
        p.group_scale[g] = codec::int_asym_scale(p.group_min[g], hi[g], bits_, scale_type_);
      } else {
        p.group_scale[g] = codec::int_sym_scale(std::max(-lo[g], hi[g]), bits_, scale_type_);
        p.group_min[g] = 0.0f;
      }
    }
    for (int64_t c = 0, n = t.groups_per_row * t.cols_per_group; c < n; ++c) {
      const int64_t g = c / t.cols_per_group;
      p.scale[c] = p.group_scale[g];
      p.min[c] = p.group_min[g];
      p.divisor[c] = int_divisor(p.group_scale[g]);
    }
  }

  // Calls emit(row, levels, params) for every row, in order, with the float-valued levels.
  template <class Emit>
  void for_each_row_levels(ConstMatrixView x, const Tiling& t, Emit&& emit) const {
    const int64_t d = x.cols;
    RowParams p{std::vector<float>(t.groups_per_row), std::vector<float>(t.groups_per_row),
                std::vector<float>(d), std::vector<float>(d), std::vector<float>(d)};
    std::vector<float> lo(t.groups_per_row), hi(t.groups_per_row), levels(d);
    const float qmax = codec::int_sym_qmax(bits_), top = codec::int_asym_top(bits_);
    for (int64_t block = 0; block < t.token_blocks; ++block) {
      const int64_t r0 = block * t.rows_per_tile;
      const int64_t r1 = std::min(x.rows, r0 + t.rows_per_tile);
      block_min_max(x, t, r0, r1, lo.data(), hi.data());
      set_groups(t, lo.data(), hi.data(), p);
      for (int64_t r = r0; r < r1; ++r) {
        const float* xr = x.row(r);
        float* lv = levels.data();
        const float* dv = p.divisor.data();
        if (asym_) {
          const float* m = p.min.data();
          for (int64_t c = 0; c < d; ++c) lv[c] = int_asym_level(xr[c], m[c], dv[c], top);
        } else {
          for (int64_t c = 0; c < d; ++c) lv[c] = int_sym_level(xr[c], dv[c], qmax);
        }
        emit(r, lv, p);
      }
    }
  }

  // Min and max of each group in rows [r0, r1).
  void block_min_max(ConstMatrixView x, const Tiling& t, int64_t r0, int64_t r1, float* lo, float* hi) const {
    if (t.cols_per_group == 1) {  // per channel: column-wise, element-wise across the row
      std::copy(x.row(r0), x.row(r0) + x.cols, lo);
      std::copy(x.row(r0), x.row(r0) + x.cols, hi);
      for (int64_t r = r0 + 1; r < r1; ++r) {
        const float* xr = x.row(r);
        for (int64_t c = 0; c < x.cols; ++c) {
          lo[c] = xr[c] < lo[c] ? xr[c] : lo[c];
          hi[c] = xr[c] > hi[c] ? xr[c] : hi[c];
        }
      }
      return;
    }
    for (int64_t g = 0; g < t.groups_per_row; ++g) {
      const int64_t c0 = g * t.cols_per_group;
      if (t.rows_per_tile == 1 || r1 - r0 == 1) {
        segment_min_max(x.row(r0) + c0, t.cols_per_group, lo[g], hi[g]);
        continue;
      }
      // Whole-tensor tile: rows are contiguous, so the tile is one segment when it spans all columns.
      if (t.cols_per_group == x.cols) {
        segment_min_max(x.row(r0), (r1 - r0) * x.cols, lo[g], hi[g]);
        continue;
      }
      float l, h;
      segment_min_max(x.row(r0) + c0, t.cols_per_group, lo[g], hi[g]);
      for (int64_t r = r0 + 1; r < r1; ++r) {
        segment_min_max(x.row(r) + c0, t.cols_per_group, l, h);
        lo[g] = std::min(lo[g], l);
        hi[g] = std::max(hi[g], h);
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
