// Helpers for the tests of the shipped runtime tables (configs/runtimes/*.toml).
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/runtime_table.h"
#include "test_support.h"

namespace kvtune::testing {

inline RuntimeTable shipped(const std::string& name) {
  return load_runtime_table(config_dir() / "runtimes" / (name + ".toml"),
                            builtin_registry());
}

// The option called `name` in `view`, or nullptr (a pointer into `view`: keep the view alive).
inline const RuntimeOption* find(const RuntimeView& view, const std::string& name) {
  for (const RuntimeOption& o : view.options) {
    if (o.name == name) return &o;
  }
  return nullptr;
}

inline bool has(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

inline bool any_contains(const std::vector<std::string>& list, const std::string& part) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

}  // namespace kvtune::testing
