// The `int` family: symmetric absmax or asymmetric min/max integer quantization with one scale per
// tensor, per channel or per token, optionally in groups along the other axis. Formulas and the
// packed layout are in kvtune/codecs/int_codec.h and docs/schemes.md. The scheme keeps its
// parameters as the DeviceFormat it reports, and its footprint, the tiling of its groups and the
// offsets of its scales, minima and codes all come from codec::packed_layout of that format, the
// same function the CUDA kernels lay their blocks out with (kvtune/codecs/packed_layout.h).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "builtin.h"
#include "int_kernels.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "prefetch.h"
#include "streaming_stores.h"

namespace kvtune::builtin {
namespace {

ScaleType parse_scale_type(const std::string& s) {
  return s == "f16" ? ScaleType::f16 : (s == "bf16" ? ScaleType::bf16 : ScaleType::f32);
}

class IntScheme final : public Scheme {
 public:
  IntScheme(std::string spec, int bits, GroupAxis axis, int64_t group, bool asym, ScaleType scale_type)
      : spec_(std::move(spec)), format_(make_format(bits, axis, group, asym, scale_type)) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "int"; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (format_.axis == GroupAxis::token && format_.group > 0 && head_dim % format_.group != 0) {
      return "'" + spec_ + "': group=" + std::to_string(format_.group) + " channels does not divide head_dim " +
             std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(layout(tokens, head_dim).bytes);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const Tiling t = layout(x.rows, x.cols);
    std::vector<std::byte> packed(static_cast<size_t>(t.bytes));
    auto* block_start = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* scales = block_start + t.scale_offset;
    uint8_t* mins = block_start + t.min_offset;
    uint8_t* codes = block_start + t.code_offset;
    const int bits = format_.bits;  // a local: the code stores below could alias a uint8_t member
    const int offset = format_.asymmetric ? 0 : codec::int_sym_offset(bits);
    BlockParams p(t, x.cols);
    std::vector<float> levels(static_cast<size_t>(x.cols));
    for (int64_t block = 0; block < codec::token_tiles(t); ++block) {
      const auto [r0, r1] = fit_block(x, t, block, p);
      for (int64_t g = 0; g < t.groups_per_row; ++g) {
        const int64_t group = block * t.groups_per_row + g;
        codec::write_scale(scales, group, p.scale[g], format_.scale_type);
        if (format_.asymmetric) codec::write_scale(mins, group, p.minimum[g], format_.scale_type);
      }
      for (int64_t r = r0; r < r1; ++r) {
        apply_row(x.row(r), t, p, /*levels_only=*/true, levels.data());
        for (int64_t c = 0; c < x.cols; ++c) {
          codec::pack_code(codes, r * x.cols + c, bits, static_cast<uint32_t>(codec::stored_level(levels[c]) + offset));
        }
      }
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const Tiling t = layout(out.rows, out.cols);
    const auto* block_start = reinterpret_cast<const uint8_t*>(packed.data());
    const uint8_t* scales = block_start + t.scale_offset;
    const uint8_t* mins = block_start + t.min_offset;
    const uint8_t* codes = block_start + t.code_offset;
    const int bits = format_.bits;
    const bool asym = format_.asymmetric;
    const ScaleType scale_type = format_.scale_type;
    for (int64_t r = 0; r < out.rows; ++r) {
      float* y = out.row(r);
      for (int64_t c = 0; c < out.cols; ++c) {
        const int64_t g = codec::group_index(t, r, c);
        const float s = codec::read_scale(scales, g, scale_type);
        const uint32_t code = codec::unpack_code(codes, r * out.cols + c, bits);
        y[c] = asym ? codec::int_asym_value(code, s, codec::read_scale(mins, g, scale_type))
                    : codec::int_sym_value(code, bits, s);
      }
    }
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const Tiling t = layout(x.rows, x.cols);
    if (format_.axis == GroupAxis::token &&
        int_kernels::token_groups(x.data, x.rows, x.cols, t.cols_per_group, format_.bits, format_.asymmetric,
                                  format_.scale_type, out.data, streams_output(out.data, out.rows, out.cols))) {
      return;
    }
    BlockParams p(t, x.cols);
    for (int64_t block = 0; block < codec::token_tiles(t); ++block) {
      const auto [r0, r1] = fit_block(x, t, block, p);
      if (t.cols_per_group == 1) {
        apply_column_tiles(x, r0, r1, p, streams_output(out.data, out.rows, out.cols), out);
        continue;
      }
      for (int64_t r = r0; r < r1; ++r) {
        prefetch_row(x, r + t.rows_per_tile);
        apply_row(x.row(r), t, p, /*levels_only=*/false, out.row(r));
      }
    }
  }

  // Per tensor, or per channel with one group of tokens over the whole block: the block's one set of
  // scales, fitted once, then every slice quantized against it.
  std::shared_ptr<const Scheme> with_scales_fixed_on(ConstMatrixView block) const override {
    if (traits().rows_independent || !check_shape(block.rows, block.cols).empty()) return nullptr;
    const Tiling t = layout(block.rows, block.cols);
    if (codec::token_tiles(t) != 1) return nullptr;
    auto fixed = std::make_shared<BlockParams>(t, block.cols);
    fit_block(block, t, 0, *fixed);
    return std::shared_ptr<const Scheme>(new IntScheme(*this, std::move(fixed)));  // the constructor is private
  }

  // A copy with scales fixed on a block has no device form: the kernels would fit their own.
  std::optional<DeviceFormat> device_format() const override {
    return fixed_ ? std::nullopt : std::optional<DeviceFormat>(format_);
  }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    // A token's scales span only its channels; fixed scales span no tokens.
    t.rows_independent = format_.axis == GroupAxis::token || fixed_;
    // Per channel in groups of tokens: a group's scales span its own tokens only.
    if (format_.axis == GroupAxis::channel && format_.group > 0 && !fixed_) t.row_block = format_.group;
    return t;
  }

