#include "kvtune/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "shortest_number.h"
#include "kvtune/numeric/half.h"

namespace kvtune {
namespace {

using nlohmann::json;

int dtype_width(const std::string& dtype) {
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "F32" || dtype == "I32") return 4;
  if (dtype == "F64" || dtype == "I64") return 8;
  return 0;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t file_size(std::ifstream& in, const std::string& path) {
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(path + ": cannot determine the file's size");
  return static_cast<uint64_t>(size);
}

SafetensorsTensor read_entry(const std::string& path, const std::string& name, const json& e) {
  const std::string what = path + ": tensor '" + name + "'";
  if (!e.is_object()) throw InputError(what + ": header entry is not an object");
  for (const auto& [key, _] : e.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      throw InputError(what + ": unknown header key '" + key + "' (expected dtype, shape, data_offsets)");
    }
  }
  SafetensorsTensor t;
  t.name = name;
  if (!e.contains("dtype") || !e["dtype"].is_string()) throw InputError(what + ": no 'dtype' string");
  t.dtype = e["dtype"].get<std::string>();
  if (dtype_width(t.dtype) == 0) {
    throw InputError(what + ": unsupported dtype '" + t.dtype + "'; expected F16, BF16, F32, F64, I32 or I64");
  }
  if (!e.contains("shape") || !e["shape"].is_array()) throw InputError(what + ": no 'shape' array");
  for (const json& d : e["shape"]) {
    if (!d.is_number_unsigned()) throw InputError(what + ": shape entries must be non-negative integers");
    t.shape.push_back(static_cast<int64_t>(std::min<uint64_t>(d.get<uint64_t>(), uint64_t(INT64_MAX))));
  }
  const json* off = e.contains("data_offsets") ? &e["data_offsets"] : nullptr;
  if (off == nullptr || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned()) {
    throw InputError(what + ": 'data_offsets' must be [begin, end], two non-negative integers");
  }
  t.begin = (*off)[0].get<uint64_t>();
  t.end = (*off)[1].get<uint64_t>();
  if (t.end < t.begin) throw InputError(what + ": data_offsets end " + std::to_string(t.end) + " is before begin");
  // The size the shape needs, without overflow.
  uint64_t need = static_cast<uint64_t>(dtype_width(t.dtype));
  for (int64_t d : t.shape) {
    if (d != 0 && need > UINT64_MAX / static_cast<uint64_t>(d)) throw InputError(what + ": shape " + shape_text(t.shape) + " is too large");
    need *= static_cast<uint64_t>(d);
  }
  if (t.end - t.begin != need) {
    throw InputError(what + ": data_offsets span " + std::to_string(t.end - t.begin) + " bytes, but shape " +
                     shape_text(t.shape) + " of " + t.dtype + " needs " + std::to_string(need));
  }
  return t;
}

}  // namespace

