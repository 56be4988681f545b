// The `tokenint` family: one integer scale (and zero point) per token and head, with the rounding
// and zero-point conventions of serving runtimes' cache-write kernels: vLLM's int8/int4
// per_token_head caches, LMDeploy's PyTorch engine and TurboMind, and SGLang's --int8-kv-cache as
// PR #22004 proposed it (closed unmerged). The codec (formulas, rounding, the constant-row rule) is tokenint_codec.h; docs/schemes.md has the
// formulas, the packed layout and which spec reproduces which runtime.
//
// Packed layout of a [T, D] block: T records of record_bytes(D), token after token:
//   [scale: f32, f16 or bf16][zero=min|float|mid: m or z in the same dtype; zero=int: z, 1 byte,
//   or nothing with zero_in_scale][ceil(D * bits / 8) code bytes, little-endian bit stream]
// The family runs on the CPU path only (no device_format).
#include <map>
#include <string>
#include <vector>

#include "builtin.h"
#include "float_param.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "tokenint_codec.h"
#include "tokenint_kernels.h"

namespace kvtune::builtin {
namespace {

using tokenint::Config;
using tokenint::Round;
using tokenint::Zero;

class TokenIntScheme final : public Scheme {
 public:
  TokenIntScheme(std::string spec, Config config) : spec_(std::move(spec)), c_(config) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "tokenint"; }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(tokens * tokenint::record_bytes(c_, head_dim));
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    const int64_t record = tokenint::record_bytes(c_, x.cols);
    auto* out = reinterpret_cast<uint8_t*>(packed.data());
    for (int64_t r = 0; r < x.rows; ++r) tokenint::encode_row(x.row(r), x.cols, c_, out + r * record);
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const int64_t record = tokenint::record_bytes(c_, out.cols);
    const auto* in = reinterpret_cast<const uint8_t*>(packed.data());
    for (int64_t r = 0; r < out.rows; ++r) tokenint::decode_row(in + r * record, out.cols, c_, out.row(r));
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    tokenint::roundtrip_rows(x.data, x.rows, x.cols, c_, out.data);
  }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();  // no device_format: the CPU path only
    t.rows_independent = true;           // a token's scale and zero span only its channels
    t.channel_order_invariant = true;    // and all of them
    // Truncation loses the top code when x / s lands just below it, SGLang's midpoint zero point
    // puts both extremes on half steps, and clearing the scale's 4 low mantissa bits truncates it:
    // a re-fit one ulp low loses 16 ulps (2^-19 relative). Re-fitting a round trip moves values.
    t.requantize_drifts = c_.round == Round::trunc || c_.zero == Zero::mid || c_.zero_in_scale;
    return t;
  }

 private:
  std::string spec_;
  Config c_;
};

const std::vector<ParamDomain>& tokenint_domains() {
  static const std::vector<ParamDomain> domains = {
      {.name = "bits", .kind = ParamDomain::Kind::integer, .help = "code width b",
       .default_value = "8", .min = 2, .max = 8, .in_canonical = true, .examples = {"4", "8"}},
      {.name = "zero", .kind = ParamDomain::Kind::choice,
       .help = "none = symmetric absmax, s = absmax/(2^(b-1)-1) (vLLM int8); min = a float minimum, x = q*s + min "
               "(TurboMind); float = a float zero point z = -min/s, x = (q - z)*s (LMDeploy PyTorch); int = an "
               "integer zero point round(-min/s) in [0, 2^b-1] (vLLM int4); mid = the midpoint (min+max)/2 with "
               "signed codes (SGLang)",
       .default_value = "none", .choices = {"none", "min", "float", "int", "mid"}, .in_canonical = true},
      {.name = "round", .kind = ParamDomain::Kind::choice,
       .help = "code rounding: even = nearest, ties to even; away = nearest, ties away from zero; trunc = toward "
               "zero (a float->int cast); up = trunc(v + 0.5) (LMDeploy's (v + 0.5).to(uint8); unsigned codes only)",
       .default_value = "even", .choices = {"even", "away", "trunc", "up"}},
      {.name = "scale", .kind = ParamDomain::Kind::choice,
       .help = "dtype the scale and the zero/minimum/midpoint are stored in (codes use the float32 values as "
               "computed, dequantize the stored ones)",
       .default_value = "f32", .choices = {"f32", "f16", "bf16"}},
      {.name = "min_scale", .kind = ParamDomain::Kind::real,
       .help = "floor of the scale, s = max(s, min_scale), a float32 >= 0 (vLLM: 1e-6)", .default_value = "0"},
      {.name = "reciprocal", .kind = ParamDomain::Kind::flag,
       .help = "codes from x * (1/s), 1/s in float32, instead of x / s (vLLM's Triton kernels)"},
      {.name = "zero_in_scale", .kind = ParamDomain::Kind::flag,
       .help = "zero=int, bits <= 4, scale=f32: the zero point in the float32 scale's 4 low mantissa bits, cleared "
               "for decoding (vLLM int4_per_token_head); otherwise zero=int stores it in one byte"},
  };
  return domains;
}

