// Errors that reach the user. InputError means "the input was wrong" (exit status 2): its message
// names the file, key or value at fault and what was expected. Anything else is a bug.
#pragma once

#include <stdexcept>
#include <string>

namespace kvtune {

class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Joins items as "a, b, c" for "valid ones are: ..." messages.
std::string join(const auto& items, const char* sep = ", ") {
  std::string out;
  for (const auto& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

}  // namespace kvtune