int64_t SafetensorsTensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a safetensors file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open the file");
  const uint64_t size = file_size(in, path);
  if (size < 8) throw InputError(path + ": not a safetensors file (" + std::to_string(size) + " bytes, no header length)");
  in.seekg(0);
  unsigned char len_bytes[8];
  in.read(reinterpret_cast<char*>(len_bytes), 8);
  if (!in) throw InputError(path + ": cannot read the header length");
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | len_bytes[i];
  if (header_len > kMaxSafetensorsHeader) {
    throw InputError(path + ": header length " + std::to_string(header_len) + " exceeds the cap of " +
                     std::to_string(kMaxSafetensorsHeader) + " bytes");
  }
  if (header_len > size - 8) {
    throw InputError(path + ": truncated: the header claims " + std::to_string(header_len) + " bytes, the file has " +
                     std::to_string(size - 8) + " after the length");
  }
  std::string header(static_cast<size_t>(header_len), '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) throw InputError(path + ": cannot read the header");

  SafetensorsFile f;
  f.path_ = path;
  f.data_start_ = 8 + header_len;
  json doc;
  try {
    doc = json::parse(header);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double
    throw InputError(path + ": the header is not valid JSON (" + std::string(e.what()) + ")");
  }
  if (!doc.is_object()) throw InputError(path + ": the header is not a JSON object");
  for (const auto& [name, entry] : doc.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw InputError(path + ": __metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string()) throw InputError(path + ": __metadata__ value of '" + k + "' is not a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    f.tensors_.push_back(read_entry(path, name, entry));
  }
  // The data section must be indexed entirely: sorted by offset, each range starts where the last
  // ended and the last ends at the end of the file (the format's "no holes" rule).
  std::vector<const SafetensorsTensor*> order;
  for (const SafetensorsTensor& t : f.tensors_) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const SafetensorsTensor* t : order) {
    if (t->begin < at) {
      throw InputError(path + ": tensor '" + t->name + "' overlaps another tensor's bytes (offset " +
                       std::to_string(t->begin) + " < " + std::to_string(at) + ")");
    }
    if (t->begin > at) {
      throw InputError(path + ": bytes " + std::to_string(at) + ".." + std::to_string(t->begin) +
                       " of the data belong to no tensor (before '" + t->name + "')");
    }
    at = t->end;
  }
  const uint64_t data = size - f.data_start_;
  if (at != data) {
    throw InputError(path + (at > data ? ": truncated: the tensors need " + std::to_string(at) +
                                             " bytes of data, the file has " + std::to_string(data)
                                       : ": " + std::to_string(data - at) + " bytes after the last tensor belong to none"));
  }
  std::stable_sort(f.tensors_.begin(), f.tensors_.end(),
                   [](const SafetensorsTensor& a, const SafetensorsTensor& b) { return a.begin < b.begin; });
  return f;
}

const SafetensorsTensor* SafetensorsFile::find(const std::string& name) const {
  for (const SafetensorsTensor& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

const SafetensorsTensor& SafetensorsFile::get(const std::string& name) const {
  if (const SafetensorsTensor* t = find(name)) return *t;
  std::string names;
  for (const SafetensorsTensor& t : tensors_) names += (names.empty() ? "" : ", ") + t.name;
  throw InputError(path_ + ": no tensor '" + name + "' (the file has: " + (names.empty() ? "none" : names) + ")");
}

std::vector<unsigned char> SafetensorsFile::read_bytes(uint64_t begin, uint64_t count) const {
  std::ifstream in(path_, std::ios::binary);
  std::vector<unsigned char> out(static_cast<size_t>(count));
  in.seekg(static_cast<std::streamoff>(data_start_ + begin));
  in.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count));
  if (!in) throw InputError(path_ + ": cannot read " + std::to_string(count) + " bytes at " + std::to_string(begin));
  return out;
}

Matrix SafetensorsFile::read_matrix(const std::string& name, int64_t index) const {
  return read_rows(name, index, 0, -1);
}

