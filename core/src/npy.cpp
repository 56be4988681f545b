#include "kvtune/npy.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kvtune/error.h"
#include "shortest_number.h"
#include "kvtune/file_io.h"
#include "kvtune/numeric/half.h"

namespace kvtune {
namespace {

// Value of `key` in the header dict, e.g. "'<f4'" or "(4096, 128)"; empty when absent.
std::string_view dict_value(std::string_view header, std::string_view key) {
  const std::string quoted = "'" + std::string(key) + "'";
  size_t at = header.find(quoted);
  if (at == std::string_view::npos) return {};
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) return {};
  ++at;
  while (at < header.size() && header[at] == ' ') ++at;
  size_t end = at;
  if (end < header.size() && header[end] == '(') {
    end = header.find(')', end);
    return end == std::string_view::npos ? std::string_view{} : header.substr(at, end - at + 1);
  }
  while (end < header.size() && header[end] != ',' && header[end] != '}') ++end;
  std::string_view v = header.substr(at, end - at);
  while (!v.empty() && v.back() == ' ') v.remove_suffix(1);
  return v;
}

std::vector<int64_t> parse_shape(std::string_view tuple, const std::string& name) {
  std::vector<int64_t> shape;
  if (tuple.size() < 2 || tuple.front() != '(' || tuple.back() != ')') {
    throw InputError(name + ": malformed .npy header: shape '" + std::string(tuple) + "' is not a tuple");
  }
  std::string_view inner = tuple.substr(1, tuple.size() - 2);
  while (!inner.empty()) {
    while (!inner.empty() && (inner.front() == ' ' || inner.front() == ',')) inner.remove_prefix(1);
    if (inner.empty()) break;
    int64_t v = 0;
    size_t i = 0;
    while (i < inner.size() && inner[i] >= '0' && inner[i] <= '9') {
      const int digit = inner[i++] - '0';
      if (v > (INT64_MAX - digit) / 10) throw InputError(name + ": shape dimension in " + std::string(tuple) + " is too large");
      v = v * 10 + digit;
    }
    if (i == 0) throw InputError(name + ": malformed .npy header: shape '" + std::string(tuple) + "'");
    shape.push_back(v);
    inner.remove_prefix(i);
    if (!inner.empty() && inner.front() == 'L') inner.remove_prefix(1);  // Python 2 longs
  }
  return shape;
}

}  // namespace

