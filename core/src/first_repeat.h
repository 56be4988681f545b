// The one "given twice" check the input readers share: a list of contexts, depths, samples or
// layers that names an entry twice would weigh it twice.
#pragma once

#include <optional>
#include <set>
#include <vector>

namespace kvtune::detail {

// The index of the first entry equal to an earlier one, if any.
template <class T>
std::optional<size_t> first_repeat(const std::vector<T>& values) {
  std::set<T> seen;
  for (size_t i = 0; i < values.size(); ++i) {
    if (!seen.insert(values[i]).second) return i;
  }
  return std::nullopt;
}

}  // namespace kvtune::detail
