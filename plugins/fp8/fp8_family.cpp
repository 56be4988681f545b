// The `fp8` family: OCP FP8 E4M3 / E5M2 codes with a unit, static, calibrated or dynamic scale, as
// vLLM, SGLang and TensorRT-LLM store an FP8 KV cache. This file holds the parameters, their
// cross-checks and the canonical spelling; the codec is kvtune/codecs/fp8_codec.h and the scheme
// fp8_scheme.cpp. docs/schemes.md has the formulas and the byte layout.
#include <cmath>
#include <map>
#include <stdexcept>
#include <string>

#include "builtin.h"
#include "fp8_config.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "float_param.h"

namespace kvtune::builtin {
namespace {

const char* format_name(codec::Fp8Format f) { return f == codec::Fp8Format::e4m3 ? "e4m3" : "e5m2"; }

const char* scale_name(Fp8ScaleMode s) {
  switch (s) {
    case Fp8ScaleMode::unit:
      return "unit";
    case Fp8ScaleMode::fixed:
      return "static";
    case Fp8ScaleMode::calibrated:
      return "calibrated";
    case Fp8ScaleMode::dynamic:
      return "dynamic";
  }
  return "";
}

const char* granularity_name(Fp8Granularity g) {
  switch (g) {
    case Fp8Granularity::tensor:
      return "tensor";
    case Fp8Granularity::head:
      return "head";
    case Fp8Granularity::token:
      return "token";
  }
  return "";
}

SchemePtr make_fp8(const SchemeParams& p) {
  const std::string where = "scheme spec '" + p.canonical() + "': ";
  Fp8Config c;
  c.format = p.choice("format") == "e5m2" ? codec::Fp8Format::e5m2 : codec::Fp8Format::e4m3;
  const std::string& scale = p.choice("scale");
  c.scale = scale == "static"       ? Fp8ScaleMode::fixed
            : scale == "calibrated" ? Fp8ScaleMode::calibrated
            : scale == "dynamic"    ? Fp8ScaleMode::dynamic
                                    : Fp8ScaleMode::unit;
  const std::string& granularity = p.choice("granularity");
  c.granularity = granularity == "head"    ? Fp8Granularity::head
                  : granularity == "token" ? Fp8Granularity::token
                                           : Fp8Granularity::tensor;
  if (c.scale == Fp8ScaleMode::fixed) {
    if (!p.has("value")) throw InputError(where + "'scale=static' needs 'value' (the scale, a number > 0)");
    c.value = positive_float32(p, "value");
    if (c.value == 0.0f) {
      throw InputError(where + "'value' must be a scale > 0 that fits a float32 (1.2e-38 .. 3.4e38, subnormals too)");
    }
  } else if (p.has("value")) {
    throw InputError(where + "'value' is only for 'scale=static' (found scale=" + scale + ")");
  }
  if (c.granularity == Fp8Granularity::token && c.scale != Fp8ScaleMode::dynamic) {
    throw InputError(where + "'granularity=token' needs 'scale=dynamic'; a " + scale +
                     " scale is one constant per tensor or head (granularity=tensor|head)");
  }
  return make_fp8_scheme(c);
}

}  // namespace

const std::vector<ParamDomain>& fp8_domains() {
  static const std::vector<ParamDomain> domains = {
      {.name = "format", .kind = ParamDomain::Kind::choice,
       .help = "e4m3 (max 448, 3 mantissa bits) or e5m2 (max 57344, 2 mantissa bits)",
       .default_value = "e4m3", .choices = {"e4m3", "e5m2"}, .in_canonical = true},
      {.name = "scale", .kind = ParamDomain::Kind::choice,
       .help = "unit = 1 (no k_scale/v_scale), static = 'value', calibrated = amax/max fitted by calibration "
               "(on each block until calibrated), dynamic = amax/max of every group",
       .default_value = "unit", .choices = {"unit", "static", "calibrated", "dynamic"}, .in_canonical = true},
      {.name = "granularity", .kind = ParamDomain::Kind::choice,
       .help = "what one scale covers: the tensor or the head (both one scale per [T, D] block) or one token; "
               "token needs scale=dynamic",
       .default_value = "tensor", .choices = {"tensor", "head", "token"}},
      {.name = "value", .kind = ParamDomain::Kind::real,
       .help = "the scale of scale=static (x is stored as fp8(x / value)), rounded to float32"},
  };
  return domains;
}

std::string fp8_canonical_spec(const Fp8Config& c) {
  std::map<std::string, std::string> values = {
      {"format", format_name(c.format)},
      {"scale", scale_name(c.scale)},
      {"granularity", granularity_name(c.granularity)},
  };
  if (c.scale == Fp8ScaleMode::fixed) values["value"] = spell_float32(c.value);
  return SchemeParams("fp8", fp8_domains(), std::move(values)).canonical();
}

void register_fp8_family(Registry& registry) {
  FamilyInfo f;
  f.name = "fp8";
  f.summary = "OCP FP8 (E4M3/E5M2) codes with a unit, static, calibrated or dynamic scale, as GPU runtimes store";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = fp8_domains();
  f.make = make_fp8;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
