#include "kvtune/registry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kvtune/error.h"
#include "kvtune/policy.h"

namespace kvtune {
namespace {

std::vector<std::string> domain_names(const std::vector<ParamDomain>& domains) {
  std::vector<std::string> names;
  for (const ParamDomain& d : domains) names.push_back(d.name + " (" + d.describe() + ")");
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
  const auto& policy = policy_domains();
  std::map<std::string, std::string> values;
  std::vector<std::pair<std::string, std::string>> policy_values;
  for (const auto& [key, value] : parsed.params) {
    // A named copy: clang before 16 cannot capture a structured binding.
    auto named = [&name = key](const ParamDomain& p) { return p.name == name; };
    if (const auto d = std::find_if(policy.begin(), policy.end(), named); d != policy.end()) {
      policy_values.emplace_back(key, validate_value(spec, *d, value));
      continue;
    }
    const auto d = std::find_if(family->params.begin(), family->params.end(), named);
    if (d == family->params.end()) {
      std::vector<std::string> valid = domain_names(family->params);
      for (const std::string& p : domain_names(policy)) valid.push_back(p);
      throw InputError("scheme spec '" + spec + "': unknown parameter '" + key + "' for '" + family->name +
                       "'; valid ones are: " + join(valid));
    }
    values[key] = validate_value(spec, *d, value);
  }
  for (const ParamDomain& d : family->params) {
    if (!values.count(d.name) && !d.default_value.empty()) values[d.name] = d.default_value;
  }
  CachePolicy cache_policy;
  try {
    cache_policy = policy_from_values(policy_values);
  } catch (const InputError& e) {
    throw InputError("scheme spec '" + spec + "': " + e.what());
  }
  return apply_policy(family->make(SchemeParams(family->name, family->params, std::move(values))), cache_policy);
}

}  // namespace kvtune
