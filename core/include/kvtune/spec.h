// Scheme spec strings: family[:key=value,...] with bare flags ("asym"). Whitespace around tokens
// is ignored. Validation against a family's parameter domains lives in the registry.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvtune/scheme.h"

namespace kvtune {

struct ParsedSpec {
  std::string family;
  std::vector<std::pair<std::string, std::optional<std::string>>> params;  // in written order
};

// Throws InputError for syntax errors (empty family, empty key, duplicate key).
ParsedSpec parse_spec(std::string_view text);

// `spec` with `key` set to `value` (replacing its value where the spec gives one), as written
// (not canonical: the registry makes that).
std::string spec_with_param(std::string_view spec, const std::string& key, const std::string& value);

// family:key=value,... in domain order: parameters marked in_canonical always, others when set
// to something other than their default; flags bare. Inline so the header-only plugin SDK spells
// specs exactly as the registry does (a plugin's spec must round-trip through it).
inline std::string canonical_spec(const std::string& family, const std::vector<ParamDomain>& domains,
                                  const std::map<std::string, std::string>& values) {
  std::string out = family;
  bool first = true;
  for (const ParamDomain& d : domains) {
    const auto it = values.find(d.name);
    if (it == values.end()) continue;
    if (!d.in_canonical && d.kind != ParamDomain::Kind::flag && it->second == d.default_value) continue;
    out += first ? ":" : ",";
    first = false;
    out += d.kind == ParamDomain::Kind::flag ? d.name : d.name + "=" + it->second;
  }
  return out;
}

// Parameter values after validation against the family's domains, defaults filled in.
class SchemeParams {
 public:
  SchemeParams(std::string family, std::vector<ParamDomain> domains,
               std::map<std::string, std::string> values);

  const std::string& family() const { return family_; }
  bool has(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double real(const std::string& name) const;
  const std::string& choice(const std::string& name) const;
  bool flag(const std::string& name) const;
  // Every parameter that is set, by name (a set flag has the value ""): what a plugin's factory
  // receives.
  const std::map<std::string, std::string>& values() const { return values_; }

  std::string canonical() const { return canonical_spec(family_, domains_, values_); }

 private:
  std::string family_;
  std::vector<ParamDomain> domains_;
  std::map<std::string, std::string> values_;
};

}  // namespace kvtune