 private:
  // Groups are tiles of rows_per_tile tokens x cols_per_group channels, numbered token block by
  // token block: group = (row / rows_per_tile) * groups_per_row + col / cols_per_group. The tiling
  // and the offsets are packed_layout's, never restated here.
  using Tiling = codec::PackedLayout;

  static DeviceFormat make_format(int bits, GroupAxis axis, int64_t group, bool asym, ScaleType scale_type) {
    DeviceFormat f;
    f.kind = CodecKind::integer;
    f.bits = static_cast<uint8_t>(bits);
    f.axis = axis;
    f.group = static_cast<int32_t>(group);
    f.scale_type = scale_type;
    f.asymmetric = asym;
    return f;
  }

  Tiling layout(int64_t tokens, int64_t head_dim) const { return codec::packed_layout(format_, tokens, head_dim); }

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

  // Fits the groups of token block `block` (or takes the fixed ones) and returns its row range.
  std::pair<int64_t, int64_t> fit_block(ConstMatrixView x, const Tiling& t, int64_t block, BlockParams& p) const {
    const int64_t r0 = block * t.rows_per_tile;
    const int64_t r1 = std::min(x.rows, r0 + t.rows_per_tile);
    if (fixed_) {
      p = *fixed_;
      return {r0, r1};
    }
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
    p.all_reciprocals = int_kernels::group_params(p.lo.data(), p.hi.data(), t.groups_per_row, format_.bits,
                                                  format_.asymmetric, format_.scale_type, p.minimum.data(),
                                                  p.scale.data(), p.divisor.data(), p.reciprocal.data());
    return {r0, r1};
  }

  // Asks for row r of the next token block while this block's levels are computed, so its
  // min/max pass finds it in cache instead of waiting on memory (nothing for a row past the end).
  static void prefetch_row(ConstMatrixView x, int64_t r) {
    if (r >= x.rows) return;
    prefetch_floats(x.row(r), x.cols);
  }

  // Rows r0..r1 of a block whose groups are its columns (axis=channel without channel groups), in
  // tiles of kTileRows rows that stay in L1 while the kernel runs down them sixteen columns at a
  // time. When the output streams, input and output exceed the last-level cache, so the next tile
  // comes from memory: its rows are read ahead meanwhile (the next block's min/max pass, or this
  // block's next tile, then finds them in cache; +25 % on groups of 32 on the AMD host). When they
  // fit, the hardware prefetcher keeps up from the cache and the software one only competed with it
  // (0.67 -> 0.70 of memcpy on the Intel host; docs/performance.md, twenty-sixth session).
  void apply_column_tiles(ConstMatrixView x, int64_t r0, int64_t r1, const BlockParams& p, bool stream,
                          MatrixView out) const {
    constexpr int64_t kTileRows = 32;
    const float* reciprocal = p.all_reciprocals ? p.reciprocal.data() : nullptr;
    for (int64_t r = r0; r < r1; r += kTileRows) {
      const int64_t n = std::min(kTileRows, r1 - r);
      const float* next = stream && r + 2 * n <= x.rows ? x.row(r + n) : nullptr;
      if (format_.asymmetric) {
        int_kernels::asym_column_tile(x.row(r), n, x.cols, p.minimum.data(), p.divisor.data(), reciprocal,
                                      p.scale.data(), p.minimum.data(), codec::int_asym_top(format_.bits), out.row(r),
                                      stream, next);
      } else {
        int_kernels::sym_column_tile(x.row(r), n, x.cols, p.divisor.data(), reciprocal, p.scale.data(),
                                     codec::int_sym_qmax(format_.bits), out.row(r), stream, next);
      }
    }
  }

  // y = level(x) * scale (+ minimum) for one row, or the levels themselves.
  void apply_row(const float* x, const Tiling& t, const BlockParams& p, bool levels_only, float* y) const {
    const float qmax = codec::int_sym_qmax(format_.bits), top = codec::int_asym_top(format_.bits);
    if (t.cols_per_group == 1) {
      const float* scale = levels_only ? p.ones.data() : p.scale.data();
      const float* reciprocal = p.all_reciprocals ? p.reciprocal.data() : nullptr;
      if (format_.asymmetric) {
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
      if (format_.asymmetric) {
        const float out_min = levels_only ? 0.0f : p.minimum[g];
        int_kernels::asym_segment(x + c0, p.minimum[g], p.divisor[g], p.reciprocal[g], scale, out_min, top, y + c0,
                                  t.cols_per_group);
      } else {
        int_kernels::sym_segment(x + c0, p.divisor[g], p.reciprocal[g], scale, qmax, y + c0, t.cols_per_group);
      }
    }
  }

  // A copy whose groups keep `fixed` whatever rows it is given (with_scales_fixed_on).
  IntScheme(const IntScheme& base, std::shared_ptr<const BlockParams> fixed) : IntScheme(base) {
    fixed_ = std::move(fixed);
  }

  std::string spec_;
  DeviceFormat format_;  // the scheme's parameters: the one description of its layout
  std::shared_ptr<const BlockParams> fixed_;  // with_scales_fixed_on: one token block's groups
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