ScaleType scale_type(const std::string& s) {
  return s == "f16" ? ScaleType::f16 : s == "bf16" ? ScaleType::bf16 : ScaleType::f32;
}

Zero zero_mode(const std::string& z) {
  return z == "min"     ? Zero::min
         : z == "float" ? Zero::real
         : z == "int"   ? Zero::integer
         : z == "mid"   ? Zero::mid
                        : Zero::none;
}

Round round_mode(const std::string& r) {
  return r == "away" ? Round::away : r == "trunc" ? Round::trunc : r == "up" ? Round::up : Round::even;
}

SchemePtr make_tokenint(const SchemeParams& p) {
  const std::string where = "scheme spec '" + p.canonical() + "': ";
  Config c;
  c.bits = static_cast<int>(p.integer("bits"));
  c.zero = zero_mode(p.choice("zero"));
  c.round = round_mode(p.choice("round"));
  c.scale = scale_type(p.choice("scale"));
  c.reciprocal = p.flag("reciprocal");
  c.zero_in_scale = p.flag("zero_in_scale");
  const double min_scale = p.real("min_scale");
  if (min_scale < 0.0) throw InputError(where + "'min_scale' must be >= 0 (found " + p.values().at("min_scale") + ")");
  c.min_scale = min_scale == 0.0 ? 0.0f : positive_float32(p, "min_scale");
  if (min_scale > 0.0 && c.min_scale == 0.0f) {
    throw InputError(where + "'min_scale' = " + p.values().at("min_scale") +
                     " does not fit a float32 (1.4e-45 .. 3.4e38, or 0)");
  }
  if (c.round == Round::up && tokenint::signed_codes(c.zero)) {
    throw InputError(where + "'round=up' is LMDeploy's trunc(v + 0.5) of unsigned codes; zero=" + p.choice("zero") +
                     " has signed codes, where it would round negative values toward zero (use round=even, away "
                     "or trunc)");
  }
  if (c.zero_in_scale) {
    if (c.zero != Zero::integer) {
      throw InputError(where + "'zero_in_scale' needs zero=int (vLLM hides its integer zero point in the scale's "
                               "4 low mantissa bits); found zero=" + p.choice("zero"));
    }
    if (c.bits > 4) {
      throw InputError(where + "'zero_in_scale' needs bits <= 4: the zero point (0.." +
                       std::to_string((1 << c.bits) - 1) + " at bits=" + std::to_string(c.bits) +
                       ") must fit the scale's 4 low mantissa bits");
    }
    if (c.scale != ScaleType::f32) {
      throw InputError(where + "'zero_in_scale' needs scale=f32: the zero point lives in the low mantissa bits of a "
                               "float32 scale; found scale=" + p.choice("scale"));
    }
  }
  // min_scale is spelled as its float32 value (the shortest digits that read back the same), so
  // min_scale=1e-6 and min_scale=0.000001 are one scheme with one canonical spec.
  std::map<std::string, std::string> values = p.values();
  values.erase("min_scale");
  if (c.min_scale > 0.0f) values["min_scale"] = spell_float32(c.min_scale);
  return std::make_shared<TokenIntScheme>(canonical_spec("tokenint", tokenint_domains(), values), c);
}

}  // namespace

void register_tokenint_family(Registry& registry) {
  FamilyInfo f;
  f.name = "tokenint";
  f.summary = "one integer scale (and zero point) per token and head with the rounding and zero-point conventions of "
              "serving runtimes' cache writes (vLLM, LMDeploy; SGLang's unmerged INT8 proposal)";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = tokenint_domains();
  f.make = make_tokenint;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
