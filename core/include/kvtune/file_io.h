// Whole-file reads and atomic writes: an output is written to a temporary file beside its target
// and renamed into place, so a failure never leaves a half-written file behind.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace kvtune {

// Throws InputError naming the path when it cannot be read.
std::vector<std::byte> read_file(const std::string& path);

// Throws InputError naming the path when the directory is missing or not writable.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);

// Fails early (InputError) when `path` could not be created: used before any long computation.
void require_writable(const std::string& path);

}  // namespace kvtune
