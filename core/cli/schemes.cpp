// kvtune schemes [--json]
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "plugins.h"
#include "kvtune/policy.h"

namespace kvtune::cli {
namespace {

const char* kind_name(ParamDomain::Kind k) {
  switch (k) {
    case ParamDomain::Kind::integer:
      return "integer";
    case ParamDomain::Kind::choice:
      return "choice";
    case ParamDomain::Kind::flag:
      return "flag";
    case ParamDomain::Kind::real:
      return "real";
  }
  return "";
}

nlohmann::json domain_json(const ParamDomain& d) {
  nlohmann::json p = {{"name", d.name}, {"kind", kind_name(d.kind)}, {"domain", d.describe()}, {"help", d.help}};
  if (!d.default_value.empty()) p["default"] = d.default_value;
  if (d.kind == ParamDomain::Kind::integer) p["min"] = d.min, p["max"] = d.max;
  if (d.kind == ParamDomain::Kind::choice) p["choices"] = d.choices;
  return p;
}

void print_domain(const ParamDomain& d) {
  std::cout << "    " << d.name << " = " << d.describe();
  if (!d.default_value.empty()) std::cout << " (default " << d.default_value << ")";
  std::cout << "  " << d.help << "\n";
}

int run(bool json) {
  const Registry& registry = command_registry();
  if (json) {
    nlohmann::json families = nlohmann::json::array();
    for (const FamilyInfo* f : registry.families()) {
      nlohmann::json params = nlohmann::json::array();
      for (const ParamDomain& d : f->params) params.push_back(domain_json(d));
      families.push_back({{"name", f->name}, {"summary", f->summary}, {"origin", f->origin}, {"params", params}});
    }
    nlohmann::json policy = nlohmann::json::array();
    for (const ParamDomain& d : policy_domains()) policy.push_back(domain_json(d));
    std::cout << nlohmann::json{{"families", families}, {"policy", policy}}.dump(2) << "\n";
    return 0;
  }
  for (const FamilyInfo* f : registry.families()) {
    std::cout << f->name << "  -  " << f->summary << "\n    from " << f->origin << "\n";
    for (const ParamDomain& d : f->params) print_domain(d);
  }
  std::cout << "\npolicy keys, accepted by every family (e.g. q4_0:rotation=hadamard):\n";
  for (const ParamDomain& d : policy_domains()) print_domain(d);
  return 0;
}

}  // namespace

Runner add_schemes(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  app.add_flag("--json", *json, "print JSON");
  return [json] { return run(*json); };
}

}  // namespace kvtune::cli
