#include "kvtune/capture.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/safetensors.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A manifest value with its type checked; InputError names the manifest and the key.
const json& field(const json& obj, const std::string& key, const std::string& where, json::value_t type) {
  const std::string what = where + ": '" + key + "'";
  if (!obj.contains(key)) throw InputError(where + ": no '" + key + "'");
  const json& v = obj.at(key);
  const bool ok = type == json::value_t::number_unsigned ? v.is_number_unsigned()
                  : type == json::value_t::number_float  ? v.is_number()
                                                         : v.type() == type;
  if (!ok) {
    const char* expected = type == json::value_t::number_unsigned ? "a non-negative integer"
                           : type == json::value_t::number_float  ? "a number"
                           : type == json::value_t::string        ? "a string"
                           : type == json::value_t::array         ? "an array"
                           : type == json::value_t::boolean       ? "true or false"
                                                                  : "an object";
    throw InputError(what + " must be " + std::string(expected));
  }
  return v;
}

int64_t count(const json& obj, const std::string& key, const std::string& where, int64_t min,
              int64_t max = int64_t(1) << 40) {
  const uint64_t v = field(obj, key, where, json::value_t::number_unsigned).get<uint64_t>();
  if (v < uint64_t(min) || v > uint64_t(max)) {
    throw InputError(where + ": '" + key + "' must be in " + std::to_string(min) + ".." + std::to_string(max) +
                     " (found " + std::to_string(v) + ")");
  }
  return static_cast<int64_t>(v);
}

// An optional positive number of the config (absent or null: 0).
double positive_or_null(const json& cfg, const char* key, const std::string& wc) {
  if (!cfg.contains(key) || cfg[key].is_null()) return 0.0;
  const json& v = cfg[key];
  if (!v.is_number() || !(v.get<double>() > 0) || !std::isfinite(v.get<double>())) {
    throw InputError(wc + ": '" + key + "' must be a positive number or null");
  }
  return v.get<double>();
}

// A rope_scaling object with a type ("rope_type", transformers 4.45+; "type" before) and the
// type's parameters: "default" is plain RoPE; a type kvtune does not reproduce comes back with its
// name in `unmodelled` and no scaling.
RopeScaling typed_scaling(const json& r, const std::string& ws, std::string& unmodelled) {
  RopeScaling s;
  const char* type_key = r.contains("rope_type") ? "rope_type" : "type";
  const std::string type = field(r, type_key, ws, json::value_t::string).get<std::string>();
  if (type == "default") return s;
  if (type != "linear" && type != "llama3") {
    unmodelled = type;
    return s;
  }
  s.type = type == "llama3" ? RopeScalingType::llama3 : RopeScalingType::linear;
  s.factor = field(r, "factor", ws, json::value_t::number_float).get<double>();
  if (s.type == RopeScalingType::llama3) {
    s.low_freq_factor = field(r, "low_freq_factor", ws, json::value_t::number_float).get<double>();
    s.high_freq_factor = field(r, "high_freq_factor", ws, json::value_t::number_float).get<double>();
    s.original_max_position = double(count(r, "original_max_position_embeddings", ws, 1));
  }
  if (const std::string why = rope_scaling_problem(s); !why.empty()) throw InputError(ws + ": " + why);
  return s;
}

bool has_type(const json& r) { return r.contains("rope_type") || r.contains("type"); }

