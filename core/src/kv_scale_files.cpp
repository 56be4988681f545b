#include "kvtune/kv_scale_files.h"

#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "kvtune/safetensors.h"

namespace kvtune {
namespace {

using nlohmann::json;

std::vector<std::byte> f32_bytes(const std::vector<double>& values) {
  std::vector<std::byte> out(values.size() * 4);
  for (size_t i = 0; i < values.size(); ++i) {
    const float f = static_cast<float>(values[i]);
    std::memcpy(out.data() + 4 * i, &f, 4);
  }
  return out;
}

bool per_head(const CaptureScales& s) { return s.granularity == ScaleGranularity::head; }

// (N, 'k' or 'v') for a tensor named model.layers.N.self_attn.k_scale or v_scale.
std::optional<std::pair<int64_t, char>> scale_tensor(const std::string& name) {
  const std::string head = "model.layers.", tail = ".self_attn.?_scale";
  if (name.size() <= head.size() + tail.size() || name.compare(0, head.size(), head) != 0) return std::nullopt;
  const size_t digits_end = name.size() - tail.size();
  const std::string digits = name.substr(head.size(), digits_end - head.size());
  if (digits.empty() || digits.size() > 9 || digits.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  const std::string rest = name.substr(digits_end);
  if (rest != ".self_attn.k_scale" && rest != ".self_attn.v_scale") return std::nullopt;
  return std::make_pair(std::stoll(digits), rest[11]);
}

}  // namespace

// Names and shapes: compressed-tensors registers k_scale / v_scale on the attention module
// (KV_CACHE_TARGETS "re:.*(self_attn|attention)$", quantization/utils/helpers.py @ ac8e2ba8) with
// shape (1,) for strategy tensor and (num_kv_heads, 1, 1) for attn_head
// (lifecycle/initialize.py initialize_qparams / initialize_attn_qparams @ ac8e2ba8), in the
// model's dtype; float32 here, which vLLM's default_weight_loader and SGLang load into their float32
// parameters alike (vllm model_executor/layers/quantization/kv_cache.py @ 190900b9; sglang
// srt/layers/quantization/kv_cache.py @ 3d7da5a4). vLLM renames ...self_attn.k_scale to
// ...self_attn.attn.k_scale (model_loader/weight_utils.py maybe_remap_kv_scale_name @ 0a1ee72e).
// The value is amax / 448 for E4M3 (x ~ fp8 * scale; helpers.py calculate_qparams).
std::vector<std::byte> checkpoint_kv_scales(const CaptureScales& s) {
  std::vector<SafetensorsEntry> entries;
  for (const LayerScales& l : s.layers) {
    const std::string prefix = "model.layers." + std::to_string(l.layer) + ".self_attn.";
    const std::vector<int64_t> shape = per_head(s) ? std::vector<int64_t>{s.kv_heads, 1, 1} : std::vector<int64_t>{1};
    entries.push_back({prefix + "k_scale", "F32", shape, f32_bytes(per_head(s) ? l.k_heads : std::vector<double>{l.k})});
    entries.push_back({prefix + "v_scale", "F32", shape, f32_bytes(per_head(s) ? l.v_heads : std::vector<double>{l.v})});
  }
  return safetensors_image(entries, {{"format", "pt"}, {"producer", "kvtune calibrate"}});
}

// vLLM creates k_scale / v_scale parameters only for a quantized checkpoint: compressed-tensors
// with `config_groups` and a `kv_cache_scheme` of type float, 8 bits, strategy tensor or attn_head,
// symmetric (vllm compressed_tensors.py; per-head from PR #30141, served by attention backends with
// supports_per_head_quant_scales). dynamic = false is llm-compressor's convention.
std::string checkpoint_quantization_config(const CaptureScales& s) {
  json q = {{"quant_method", "compressed-tensors"},
            {"config_groups", json::object()},
            {"kv_cache_scheme",
             {{"num_bits", 8},
              {"type", "float"},
              {"strategy", per_head(s) ? "attn_head" : "tensor"},
              {"dynamic", false},
              {"symmetric", true}}}};
  return json({{"quantization_config", q}}).dump(2) + "\n";
}

// QuantParamSchema / KVCacheQuantSchema (sglang python/sglang/srt/model_loader/weight_utils.py @
// 57003bea): dtype must be "float8_e4m3fn", one entry per TP rank 0..tp-1 and, in each, one per
// layer 0..num_hidden_layers-1; model_type must equal the config's. Llama's load_kv_cache_scales
// writes the one per-layer value to both attn.k_scale and attn.v_scale (models/llama.py @ bf7a0e23),
// so the file holds max(k, v). A file that fails the schema is only logged and the scales stay 1.0.
std::optional<std::string> sglang_quantization_params(const CaptureScales& s, const std::string& model_type,
                                                      int64_t tp_size, std::string& why) {
  if (per_head(s)) {
    why = "SGLang's --quantization-param-path holds one scale per layer; these scales are per KV head";
    return std::nullopt;
  }
  if (int64_t(s.layers.size()) != s.model_layers) {
    why = "SGLang's schema needs a scale for every one of the model's " + std::to_string(s.model_layers) +
          " layers; the capture has " + std::to_string(s.layers.size());
    return std::nullopt;
  }
  if (model_type.empty()) {
    why = "SGLang's schema needs the model's model_type (config.json); give --model-type";
    return std::nullopt;
  }
  json per_layer = json::object();
  for (const LayerScales& l : s.layers) per_layer[std::to_string(l.layer)] = std::max(l.k, l.v);
  json ranks = json::object();
  for (int64_t r = 0; r < tp_size; ++r) ranks[std::to_string(r)] = per_layer;
  const json doc = {{"model_type", model_type}, {"kv_cache", {{"dtype", "float8_e4m3fn"}, {"scaling_factor", ranks}}}};
  return doc.dump(2) + "\n";
}

LoadedKvScales read_checkpoint_kv_scales(const std::string& path) {
  const SafetensorsFile f = SafetensorsFile::open(path);
  LoadedKvScales out;
  out.path = path;
  std::map<int64_t, LoadedKvScales::Layer> layers;
  for (const SafetensorsTensor& t : f.tensors()) {
    const std::optional<std::pair<int64_t, char>> which = scale_tensor(t.name);
    if (!which) continue;
    const int64_t layer = which->first;
    const bool heads = t.shape.size() == 3;
    if (!(heads ? t.shape[1] == 1 && t.shape[2] == 1 : t.shape == std::vector<int64_t>{1})) {
      throw InputError(path + ": tensor '" + t.name + "' must have shape [1] or [kv_heads, 1, 1]");
    }
    std::vector<double> v;
    for (int64_t h = 0; h < (heads ? t.shape[0] : 1); ++h) {
      const float x = f.read_matrix(t.name, heads ? h : -1)(0, 0);
      if (!(x > 0.0f)) throw InputError(path + ": tensor '" + t.name + "' holds a scale that is not > 0");
      v.push_back(x);
    }
    (which->second == 'k' ? layers[layer].k : layers[layer].v) = v;
  }
  if (layers.empty()) throw InputError(path + ": no model.layers.N.self_attn.k_scale / v_scale tensors");
  for (auto& [layer, l] : layers) {
    if (l.k.empty() || l.v.empty()) {
      throw InputError(path + ": layer " + std::to_string(layer) + " has a " + (l.k.empty() ? "v_scale but no k_scale" : "k_scale but no v_scale"));
    }
    out.layers.emplace_back(layer, l);
  }
  return out;
}

namespace {
double lookup(const LoadedKvScales& s, int64_t layer, int64_t head, bool key) {
  for (const auto& [l, scales] : s.layers) {
    if (l != layer) continue;
    const std::vector<double>& v = key ? scales.k : scales.v;
    if (v.size() == 1) return v[0];
    if (head < 0 || head >= int64_t(v.size())) {
      throw InputError(s.path + ": layer " + std::to_string(layer) + " has " + std::to_string(v.size()) +
                       " per-head scales, no head " + std::to_string(head));
    }
    return v[size_t(head)];
  }
  throw InputError(s.path + ": no scales for layer " + std::to_string(layer));
}
}  // namespace

double LoadedKvScales::k(int64_t layer, int64_t head) const { return lookup(*this, layer, head, true); }
double LoadedKvScales::v(int64_t layer, int64_t head) const { return lookup(*this, layer, head, false); }

}  // namespace kvtune
