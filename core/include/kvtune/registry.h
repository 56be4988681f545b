// The scheme registry: families by name, each with its parameter domains, a factory and where it
// came from. Built-ins are added by an explicit list (plugins/builtin_families.cmake), out-of-tree
// plugins through the plugin loader; nothing downstream can tell them apart.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "kvtune/scheme.h"
#include "kvtune/spec.h"

namespace kvtune {

struct FamilyInfo {
  std::string name;
  std::string summary;
  std::vector<ParamDomain> params;
  std::string origin;  // "builtin (plugins/int/int_family.cpp:120)" or a plugin path
  std::function<SchemePtr(const SchemeParams&)> make;
};

class Registry {
 public:
  // Refuses a name that is already taken, naming both origins.
  void add(FamilyInfo family);

  // Parses and validates a spec; errors name the bad family/key/value and list the valid ones.
  SchemePtr make(std::string_view spec) const;

  const FamilyInfo* find(std::string_view name) const;
  std::vector<const FamilyInfo*> families() const;  // in registration order
  std::vector<std::string> names() const;           // sorted

 private:
  std::vector<FamilyInfo> families_;
  std::map<std::string, size_t, std::less<>> index_;  // name -> position in families_
};

}  // namespace kvtune