// The config's RoPE: rope_theta (null: none given) and rope_scaling, which is null, an object with a
// type, or transformers 5's one object per layer type (Gemma 3: "full_attention" and
// "sliding_attention", each with its type and its own rope_theta; the capture tool writes transformers
// 4.x's Gemma 3 the same way). The full layers' become the capture's RoPE and the sliding layers'
// base its sliding_rope_theta, when the sliding type is "default" (plain RoPE at that base, or at the
// full layers' without one). Any other layer type, a sliding scaling, a per-type object without a
// type, or no base at all is not reproduced: "per layer type" in `unmodelled`.
struct ConfigRope {
  double theta = 0.0, sliding_theta = 0.0;
  RopeScaling scaling;
  std::string unmodelled;
};
ConfigRope rope_of_config(const json& cfg, const std::string& wc) {
  ConfigRope out;
  const double top = positive_or_null(cfg, "rope_theta", wc);
  out.theta = top;
  if (!cfg.contains("rope_scaling") || cfg["rope_scaling"].is_null()) return out;
  const json& r = field(cfg, "rope_scaling", wc, json::value_t::object);
  const std::string ws = wc + ".rope_scaling";
  if (has_type(r)) {
    out.scaling = typed_scaling(r, ws, out.unmodelled);
    if (out.theta == 0.0) out.theta = positive_or_null(r, "rope_theta", ws);  // transformers 5 keeps it there
    return out;
  }
  const auto not_reproduced = [&] {
    out = {top, 0.0, {}, "per layer type"};
    return out;
  };
  for (const auto& [type, per] : r.items()) {
    if ((type != "full_attention" && type != "sliding_attention") || !per.is_object() || !has_type(per)) {
      return not_reproduced();
    }
  }
  if (r.contains("full_attention")) {
    const std::string wf = ws + ".full_attention";
    out.scaling = typed_scaling(r["full_attention"], wf, out.unmodelled);
    if (const double theta = positive_or_null(r["full_attention"], "rope_theta", wf); theta > 0) out.theta = theta;
  }
  if (r.contains("sliding_attention")) {
    const std::string wl = ws + ".sliding_attention";
    std::string sliding_unmodelled;
    if (typed_scaling(r["sliding_attention"], wl, sliding_unmodelled).type != RopeScalingType::none ||
        !sliding_unmodelled.empty()) {
      return not_reproduced();
    }
    out.sliding_theta = positive_or_null(r["sliding_attention"], "rope_theta", wl);
    if (out.sliding_theta == 0.0) out.sliding_theta = out.theta;
  }
  if (out.theta == 0.0) return not_reproduced();
  return out;
}

std::string safetensors_dtype(const std::string& dtype) {
  return dtype == "float16" ? "F16" : dtype == "bfloat16" ? "BF16" : "F32";
}

// The layer file's tensor `name` must have this shape and dtype.
void expect_tensor(const SafetensorsFile& f, const std::string& name, const std::vector<int64_t>& shape,
                   const std::string& dtype) {
  const SafetensorsTensor& t = f.get(name);
  auto text = [](const std::vector<int64_t>& s) {
    std::string out = "[";
    for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
    return out + "]";
  };
  if (t.shape != shape) {
    throw InputError(f.path() + ": tensor '" + name + "' has shape " + text(t.shape) + ", the manifest says " + text(shape));
  }
  if (t.dtype != dtype) throw InputError(f.path() + ": tensor '" + name + "' is " + t.dtype + ", the manifest says " + dtype);
}

}  // namespace

