#include "kvtune/spec.h"

#include <charconv>
#include <cmath>

#include "kvtune/error.h"

namespace kvtune {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

}  // namespace

ParsedSpec parse_spec(std::string_view text) {
  ParsedSpec out;
  const std::string_view whole = trim(text);
  const size_t colon = whole.find(':');
  out.family = std::string(trim(whole.substr(0, colon)));
  if (out.family.empty()) {
    throw InputError("scheme spec '" + std::string(text) + "': expected family[:key=value,...], found no family name");
  }
  if (colon == std::string_view::npos) return out;
  std::string_view rest = whole.substr(colon + 1);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    if (item.empty()) {
      throw InputError("scheme spec '" + std::string(text) + "': empty parameter (stray ',' or ':')");
    }
    const size_t eq = item.find('=');
    std::string key(trim(item.substr(0, eq)));
    if (key.empty()) throw InputError("scheme spec '" + std::string(text) + "': parameter with no name");
    std::optional<std::string> value;
    if (eq != std::string_view::npos) value = std::string(trim(item.substr(eq + 1)));
    for (const auto& [seen, _] : out.params) {
      if (seen == key) throw InputError("scheme spec '" + std::string(text) + "': parameter '" + key + "' given twice");
    }
    out.params.emplace_back(std::move(key), std::move(value));
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  return out;
}

SchemeParams::SchemeParams(std::string family, std::vector<ParamDomain> domains,
                           std::map<std::string, std::string> values)
    : family_(std::move(family)), domains_(std::move(domains)), values_(std::move(values)) {}

bool SchemeParams::has(const std::string& name) const { return values_.count(name) > 0; }

int64_t SchemeParams::integer(const std::string& name) const {
  const auto it = values_.find(name);
  if (it == values_.end()) return 0;
  int64_t v = 0;
  std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return v;
}

// Values were validated by the registry (std::from_chars, finite); parse the same way, which
// unlike std::stod does not throw on subnormal values.
double SchemeParams::real(const std::string& name) const {
  const auto it = values_.find(name);
  double v = 0.0;
  if (it != values_.end()) std::from_chars(it->second.data(), it->second.data() + it->second.size(), v);
  return v;
}

const std::string& SchemeParams::choice(const std::string& name) const {
  static const std::string empty;
  const auto it = values_.find(name);
  return it == values_.end() ? empty : it->second;
}

bool SchemeParams::flag(const std::string& name) const { return values_.count(name) > 0; }

std::string spec_with_param(std::string_view spec, const std::string& key, const std::string& value) {
  const ParsedSpec parsed = parse_spec(spec);
  std::string out = parsed.family + ":" + key + "=" + value;
  for (const auto& [k, v] : parsed.params) {
    if (k != key) out += "," + k + (v ? "=" + *v : "");
  }
  return out;
}

}  // namespace kvtune
