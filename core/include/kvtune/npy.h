// NumPy .npy files (format versions 1-3): float16/float32/float64, little-endian or byte-order
// free, C or Fortran order, rank 1 or 2. Every value is checked finite on load.
#pragma once

#include <string>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

struct NpyArray {
  std::vector<int64_t> shape;  // as stored: [n] or [rows, cols]
  std::string dtype;           // "float16", "float32", "float64"
  Matrix values;               // rank 1 becomes [1, n]
};

// Throws InputError naming the file and the problem (bad magic, unsupported dtype, rank not 1-2,
// truncated data, NaN/Inf with its index).
NpyArray read_npy(const std::string& path);

// Parses an in-memory .npy image; `name` is used in messages.
NpyArray parse_npy(const std::vector<std::byte>& bytes, const std::string& name);

// float32 .npy image of `m`; `as_vector` writes shape (n,) for a single row.
std::vector<std::byte> npy_image(ConstMatrixView m, bool as_vector = false);

// Writes atomically (see file_io.h).
void write_npy(const std::string& path, ConstMatrixView m, bool as_vector = false);

}  // namespace kvtune
