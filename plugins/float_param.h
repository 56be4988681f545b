// A float32 parameter of a built-in family (a static scale): how the factory reads it and how the
// canonical spec spells it, so calibrate()'s result round-trips through the registry.
#pragma once

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <string>

#include "kvtune/spec.h"

namespace kvtune::builtin {

// The shortest decimal that parses back to the same float32. The factories read a `value` as a
// double (SchemeParams::real) and round it to float32; the shortest float32 digits lie within half
// a float ulp of the value, so that double rounding could in principle land on a neighbour; nine
// significant digits never can (they are within 2^-29 relative, far inside the half ulp of 2^-24).
inline std::string spell_float32(float v) {
  char buf[64];
  const auto shortest = std::to_chars(buf, buf + sizeof buf, v);
  std::string text(buf, shortest.ptr);
  if (static_cast<float>(std::stod(text)) == v) return text;
  const auto nine = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::general, 9);
  return std::string(buf, nine.ptr);
}

// Parameter `name` as a float32, or 0 when it does not fit one as a positive finite value (a
// subnormal double, which std::stod refuses, included): the caller says what is allowed.
inline float positive_float32(const SchemeParams& p, const std::string& name) {
  double v = 0;
  try {
    v = p.real(name);
  } catch (const std::out_of_range&) {
    v = 0;
  }
  const auto f = static_cast<float>(v);
  return f > 0.0f && std::isfinite(f) ? f : 0.0f;
}

}  // namespace kvtune::builtin
