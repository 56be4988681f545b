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

// Throws InputError naming the path when the directory is missing or not writable, or when a write
// fails (with the OS's reason, e.g. "No space left on device"). A character device or FIFO
// (/dev/stdout) is written in place, since a rename cannot replace it.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);

// Fails early (InputError) when `path` could not be created (or, for a device or FIFO, opened for
// writing): used before any long computation.
void require_writable(const std::string& path);

// Whether two paths name one file: equivalent when both exist (two spellings, a hard link), else the
// same absolute path once normalised. Never for a device or FIFO (/dev/null takes any number of writes).
bool same_file(const std::string& a, const std::string& b);

// Throws InputError when the output `path` names the same file as one of `inputs` (empty ones are
// skipped; a file reached by two spellings or a hard link counts): writing it would destroy what
// the command read. `what` says which option gave the output, e.g. "--out".
void require_not_an_input(const std::string& path, const std::vector<std::string>& inputs, const std::string& what);

}  // namespace kvtune
