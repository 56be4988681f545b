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

// A plugin's code crashed, called exit() or ran past its time limit in the child process that
// kvtune ran it in (isolation.h). An InputError, so that whoever turns input errors into a failed
// point or exit status 2 treats a broken plugin the same way; the message names the plugin
// scheme, where the plugin came from and the signal, exit status or time limit.
class PluginFault : public InputError {
 public:
  using InputError::InputError;
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
