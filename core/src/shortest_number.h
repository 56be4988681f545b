// A double in the fewest digits that read back as the same value ("1e+300", not std::to_string's
// 301 digits; "0.1", not "0.100000"). Internal to core/src.
#pragma once

#include <charconv>
#include <string>

namespace kvtune::detail {

inline std::string shortest_number(double x) {
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, x);
  return ec == std::errc() ? std::string(buf, end) : std::to_string(x);
}

}  // namespace kvtune::detail