Capture open_capture(const std::string& dir) {
  const std::string manifest_path = (fs::path(dir) / "manifest.json").string();
  // The error_code overloads: a name the file system refuses (too long) is "does not exist", not
  // a filesystem_error.
  std::error_code ec;
  if (!fs::exists(manifest_path, ec)) {
    throw InputError(dir + ": not a capture directory (no manifest.json" +
                     std::string(fs::is_directory(dir, ec) ? ")" : "; the directory does not exist)"));
  }
  const std::vector<std::byte> bytes = read_file(manifest_path);  // refuses a directory by name
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  json m;
  try {
    m = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double
    throw InputError(manifest_path + ": not valid JSON (" + std::string(e.what()) + ")");
  }
  const std::string& w = manifest_path;
  if (!m.is_object()) throw InputError(w + ": not a JSON object");
  if (field(m, "format", w, json::value_t::string) != "kvtune-capture") {
    throw InputError(w + ": 'format' is not \"kvtune-capture\"");
  }
  if (count(m, "version", w, 1) != 1) throw InputError(w + ": capture format version " + m["version"].dump() + "; this kvtune reads version 1");
  Capture c;
  c.dir = dir;
  c.model = m.contains("model") && m["model"].is_string() ? m["model"].get<std::string>() : "";
  const json& cfg = field(m, "config", w, json::value_t::object);
  const std::string wc = w + ": config";
  // The bounds of a model preset's shape (model_preset.cpp): 4096 layers and heads.
  c.model_layers = count(cfg, "num_hidden_layers", wc, 1, 4096);
  c.q_heads = count(cfg, "num_attention_heads", wc, 1, 65536);
  c.kv_heads = count(cfg, "num_key_value_heads", wc, 1, 4096);
  c.head_dim = count(cfg, "head_dim", wc, 1, 65536);
  if (c.q_heads % c.kv_heads != 0) {
    throw InputError(wc + ": num_attention_heads " + std::to_string(c.q_heads) + " is not a multiple of num_key_value_heads " +
                     std::to_string(c.kv_heads));
  }
  // RoPE as the capture tool saw it; the keys are stored rotated already, so kvtune only reports
  // it. A model without a readable rotary embedding has theta null and convention "unknown".
  const std::string convention = field(cfg, "rope_convention", wc, json::value_t::string).get<std::string>();
  if (convention != "rotate_half" && convention != "interleaved" && convention != "unknown") {
    throw InputError(wc + ": 'rope_convention' must be \"rotate_half\", \"interleaved\" or \"unknown\" (found \"" +
                     convention + "\")");
  }
  const ConfigRope rope = rope_of_config(cfg, wc);
  c.rope.scaling = rope.scaling;
  c.rope_unmodelled = rope.unmodelled;
  // A rope_scaling kvtune does not reproduce says there is RoPE even without a rope_theta
  // (transformers 5 keeps the base inside rope_parameters).
  c.rope_unknown = !c.rope_unmodelled.empty() || (rope.theta > 0 && convention == "unknown");
  c.rope.enabled = rope.theta > 0 && !c.rope_unknown;
  if (rope.theta > 0) c.rope.theta = rope.theta;
  if (!c.rope_unknown) c.sliding_rope_theta = rope.sliding_theta;  // plain RoPE there, even at the same base
  c.rope.convention = convention == "interleaved" ? RopeConvention::interleaved : RopeConvention::rotate_half;
  c.rope_convention_known = convention != "unknown";
  if (cfg.contains("sliding_window") && !cfg["sliding_window"].is_null()) {
    c.sliding_window = count(cfg, "sliding_window", wc, 1);
  }
  if (cfg.contains("sliding_layers")) {
    for (const json& l : field(cfg, "sliding_layers", wc, json::value_t::array)) {
      if (!l.is_number_unsigned() || l.get<uint64_t>() >= uint64_t(c.model_layers)) {
        throw InputError(wc + ": 'sliding_layers' must hold layer indices in 0.." + std::to_string(c.model_layers - 1));
      }
      c.sliding_layers.push_back(l.get<int64_t>());
    }
  }
  if (!c.sliding_layers.empty() && c.sliding_window == 0) {
    throw InputError(wc + ": 'sliding_layers' are given but 'sliding_window' is null");
  }
  c.query_pre_attn_scalar = positive_or_null(cfg, "query_pre_attn_scalar", wc);
  c.logit_softcap = positive_or_null(cfg, "attn_logit_softcapping", wc);
  if (cfg.contains("architecture") && !cfg["architecture"].is_null()) {
    c.architecture = field(cfg, "architecture", wc, json::value_t::string).get<std::string>();
    if (c.architecture.empty()) throw InputError(wc + ": 'architecture' must be a class name or null, not empty");
  }
  c.dtype = field(m, "dtype", w, json::value_t::string).get<std::string>();
  if (c.dtype != "float16" && c.dtype != "bfloat16" && c.dtype != "float32") {
    throw InputError(w + ": 'dtype' must be float16, bfloat16 or float32 (found \"" + c.dtype + "\")");
  }
  const json& layers = field(m, "layers", w, json::value_t::array);
  const json& files = field(m, "layer_files", w, json::value_t::array);
  if (layers.empty()) throw InputError(w + ": 'layers' is empty");
  if (files.size() != layers.size()) {
    throw InputError(w + ": " + std::to_string(layers.size()) + " layers but " + std::to_string(files.size()) + " layer_files");
  }
  for (size_t i = 0; i < layers.size(); ++i) {
    if (!layers[i].is_number_unsigned() || layers[i].get<uint64_t>() >= uint64_t(c.model_layers)) {
      throw InputError(w + ": layers[" + std::to_string(i) + "] must be a layer index in 0.." + std::to_string(c.model_layers - 1));
    }
    const int64_t l = layers[i].get<int64_t>();
    if (!c.layers.empty() && l <= c.layers.back()) throw InputError(w + ": 'layers' must be ascending without repeats");
    c.layers.push_back(l);
    if (!files[i].is_string() || files[i].get<std::string>().find('/') != std::string::npos ||
        files[i] == "." || files[i] == ".." || files[i] == "") {
      throw InputError(w + ": layer_files[" + std::to_string(i) + "] must be a file name in the capture directory");
    }
    c.layer_files.push_back((fs::path(dir) / files[i].get<std::string>()).string());
  }
  const json& samples = field(m, "samples", w, json::value_t::array);
  if (samples.empty()) throw InputError(w + ": 'samples' is empty");
  c.queries_per_sample = count(m, "queries_per_sample", w, 1);
  int64_t total = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    const std::string ws = w + ": samples[" + std::to_string(i) + "]";
    if (!samples[i].is_object()) throw InputError(ws + " must be an object with name and tokens");
    CaptureSample s;
    s.name = field(samples[i], "name", ws, json::value_t::string).get<std::string>();
    s.tokens = count(samples[i], "tokens", ws, 1);
    if (s.tokens < c.queries_per_sample) {
      throw InputError(ws + " ('" + s.name + "') has " + std::to_string(s.tokens) + " tokens, fewer than queries_per_sample " +
                       std::to_string(c.queries_per_sample));
    }
    s.first = total;
    total += s.tokens;
    c.samples.push_back(s);
  }
  c.k_pre_rope = field(m, "k_pre_rope", w, json::value_t::boolean).get<bool>();

  // Every layer file's header against the manifest (the data is read per case).
  const std::string dt = safetensors_dtype(c.dtype);
  const int64_t nq = int64_t(c.samples.size()) * c.queries_per_sample;
  for (const std::string& path : c.layer_files) {
    if (!fs::exists(path)) throw InputError(path + ": missing (the manifest lists it)");
    const SafetensorsFile f = SafetensorsFile::open(path);
    expect_tensor(f, "k", {c.kv_heads, total, c.head_dim}, dt);
    expect_tensor(f, "v", {c.kv_heads, total, c.head_dim}, dt);
    expect_tensor(f, "q", {c.q_heads, nq, c.head_dim}, dt);
    expect_tensor(f, "positions", {total}, "I64");
    expect_tensor(f, "q_positions", {nq}, "I64");
    if (c.k_pre_rope) expect_tensor(f, "k_pre_rope", {c.kv_heads, total, c.head_dim}, dt);
  }
  return c;
}

