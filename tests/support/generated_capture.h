// A capture directory (docs/real-caches.md's format) holding synthetic cases: layer l, KV head h of
// sample s is generate_case(cfg, seed s, l, h), stored as float32 so the capture's cases are the
// generator's to the bit. Each sample's queries are the case's (cfg.queries per query head), all
// at position tokens - 1: the one whose attention covers the whole sample.
#pragma once

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtune/safetensors.h"
#include "kvtune/workload.h"

namespace kvtune::testing {

// config.json's rope_scaling for a scaling (null for plain RoPE), as the capture tool writes it.
inline nlohmann::json rope_scaling_json(const RopeScaling& s) {
  if (s.type == RopeScalingType::none) return nullptr;
  nlohmann::json j = {{"rope_type", rope_scaling_name(s.type)}, {"factor", s.factor}};
  if (s.type == RopeScalingType::llama3) {
    j["low_freq_factor"] = s.low_freq_factor;
    j["high_freq_factor"] = s.high_freq_factor;
    j["original_max_position_embeddings"] = int64_t(s.original_max_position);
  }
  return j;
}

inline void write_generated_capture(const std::filesystem::path& dir, const WorkloadConfig& cfg, int64_t samples,
                                    const std::vector<int64_t>& layers, bool with_pre_rope = false) {
  std::filesystem::create_directories(dir);
  const int64_t t = cfg.tokens, d = cfg.head_dim, q_heads = cfg.kv_heads * cfg.q_per_kv, nq = cfg.queries;
  auto f32 = [](std::vector<float>& v) {
    std::vector<std::byte> out(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
    return out;
  };
  nlohmann::json files = nlohmann::json::array();
  for (int64_t l : layers) {
    std::vector<float> k(size_t(cfg.kv_heads * samples * t * d)), pre(k.size()), v(k.size());
    std::vector<float> q(size_t(q_heads * samples * nq * d));
    for (int64_t h = 0; h < cfg.kv_heads; ++h) {
      for (int64_t s = 0; s < samples; ++s) {
        const Case c = generate_case(cfg, uint64_t(s), l, h);
        const size_t at = size_t(((h * samples + s) * t) * d);
        std::memcpy(k.data() + at, c.keys.data(), size_t(t * d) * 4);
        std::memcpy(pre.data() + at, c.keys_pre_rope.data(), size_t(t * d) * 4);
        std::memcpy(v.data() + at, c.values.data(), size_t(t * d) * 4);
        for (int64_t g = 0; g < cfg.q_per_kv; ++g) {
          const size_t qa = size_t((((h * cfg.q_per_kv + g) * samples + s) * nq) * d);
          std::memcpy(q.data() + qa, c.queries.row(g * nq), size_t(nq * d) * 4);
        }
      }
    }
    std::vector<int64_t> positions, q_positions;
    for (int64_t s = 0; s < samples; ++s) {
      for (int64_t p = 0; p < t; ++p) positions.push_back(p);
      for (int64_t i = 0; i < nq; ++i) q_positions.push_back(t - 1);
    }
    auto i64 = [](const std::vector<int64_t>& x) {
      std::vector<std::byte> out(x.size() * 8);
      std::memcpy(out.data(), x.data(), out.size());
      return out;
    };
    std::vector<SafetensorsEntry> entries = {{"k", "F32", {cfg.kv_heads, samples * t, d}, f32(k)},
                                             {"v", "F32", {cfg.kv_heads, samples * t, d}, f32(v)},
                                             {"q", "F32", {q_heads, samples * nq, d}, f32(q)},
                                             {"positions", "I64", {samples * t}, i64(positions)},
                                             {"q_positions", "I64", {samples * nq}, i64(q_positions)}};
    if (with_pre_rope) entries.push_back({"k_pre_rope", "F32", {cfg.kv_heads, samples * t, d}, f32(pre)});
    const std::vector<std::byte> image = safetensors_image(entries);
    const std::string name = "layer_" + std::to_string(1000 + l).substr(1) + ".safetensors";
    std::ofstream(dir / name, std::ios::binary).write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size()));
    files.push_back(name);
  }
  nlohmann::json sample_list = nlohmann::json::array();
  for (int64_t s = 0; s < samples; ++s) sample_list.push_back({{"name", "seed" + std::to_string(s)}, {"tokens", t}});
  const nlohmann::json manifest = {
      {"format", "kvtune-capture"},
      {"version", 1},
      {"model", "test/generated"},
      {"config",
       {{"num_hidden_layers", cfg.layers},
        {"num_attention_heads", q_heads},
        {"num_key_value_heads", cfg.kv_heads},
        {"head_dim", d},
        {"rope_theta", cfg.rope.enabled ? nlohmann::json(cfg.rope.theta) : nlohmann::json(nullptr)},
        {"rope_scaling", rope_scaling_json(cfg.rope.scaling)},
        {"rope_convention", cfg.rope.convention == RopeConvention::interleaved ? "interleaved" : "rotate_half"}}},
      {"dtype", "float32"},
      {"layers", layers},
      {"layer_files", files},
      {"samples", sample_list},
      {"queries_per_sample", nq},
      {"k_pre_rope", with_pre_rope}};
  std::ofstream(dir / "manifest.json") << manifest.dump(2) << "\n";
}

}  // namespace kvtune::testing
