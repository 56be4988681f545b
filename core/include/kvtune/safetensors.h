// Safetensors files (https://github.com/huggingface/safetensors, "Format"): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and byte range
// in the data that follows, and an optional "__metadata__" object of strings. Opening a file
// reads and checks the header only; tensors are read one at a time (and a rank-3 tensor one slice
// of its first axis at a time), so a large file is never held whole.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

// The largest header accepted: the format's own reference implementation refuses headers above
// 100 000 000 bytes (safetensors/src/tensor.rs, MAX_HEADER_SIZE).
inline constexpr uint64_t kMaxSafetensorsHeader = 100'000'000;

struct SafetensorsTensor {
  std::string name;
  std::string dtype;           // "F16", "BF16", "F32", "F64", "I32", "I64"
  std::vector<int64_t> shape;  // [] is a scalar
  uint64_t begin = 0, end = 0; // byte range within the data section
  int64_t elements() const;
};

class SafetensorsFile {
 public:
  // Reads and checks the header: its length against the file and the cap, the JSON, every entry's
  // dtype, shape and offsets (each range the size its shape and dtype need, inside the data, no
  // two overlapping, no gaps). Throws InputError naming the file and the tensor.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }  // in file order
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const SafetensorsTensor* find(const std::string& name) const;
  // The tensor or an InputError naming the file and the tensor names it has.
  const SafetensorsTensor& get(const std::string& name) const;

  // A float tensor of rank 2 as [rows, cols], of rank 1 as [1, n], or slice `index` of the first
  // axis of a rank-3 tensor as [shape[1], shape[2]] (index must be -1 for ranks 1 and 2). Values
  // are converted to float32 and must be finite (InputError with the file, the tensor and the
  // element's index otherwise, as for .npy).
  Matrix read_matrix(const std::string& name, int64_t index = -1) const;
  // Rows [first, first + count) of what read_matrix returns, read without the rest (a capture's
  // case is one sample's rows of one head). InputError when the range is outside the rows.
  Matrix read_rows(const std::string& name, int64_t index, int64_t first, int64_t count) const;
  // An integer tensor (I32, I64) of rank 1.
  std::vector<int64_t> read_integers(const std::string& name) const;

 private:
  std::string path_;
  uint64_t data_start_ = 0;
  std::vector<SafetensorsTensor> tensors_;
  std::map<std::string, std::string> metadata_;

  std::vector<unsigned char> read_bytes(uint64_t begin, uint64_t count) const;
};

// A tensor to write: raw little-endian bytes of `dtype` in row-major order.
struct SafetensorsEntry {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<std::byte> data;
};

// The file image of `entries`, in their order, with `metadata` as __metadata__ (omitted when
// empty); the header is padded with spaces to a multiple of 8 bytes, as the reference
// implementation does. std::logic_error when an entry's bytes do not match its shape and dtype.
std::vector<std::byte> safetensors_image(const std::vector<SafetensorsEntry>& entries,
                                         const std::map<std::string, std::string>& metadata = {});

}  // namespace kvtune