std::vector<int64_t> capture_samples(const Capture& c, const std::vector<int64_t>& chosen) {
  std::vector<int64_t> out = chosen;
  if (out.empty()) {
    for (size_t s = 0; s < c.samples.size(); ++s) out.push_back(int64_t(s));
  }
  std::set<int64_t> seen;
  for (int64_t s : out) {
    if (s < 0 || s >= int64_t(c.samples.size())) {
      throw InputError(c.dir + ": sample " + std::to_string(s) + " is outside the capture's " +
                       std::to_string(c.samples.size()) + " samples");
    }
    if (!seen.insert(s).second) throw InputError(c.dir + ": sample " + std::to_string(s) + " is given twice");
  }
  return out;
}

RopeConfig capture_layer_rope(const Capture& c, int64_t layer) {
  return layer_rope(c.rope, c.sliding_rope_theta, c.sliding_layers, layer);
}

double capture_query_factor(const Capture& c) {
  if (c.query_pre_attn_scalar <= 0 || c.query_pre_attn_scalar == double(c.head_dim)) return 1.0;
  return std::sqrt(double(c.head_dim) / c.query_pre_attn_scalar);
}

void scale_queries_to_model(const Capture& c, MatrixView queries) {
  const double factor = capture_query_factor(c);
  if (factor == 1.0) return;
  for (int64_t i = 0; i < queries.size(); ++i) queries.data[i] = static_cast<float>(queries.data[i] * factor);
}

