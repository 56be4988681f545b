// CSV fields as RFC 4180 writes them: quoted when they hold a comma, a quote or a line break,
// with quotes doubled. Shared by every CSV kvtune writes (needle tables, sweep frontiers).
#pragma once

#include <string>

namespace kvtune {

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace kvtune
