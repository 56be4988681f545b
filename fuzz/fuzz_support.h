// What the fuzz targets share: a scratch file for readers that take a path, and the rule that a
// reader's only answer to bad bytes is an InputError (anything else escaping is a finding: libFuzzer
// reports the uncaught exception, the sanitizers the rest).
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "kvtune/error.h"

namespace kvtune::fuzz {

// A directory of this process's own (targets may run side by side).
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d =
        std::filesystem::temp_directory_path() / ("kvtune-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const std::filesystem::path p = scratch_dir() / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), std::streamsize(size));
  return p.string();
}

// Runs `f`; an InputError is the expected answer to bad input.
template <typename F>
void expect_only_input_errors(F&& f) {
  try {
    f();
  } catch (const InputError&) {
  }
}

}  // namespace kvtune::fuzz
