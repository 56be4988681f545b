// A small capture directory written by the tests (docs/real-caches.md's format): 4 model layers of
// which 0 and 2 are captured, 4 query heads over 2 KV heads of 32 channels, samples "a" (96 tokens)
// and "b" (64 tokens), the last 8 queries of each. Every element is value(tensor, head, row, col),
// rounded to float16, so a test can say which element it expects.
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "kvtune/numeric/half.h"
#include "kvtune/safetensors.h"

namespace kvtune::testing {

struct CaptureSpec {
  int64_t model_layers = 4, q_heads = 4, kv_heads = 2, head_dim = 32, queries = 8;
  std::vector<int64_t> layers = {0, 2};
  std::vector<std::pair<std::string, int64_t>> samples = {{"a", 96}, {"b", 64}};
  int64_t zero_keys_layer = -1;  // a layer whose keys are all 0.0 (a degenerate capture)
};

// A deterministic value of roughly unit size; `tensor` 0 = k, 1 = v, 2 = q; row = token or query row.
inline float capture_value(int tensor, int64_t layer, int64_t head, int64_t row, int64_t col) {
  const double x = std::sin(0.37 * double(tensor + 1) + 1.3 * double(layer) + 0.71 * double(head) + 0.113 * double(row) +
                            0.029 * double(col * (tensor + 2)));
  return round_to_f16(static_cast<float>(2.0 * x));
}

inline std::vector<std::byte> f16_bytes(int tensor, int64_t layer, int64_t heads, int64_t rows, int64_t cols) {
  std::vector<std::byte> out(size_t(heads * rows * cols) * 2);
  size_t at = 0;
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c, at += 2) {
        const uint16_t bits = f32_to_f16_bits(capture_value(tensor, layer, h, r, c));
        std::memcpy(out.data() + at, &bits, 2);
      }
    }
  }
  return out;
}

inline std::vector<std::byte> i64_bytes(const std::vector<int64_t>& v) {
  std::vector<std::byte> out(v.size() * 8);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Writes the capture into `dir` (created); `manifest_edit` may change the manifest text's fields
// before it is written (a test of a bad manifest), keyed by the literal text to replace.
inline void write_capture(const std::filesystem::path& dir, const CaptureSpec& s = {},
                          const std::map<std::string, std::string>& manifest_edit = {}) {
  std::filesystem::create_directories(dir);
  int64_t total = 0;
  std::vector<int64_t> positions, q_positions;
  for (const auto& [name, tokens] : s.samples) {
    total += tokens;
    for (int64_t p = 0; p < tokens; ++p) positions.push_back(p);
    for (int64_t p = tokens - s.queries; p < tokens; ++p) q_positions.push_back(p);
  }
  const int64_t nq = int64_t(q_positions.size());
  std::string layers, files;
  for (int64_t l : s.layers) {
    char file[32];
    std::snprintf(file, sizeof file, "layer_%03lld.safetensors", static_cast<long long>(l));
    layers += (layers.empty() ? "" : ", ") + std::to_string(l);
    files += (files.empty() ? "\"" : ", \"") + std::string(file) + "\"";
    const std::vector<SafetensorsEntry> entries = {
        {"k", "F16", {s.kv_heads, total, s.head_dim},
         l == s.zero_keys_layer ? std::vector<std::byte>(size_t(s.kv_heads * total * s.head_dim) * 2)
                                : f16_bytes(0, l, s.kv_heads, total, s.head_dim)},
        {"v", "F16", {s.kv_heads, total, s.head_dim}, f16_bytes(1, l, s.kv_heads, total, s.head_dim)},
        {"q", "F16", {s.q_heads, nq, s.head_dim}, f16_bytes(2, l, s.q_heads, nq, s.head_dim)},
        {"positions", "I64", {total}, i64_bytes(positions)},
        {"q_positions", "I64", {nq}, i64_bytes(q_positions)}};
    const std::vector<std::byte> image = safetensors_image(entries, {{"format", "kvtune-capture"}, {"layer", std::to_string(l)}});
    std::ofstream(dir / file, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
  }
  std::string samples;
  for (const auto& [name, tokens] : s.samples) {
    samples += (samples.empty() ? "" : ", ") + std::string("{\"name\": \"") + name + "\", \"tokens\": " + std::to_string(tokens) + "}";
  }
  std::string manifest = "{\n  \"format\": \"kvtune-capture\",\n  \"version\": 1,\n  \"model\": \"test/stand-in\",\n"
                         "  \"config\": {\"num_hidden_layers\": " + std::to_string(s.model_layers) +
                         ", \"num_attention_heads\": " + std::to_string(s.q_heads) +
                         ", \"num_key_value_heads\": " + std::to_string(s.kv_heads) +
                         ", \"head_dim\": " + std::to_string(s.head_dim) +
                         ", \"rope_theta\": 10000.0, \"rope_scaling\": null, \"rope_convention\": \"rotate_half\"},\n"
                         "  \"dtype\": \"float16\",\n  \"layers\": [" + layers + "],\n  \"layer_files\": [" + files +
                         "],\n  \"samples\": [" + samples + "],\n  \"queries_per_sample\": " + std::to_string(s.queries) +
                         ",\n  \"k_pre_rope\": false\n}\n";
  for (const auto& [from, to] : manifest_edit) {
    const size_t at = manifest.find(from);
    if (at != std::string::npos) manifest.replace(at, from.size(), to);
  }
  std::ofstream(dir / "manifest.json") << manifest;
}

}  // namespace kvtune::testing