// count < 0: every row (read_matrix).
Matrix SafetensorsFile::read_rows(const std::string& name, int64_t index, int64_t first, int64_t count) const {
  const SafetensorsTensor& t = get(name);
  const std::string what = path_ + ": tensor '" + name + "'";
  const int width = dtype_width(t.dtype);
  if (t.dtype[0] == 'I') throw InputError(what + ": dtype " + t.dtype + " where floating-point values are expected");
  const size_t rank = t.shape.size();
  if (rank < 1 || rank > 3) throw InputError(what + ": rank " + std::to_string(rank) + "; expected 1, 2 or 3");
  if ((rank == 3) != (index >= 0)) {
    throw InputError(what + ": shape " + shape_text(t.shape) + (rank == 3 ? " needs a slice of its first axis" : " has no slices"));
  }
  if (rank == 3 && index >= t.shape[0]) {
    throw InputError(what + ": slice " + std::to_string(index) + " is outside its first axis of " + std::to_string(t.shape[0]));
  }
  const int64_t rows = rank == 1 ? 1 : t.shape[rank - 2], cols = t.shape[rank - 1];
  if (rows < 1 || cols < 1) throw InputError(what + ": empty tensor, shape " + shape_text(t.shape));
  const uint64_t slice = uint64_t(rows) * uint64_t(cols) * uint64_t(width);
  if (count < 0) count = rows - first;
  if (first < 0 || count < 1 || first + count > rows) {
    throw InputError(what + ": rows " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                     " are outside its " + std::to_string(rows) + " rows");
  }
  const uint64_t row_bytes = uint64_t(cols) * uint64_t(width);
  const std::vector<unsigned char> raw =
      read_bytes(t.begin + (rank == 3 ? uint64_t(index) * slice : 0) + uint64_t(first) * row_bytes, uint64_t(count) * row_bytes);
  Matrix m(count, cols);
  for (int64_t i = 0; i < count * cols; ++i) {
    const unsigned char* p = raw.data() + size_t(i) * size_t(width);
    float v = 0.0f;
    if (t.dtype == "F16" || t.dtype == "BF16") {
      uint16_t h;
      std::memcpy(&h, p, 2);
      v = t.dtype == "F16" ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
    } else if (t.dtype == "F32") {
      std::memcpy(&v, p, 4);
    } else {
      double d;
      std::memcpy(&d, p, 8);
      v = static_cast<float>(d);
      if (std::isfinite(d) && !std::isfinite(v)) {
        throw InputError(what + ": value " + detail::shortest_number(d) + " at flat index " + std::to_string(first * cols + i) + " overflows float32");
      }
    }
    if (!std::isfinite(v)) {
      std::string at = "[" + (rank == 3 ? std::to_string(index) + ", " : "") +
                       (rank >= 2 ? std::to_string(first + i / cols) + ", " : "") + std::to_string(i % cols) + "]";
      throw InputError(what + ": non-finite value (" + std::string(std::isnan(v) ? "NaN" : "Inf") + ") at " + at);
    }
    m.data()[i] = v;
  }
  return m;
}

std::vector<int64_t> SafetensorsFile::read_integers(const std::string& name) const {
  const SafetensorsTensor& t = get(name);
  const std::string what = path_ + ": tensor '" + name + "'";
  if (t.dtype != "I64" && t.dtype != "I32") throw InputError(what + ": dtype " + t.dtype + "; expected I64 or I32");
  if (t.shape.size() != 1) throw InputError(what + ": shape " + shape_text(t.shape) + "; expected rank 1");
  const int width = dtype_width(t.dtype);
  const std::vector<unsigned char> raw = read_bytes(t.begin, t.end - t.begin);
  std::vector<int64_t> out(static_cast<size_t>(t.shape[0]));
  for (size_t i = 0; i < out.size(); ++i) {
    if (width == 8) {
      std::memcpy(&out[i], raw.data() + 8 * i, 8);
    } else {
      int32_t v;
      std::memcpy(&v, raw.data() + 4 * i, 4);
      out[i] = v;
    }
  }
  return out;
}

std::vector<std::byte> safetensors_image(const std::vector<SafetensorsEntry>& entries,
                                         const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const SafetensorsEntry& e : entries) {
    uint64_t need = static_cast<uint64_t>(dtype_width(e.dtype));
    for (int64_t d : e.shape) need *= static_cast<uint64_t>(d);
    if (need == 0 && dtype_width(e.dtype) == 0) throw std::logic_error("safetensors_image: unknown dtype " + e.dtype);
    if (need != e.data.size()) throw std::logic_error("safetensors_image: '" + e.name + "' has the wrong byte count");
    header[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {at, at + need}}};
    at += need;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::vector<std::byte> out(8 + text.size());
  for (int i = 0; i < 8; ++i) out[size_t(i)] = std::byte((uint64_t(text.size()) >> (8 * i)) & 0xFF);
  std::memcpy(out.data() + 8, text.data(), text.size());
  for (const SafetensorsEntry& e : entries) out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

}  // namespace kvtune
