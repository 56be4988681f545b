#include "kvtune/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kvtune/error.h"

namespace kvtune {
namespace {

std::vector<std::string> domain_names(const FamilyInfo& f) {
  std::vector<std::string> names;
  for (const ParamDomain& d : f.params) names.push_back(d.name + " (" + d.describe() + ")");
  return names;
}

std::string bad_value(const std::string& spec, const ParamDomain& d, const std::string& value) {
  return "scheme spec '" + spec + "': parameter '" + d.name + "' = '" + value + "' is not valid; expected " +
         d.describe();
}

// Validates one written value against its domain and returns the normalized spelling.
std::string validate_value(const std::string& spec, const ParamDomain& d, const std::optional<std::string>& value) {
  if (d.kind == ParamDomain::Kind::flag) {
    if (value && *value != "true") {
      throw InputError("scheme spec '" + spec + "': '" + d.name + "' is a flag; write it bare (found '" + d.name +
                       "=" + *value + "')");
    }
    return "";
  }
  if (!value || value->empty()) {
    throw InputError("scheme spec '" + spec + "': parameter '" + d.name + "' needs a value (" + d.describe() + ")");
  }
  const std::string& v = *value;
  switch (d.kind) {
    case ParamDomain::Kind::integer: {
      int64_t n = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
      if (ec != std::errc() || end != v.data() + v.size() || n < d.min || n > d.max ||
          (d.power_of_two && (n & (n - 1)) != 0)) {
        throw InputError(bad_value(spec, d, v));
      }
      return std::to_string(n);
    }
    case ParamDomain::Kind::choice:
      if (std::find(d.choices.begin(), d.choices.end(), v) == d.choices.end()) throw InputError(bad_value(spec, d, v));
      return v;
    case ParamDomain::Kind::real: {
      double x = 0;
      const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec != std::errc() || end != v.data() + v.size() || !std::isfinite(x)) throw InputError(bad_value(spec, d, v));
      return v;
    }
    case ParamDomain::Kind::flag:
      break;
  }
  return v;
}

}  // namespace

void Registry::add(FamilyInfo family) {
  if (const auto it = index_.find(family.name); it != index_.end()) {
    throw InputError("scheme family '" + family.name + "' from " + family.origin + " is already registered by " +
                     families_[it->second].origin);
  }
  index_.emplace(family.name, families_.size());
  families_.push_back(std::move(family));
}

const FamilyInfo* Registry::find(std::string_view name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &families_[it->second];
}

std::vector<const FamilyInfo*> Registry::families() const {
  std::vector<const FamilyInfo*> out;
  for (const FamilyInfo& f : families_) out.push_back(&f);
  return out;
}

std::vector<std::string> Registry::names() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : index_) out.push_back(name);
  return out;
}

SchemePtr Registry::make(std::string_view spec_text) const {
  const std::string spec(spec_text);
  const ParsedSpec parsed = parse_spec(spec_text);
  const FamilyInfo* family = find(parsed.family);
  if (family == nullptr) {
    throw InputError("unknown scheme '" + parsed.family + "' in spec '" + spec + "'; valid ones are: " + join(names()));
  }
  std::map<std::string, std::string> values;
  for (const auto& [key, value] : parsed.params) {
    const auto d = std::find_if(family->params.begin(), family->params.end(),
                                [&](const ParamDomain& p) { return p.name == key; });
    if (d == family->params.end()) {
      throw InputError("scheme spec '" + spec + "': unknown parameter '" + key + "' for '" + family->name + "'; " +
                       (family->params.empty() ? std::string("it takes no parameters")
                                               : "valid ones are: " + join(domain_names(*family))));
    }
    values[key] = validate_value(spec, *d, value);
  }
  for (const ParamDomain& d : family->params) {
    if (!values.count(d.name) && !d.default_value.empty()) values[d.name] = d.default_value;
  }
  return family->make(SchemeParams(family->name, family->params, std::move(values)));
}

}  // namespace kvtune