NpyArray parse_npy(const std::vector<std::byte>& bytes, const std::string& name) {
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < 10 || std::memcmp(b, "\x93NUMPY", 6) != 0) {
    throw InputError(name + ": not a .npy file (missing the \\x93NUMPY magic)");
  }
  const int major = b[6];
  size_t header_len = 0, header_start = 0;
  if (major == 1) {
    header_len = size_t(b[8]) | size_t(b[9]) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) throw InputError(name + ": truncated .npy header");
    header_len = size_t(b[8]) | size_t(b[9]) << 8 | size_t(b[10]) << 16 | size_t(b[11]) << 24;
    header_start = 12;
  } else {
    throw InputError(name + ": unsupported .npy format version " + std::to_string(major) + " (expected 1, 2 or 3)");
  }
  if (bytes.size() < header_start + header_len) throw InputError(name + ": truncated .npy header");
  const std::string_view header(reinterpret_cast<const char*>(b + header_start), header_len);
  // A Python dict literal, padded with spaces and ended by a newline: anything else is not a header
  // numpy wrote, and a key given twice leaves which value counts to the reader.
  const size_t open = header.find_first_not_of(' '), close = header.find_last_not_of(" \n");
  if (open == std::string_view::npos || header[open] != '{' || header[close] != '}') {
    throw InputError(name + ": malformed .npy header: not a {...} dictionary");
  }
  for (const char* key : {"'descr'", "'fortran_order'", "'shape'"}) {
    const size_t first = header.find(key);
    if (first != std::string_view::npos && header.find(key, first + 1) != std::string_view::npos) {
      throw InputError(name + ": malformed .npy header: " + key + " is given twice");
    }
  }

  NpyArray out;
  const std::string_view descr = dict_value(header, "descr");
  int width = 0;
  if (descr == "'<f2'" || descr == "'|f2'") {
    out.dtype = "float16", width = 2;
  } else if (descr == "'<f4'" || descr == "'|f4'") {
    out.dtype = "float32", width = 4;
  } else if (descr == "'<f8'" || descr == "'|f8'") {
    out.dtype = "float64", width = 8;
  } else {
    throw InputError(name + ": unsupported dtype " + std::string(descr.empty() ? "(none)" : descr) +
                     "; expected little-endian float16, float32 or float64 ('<f2', '<f4', '<f8')");
  }
  const std::string_view order = dict_value(header, "fortran_order");
  if (order != "False" && order != "True") throw InputError(name + ": malformed .npy header: no fortran_order");
  const bool fortran = order == "True";
  out.shape = parse_shape(dict_value(header, "shape"), name);
  if (out.shape.empty() || out.shape.size() > 2) {
    throw InputError(name + ": rank " + std::to_string(out.shape.size()) + " array; expected rank 1 or 2");
  }
  const int64_t rows = out.shape.size() == 2 ? out.shape[0] : 1;
  const int64_t cols = out.shape.back();
  if (rows < 1 || cols < 1) throw InputError(name + ": empty array");
  const size_t have = bytes.size() - header_start - header_len;
  if (rows > INT64_MAX / cols / width) {
    throw InputError(name + ": shape [" + std::to_string(rows) + ", " + std::to_string(cols) + "] is too large");
  }
  const size_t need = static_cast<size_t>(rows * cols) * width;
  if (have < need) {
    throw InputError(name + ": truncated data: shape needs " + std::to_string(need) + " bytes, file has " +
                     std::to_string(have));
  }
  if (have > need) {
    throw InputError(name + ": " + std::to_string(have - need) + " bytes after the data (the shape needs " +
                     std::to_string(need) + "): not the array the header describes");
  }
  out.values = Matrix(rows, cols);
  const unsigned char* data = b + header_start + header_len;
  for (int64_t i = 0; i < rows * cols; ++i) {
    float v;
    if (width == 2) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      v = f16_bits_to_f32(h);
    } else if (width == 4) {
      std::memcpy(&v, data + 4 * i, 4);
    } else {
      double d;
      std::memcpy(&d, data + 8 * i, 8);
      v = static_cast<float>(d);
      if (std::isfinite(d) && !std::isfinite(v)) {
        throw InputError(name + ": value " + detail::shortest_number(d) + " at flat index " + std::to_string(i) +
                         " overflows float32");
      }
    }
    const int64_t r = fortran ? i % rows : i / cols;
    const int64_t c = fortran ? i / rows : i % cols;
    if (!std::isfinite(v)) {
      const std::string where = out.shape.size() == 2 ? "[" + std::to_string(r) + ", " + std::to_string(c) + "]"
                                                      : "[" + std::to_string(c) + "]";
      throw InputError(name + ": non-finite value (" + std::string(std::isnan(v) ? "NaN" : "Inf") + ") at " + where);
    }
    out.values(r, c) = v;
  }
  return out;
}

NpyArray read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

std::vector<std::byte> npy_image(ConstMatrixView m, bool as_vector) {
  std::string shape = as_vector ? "(" + std::to_string(m.cols) + ",)"
                                : "(" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': " + shape + ", }";
  // Pad so the data starts on a 64-byte boundary, header ends with '\n' (format 1.0).
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::vector<std::byte> out(10 + header.size() + static_cast<size_t>(m.size()) * 4);
  std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
  out[8] = static_cast<std::byte>(header.size() & 0xff);
  out[9] = static_cast<std::byte>(header.size() >> 8);
  std::memcpy(out.data() + 10, header.data(), header.size());
  std::memcpy(out.data() + 10 + header.size(), m.data, static_cast<size_t>(m.size()) * 4);
  return out;
}

void write_npy(const std::string& path, ConstMatrixView m, bool as_vector) {
  write_file_atomic(path, npy_image(m, as_vector));
}

}  // namespace kvtune