WorkloadConfig capture_shape(const Capture& c) {
  WorkloadConfig w;
  w.head_dim = c.head_dim;
  w.layers = c.model_layers;
  w.kv_heads = c.kv_heads;
  w.q_per_kv = c.q_per_kv();
  w.rope = c.rope;
  w.sliding_window = c.sliding_window;
  w.sliding_layers = c.sliding_layers;
  w.logit_softcap = c.logit_softcap;
  w.sliding_rope_theta = c.sliding_layers.empty() ? 0.0 : c.sliding_rope_theta;
  return w;
}

ModelPreset capture_model(const Capture& c) {
  ModelPreset p;
  p.name = p.title = c.model.empty() ? fs::path(c.dir).filename().string() : c.model;
  p.source = (fs::path(c.dir) / "manifest.json").string();
  p.shape = {c.model_layers, c.kv_heads, c.head_dim, c.sliding_window, int64_t(c.sliding_layers.size())};
  p.q_heads = c.q_heads;
  p.rope_theta = c.rope.theta;
  p.rope_convention = c.rope.convention;
  p.rope_scaling = c.rope.scaling;
  p.sliding_rope_theta = c.sliding_layers.empty() ? 0.0 : c.sliding_rope_theta;
  p.architecture = c.architecture;
  return p;
}

Case capture_case(const Capture& c, int64_t sample, int64_t layer, int64_t kv_head, int64_t tokens) {
  if (sample < 0 || sample >= int64_t(c.samples.size())) {
    throw InputError(c.dir + ": sample " + std::to_string(sample) + " is outside the capture's " +
                     std::to_string(c.samples.size()) + " samples");
  }
  const auto at = std::find(c.layers.begin(), c.layers.end(), layer);
  if (at == c.layers.end()) throw InputError(c.dir + ": layer " + std::to_string(layer) + " was not captured");
  if (kv_head < 0 || kv_head >= c.kv_heads) {
    throw InputError(c.dir + ": KV head " + std::to_string(kv_head) + " is outside 0.." + std::to_string(c.kv_heads - 1));
  }
  const CaptureSample& s = c.samples[size_t(sample)];
  const int64_t t = tokens == 0 ? s.tokens : tokens;
  if (t < 1 || t > s.tokens) {
    throw InputError(c.dir + ": sample '" + s.name + "' has " + std::to_string(s.tokens) + " tokens; a prefix of " +
                     std::to_string(t) + " was asked for");
  }
  // On a sliding-window layer the decoding token attends to the last sliding_window tokens only.
  const int64_t kept = attended_tokens(t, c.sliding_window, c.sliding_layers, layer), skip = t - kept;
  const SafetensorsFile f = SafetensorsFile::open(c.layer_files[size_t(at - c.layers.begin())]);
  Matrix keys = f.read_rows("k", kv_head, s.first + skip, kept);
  Matrix values = f.read_rows("v", kv_head, s.first + skip, kept);
  const std::vector<int64_t> positions = f.read_integers("positions");
  const std::vector<int64_t> q_positions = f.read_integers("q_positions");
  // The sample's queries are rows [sample * N, (sample + 1) * N) of q; the one at position t - 1,
  // else the earliest.
  const int64_t n = c.queries_per_sample, q_first = sample * n;
  int64_t pick = q_first;
  for (int64_t i = q_first; i < q_first + n; ++i) {
    if (q_positions[size_t(i)] == t - 1) pick = i;
  }
  Matrix queries(c.q_per_kv(), c.head_dim);
  for (int64_t g = 0; g < c.q_per_kv(); ++g) {
    const Matrix q = f.read_rows("q", kv_head * c.q_per_kv() + g, pick, 1);
    std::copy_n(q.row(0), c.head_dim, queries.row(g));
  }
  scale_queries_to_model(c, queries);
  Case out = case_from_tensors(std::move(keys), std::move(values), std::move(queries));
  out.logit_softcap = c.logit_softcap;
  out.seed = uint64_t(sample);
  out.layer = layer;
  out.kv_head = kv_head;
  out.q_per_kv = c.q_per_kv();
  for (int64_t i = 0; i < kept; ++i) out.positions[size_t(i)] = positions[size_t(s.first + skip + i)];
  out.query_position = q_positions[size_t(pick)];
  out.rope = capture_layer_rope(c, layer);
  out.rope.enabled = false;  // the keys are cached after RoPE already; nothing is to be undone here
  out.keys_file = out.values_file = f.path();
  return out;
}

}  // namespace kvtune
