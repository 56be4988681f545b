#include "kvtune/scenario.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <numeric>
#include <set>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/runtime_table.h"
#include "rope_scaling_toml.h"
#include "toml_reader.h"
#include "workload_reader.h"

namespace kvtune {
namespace {

using detail::TableReader;
using detail::where;

Distribution distribution(TableReader& t, Distribution fallback) {
  const std::string d = t.choice("distribution", distribution_name(fallback), {"normal", "uniform", "laplace"});
  return d == "uniform" ? Distribution::uniform : d == "laplace" ? Distribution::laplace : Distribution::normal;
}

// `key = "all"` or an array of indices in 0..count-1; absent = all.
std::vector<int64_t> selection(TableReader& t, const std::string& key, int64_t count) {
  std::vector<int64_t> all(static_cast<size_t>(count));
  std::iota(all.begin(), all.end(), 0);
  const toml::node* n = t.node(key);
  if (n == nullptr) return all;
  if (n->is_string()) {
    if (*n->value<std::string>() != "all") t.fail(*n, "'" + key + "' must be \"all\" or an array of indices");
    return all;
  }
  if (!n->is_array()) t.fail(*n, "'" + key + "' must be \"all\" or an array of indices");
  std::vector<int64_t> picked = t.distinct_integers(key, 0, count - 1);
  if (picked.empty()) t.fail(*n, "'" + key + "' must not be empty");
  return picked;
}

// `tokens` as one context length or an array of them.
std::vector<int64_t> contexts(TableReader& w, int64_t fallback) {
  constexpr int64_t kMaxTokens = int64_t(1) << 24;
  const toml::node* n = w.node("tokens");
  if (n == nullptr || n->is_integer()) return {w.integer("tokens", fallback, 1, kMaxTokens)};
  if (!n->is_array()) w.fail(*n, "'tokens' must be a context length or an array of them");
  std::vector<int64_t> out = w.distinct_integers("tokens", 1, kMaxTokens);
  if (out.empty()) w.fail(*n, "'tokens' must not be empty");
  return out;
}

// The profile keys a [[workload.overrides]] entry may change.
LayerOverride read_override(TableReader o, int64_t layers, int64_t head_dim) {
  LayerOverride out;
  const toml::node& list = o.required("layers", "an array of layer indices");
  out.layers = o.distinct_integers("layers", 0, layers - 1);
  if (out.layers.empty()) o.fail(list, "'layers' must not be empty");
  TableReader k = o.table("keys");
  if (k.has("outlier_channels")) out.outlier_channels = k.integers("outlier_channels", 0, head_dim - 1);
  if (k.has("outlier_count")) out.outlier_count = k.integer("outlier_count", 0, 0, head_dim);
  if (out.outlier_channels && out.outlier_count) {
    k.fail(*k.node("outlier_count"), "give either 'outlier_channels' or 'outlier_count', not both");
  }
  if (k.has("outlier_scale")) out.outlier_scale = k.real("outlier_scale", 1.0, 0.0, 1e6);
  if (k.has("outlier_offset")) out.outlier_offset = k.real("outlier_offset", 0.0, 0.0, 1e6);
  if (k.has("channel_offset")) out.channel_offset = k.real("channel_offset", 0.0, 0.0, 1e6);
  k.finish();
  TableReader s = o.table("sinks");
  if (s.has("count")) out.sink_count = s.integer("count", 0, 0, int64_t(1) << 24);
  if (s.has("key_norm")) out.sink_key_norm = s.real("key_norm", 0.0, 0.0, 1e6);
  if (s.has("mass")) out.sink_mass = s.real("mass", 0.0, 0.0, 0.999);
  s.finish();
  o.finish();
  return out;
}

// The model's statistics: [keys], [values], [queries_profile], [sinks], [recency] and
// [[overrides]] of a [workload] table or of a profile file. Every key falls back to what `cfg`
// already holds (a profile's value, else the default), and overrides are appended after a
// profile's, so the scenario's own settings win.
void read_statistics(TableReader& w, WorkloadConfig& cfg, int64_t max_sinks) {
  TableReader k = w.table("keys");
  cfg.keys.distribution = distribution(k, cfg.keys.distribution);
  cfg.keys.scale = k.real("scale", cfg.keys.scale, 0.0, 1e6);
  const bool channels = k.has("outlier_channels"), count = k.has("outlier_count");
  if (channels && count) k.fail(*k.node("outlier_count"), "give either 'outlier_channels' or 'outlier_count', not both");
  if (channels) {
    cfg.keys.outlier_channels = k.integers("outlier_channels", 0, cfg.head_dim - 1);
    cfg.keys.outlier_count = 0;
  }
  if (count) {
    cfg.keys.outlier_count = k.integer("outlier_count", 0, 0, cfg.head_dim);
    cfg.keys.outlier_channels.clear();
  }
  cfg.keys.outlier_scale = k.real("outlier_scale", cfg.keys.outlier_scale, 0.0, 1e6);
  cfg.keys.outlier_offset = k.real("outlier_offset", cfg.keys.outlier_offset, 0.0, 1e6);
  if (const toml::node* band = k.node("outlier_band")) {
    const std::vector<double> b = k.reals("outlier_band", 0.0, 1.0);
    if (b.size() != 2 || b[0] > b[1]) k.fail(*band, "'outlier_band' must be [low, high] with 0 <= low <= high <= 1");
    if (channels) k.fail(*band, "'outlier_band' places drawn channels (outlier_count), not explicit outlier_channels");
    cfg.keys.outlier_band_low = b[0];
    cfg.keys.outlier_band_high = b[1];
  }
  cfg.keys.outlier_pairs = k.boolean("outlier_pairs", cfg.keys.outlier_pairs);
  if (channels && k.has("outlier_pairs")) {
    k.fail(*k.node("outlier_pairs"), "'outlier_pairs' draws pairs (outlier_count), not explicit outlier_channels");
  }
  cfg.keys.channel_offset = k.real("channel_offset", cfg.keys.channel_offset, 0.0, 1e6);
  k.finish();

  TableReader v = w.table("values");
  cfg.values.distribution = distribution(v, cfg.values.distribution);
  cfg.values.scale = v.real("scale", cfg.values.scale, 0.0, 1e6);
  v.finish();

  TableReader q = w.table("queries_profile");
  cfg.query.distribution = distribution(q, cfg.query.distribution);
  cfg.query.scale = q.real("scale", cfg.query.scale, 0.0, 1e6);
  cfg.query.outlier_scale = q.real("outlier_scale", cfg.query.outlier_scale, 0.0, 1e6);
  q.finish();

  TableReader s = w.table("sinks");
  cfg.sinks.count = s.integer("count", cfg.sinks.count, 0, max_sinks);
  cfg.sinks.key_norm = s.real("key_norm", cfg.sinks.key_norm, 0.0, 1e6);
  cfg.sinks.value_scale = s.real("value_scale", cfg.sinks.value_scale, 0.0, 1e6);
  cfg.sinks.mass = s.real("mass", cfg.sinks.mass, 0.0, 0.999);
  s.finish();

  TableReader r = w.table("recency");
  cfg.recency.strength = r.real("strength", cfg.recency.strength, 0.0, 100.0);
  cfg.recency.tokens = r.real("tokens", cfg.recency.tokens, 1e-3, 1e9);
  r.finish();

  if (const toml::node* list = w.node("overrides")) {
    const std::string name = w.path().empty() ? "overrides" : w.path() + ".overrides";
    const toml::array* entries = list->as_array();
    if (entries == nullptr) w.fail(*list, "'overrides' must be an array of tables ([[" + name + "]])");
    for (const toml::node& entry : *entries) {
      if (!entry.is_table()) w.fail(entry, "each [[" + name + "]] entry must be a table with 'layers'");
      cfg.overrides.push_back(read_override(TableReader(*entry.as_table(), w.file(), name), cfg.layers, cfg.head_dim));
    }
  }
}

// A profile file (configs/profiles/NAME.toml): name, description, source, the key order it was
// fitted in (returned; "" when not given) and the statistics tables.
std::string read_profile(const std::filesystem::path& path, WorkloadConfig& cfg) {
  const std::vector<std::byte> bytes = read_file(path.string());
  const toml::table root =
      detail::parse_toml(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string());
  TableReader top(root, path.string(), "");
  top.string("name", "");
  top.string("description", "");
  top.string("source", "");
  const std::string fitted_key_order =
      top.has("fitted_key_order") ? top.required_choice("fitted_key_order", {"as_computed", "adjacent"}) : "";
  // num_layers: the model the profile was measured on. Its overrides name that model's layers and
  // are mapped by relative depth onto a workload with another layer count.
  const int64_t workload_layers = cfg.layers, profile_layers = top.integer("num_layers", cfg.layers, 1, 4096);
  const size_t before = cfg.overrides.size();
  cfg.layers = profile_layers;
  read_statistics(top, cfg, int64_t(1) << 24);
  cfg.layers = workload_layers;
  if (profile_layers != workload_layers) {
    for (size_t i = before; i < cfg.overrides.size(); ++i) {
      std::vector<int64_t> mapped;
      for (int64_t l : cfg.overrides[i].layers) {
        const int64_t m = profile_layers == 1 ? 0
                                              : std::llround(double(l) * double(workload_layers - 1) /
                                                             double(profile_layers - 1));
        if (std::find(mapped.begin(), mapped.end(), m) == mapped.end()) mapped.push_back(m);
      }
      cfg.overrides[i].layers = mapped;
    }
  }
  // [measured]: what `kvtune profile` recorded for people; the generator draws nothing from it.
  if (const toml::node* m = top.node("measured"); m != nullptr && !m->is_table()) {
    top.fail(*m, "'measured' must be a table (kvtune profile's per-layer figures)");
  }
  top.finish();
  return fitted_key_order;
}

// [workload.needles]: depths, mass, per_query.
void read_needles(TableReader& w, NeedleProfile& needles) {
  TableReader n = w.table("needles");
  needles.depths = n.distinct_reals("depths", 0.0, 1.0);
  needles.mass = n.real("mass", needles.mass, 1e-6, 0.999);
  needles.per_query = n.integer("per_query", 1, 1, 64);
  n.finish();
}

// [workload] with source = "cache": the capture at `path` (relative to the file's folder) gives the
// shape; `layers`, `heads` and `samples` select from it and `tokens` takes a prefix. The keys that
// describe a synthetic workload have no meaning for a capture and are refused.
// A path a file gives: relative to the file's own folder.
std::string beside(const TableReader& w, const toml::node& n) {
  const std::filesystem::path p = *n.value<std::string>();
  return (p.is_relative() ? std::filesystem::path(w.file()).parent_path() / p : p).string();
}

void read_cache_workload(TableReader& w, Scenario& sc) {
  const toml::node& path_node = w.required("path", "the capture directory (python/kvtune_capture.py --out)");
  if (!path_node.is_string()) w.fail(path_node, "'path' must be a string: the capture directory");
  try {
    sc.capture = open_capture(beside(w, path_node));
  } catch (const InputError& e) {
    w.fail(path_node, e.what());
  }
  const Capture& c = *sc.capture;
  if (const toml::node* n = w.node("scales")) {
    if (!n->is_string()) w.fail(*n, "'scales' must be a string: a k_scale / v_scale file (kvtune calibrate --out)");
    try {
      sc.scales = read_checkpoint_kv_scales(beside(w, *n));
    } catch (const InputError& e) {
      w.fail(*n, e.what());
    }
  }
  for (const char* key : detail::kSyntheticWorkloadKeys) {
    if (w.has(key)) {
      w.fail(*w.node(key), std::string("'") + key + "' describes a synthetic workload; a capture (source = \"cache\") "
                           "brings its own keys, values, queries and shape");
    }
  }
  WorkloadConfig& cfg = sc.workload;
  cfg = capture_shape(c);
  sc.layers = c.layers;
  if (const toml::node* n = w.node("layers")) {
    if (!(n->is_string() && *n->value<std::string>() == "all")) {
      sc.layers = selection(w, "layers", c.model_layers);
      for (int64_t l : sc.layers) {
        if (std::find(c.layers.begin(), c.layers.end(), l) == c.layers.end()) {
          w.fail(*n, "layer " + std::to_string(l) + " was not captured (the capture has layers " +
                         format_layers(c.layers, ", ") + ")");
        }
      }
    }
  }
  sc.heads = selection(w, "heads", c.kv_heads);
  const std::vector<int64_t> samples = selection(w, "samples", int64_t(c.samples.size()));
  sc.seeds.assign(samples.begin(), samples.end());
  int64_t shortest = INT64_MAX;
  for (int64_t s : samples) shortest = std::min(shortest, c.samples[size_t(s)].tokens);
  sc.contexts = w.has("tokens") ? contexts(w, 1) : std::vector<int64_t>{0};
  for (int64_t t : sc.contexts) {
    if (t > shortest) {
      w.fail(*w.node("tokens"), "a prefix of " + std::to_string(t) + " tokens is longer than the shortest selected "
                                "sample (" + std::to_string(shortest) + " tokens)");
    }
  }
  cfg.tokens = sc.contexts.front() == 0 ? shortest : sc.contexts.front();
  // Needles go into the real keys as into synthetic ones (plant_needles), past the first token.
  read_needles(w, cfg.needles);
  const int64_t needed = kCaptureSinkTokens + cfg.needles.per_query + 1;
  if (!cfg.needles.depths.empty() && cfg.tokens < needed) {
    w.fail(*w.node("needles"), std::to_string(cfg.needles.per_query) + " needle(s) per query need " +
                                   std::to_string(needed) + " tokens; the cases have " + std::to_string(cfg.tokens));
  }
  // Every selected layer and head must have its scales before anything runs.
  if (sc.scales) {
    try {
      for (int64_t l : sc.layers) {
        for (int64_t h : sc.heads) sc.scales->k(l, h), sc.scales->v(l, h);
      }
    } catch (const InputError& e) {
      w.fail(*w.node("scales"), e.what());
    }
  }
}

}  // namespace

namespace detail {

// `sliding_window` and `sliding_layers` (a preset's, else none): which layers attend to only the last
// sliding_window tokens. A preset's layers beyond an explicit num_layers are dropped.
void read_sliding_window(TableReader& w, WorkloadConfig& cfg) {
  std::erase_if(cfg.sliding_layers, [&](int64_t l) { return l >= cfg.layers; });
  cfg.sliding_window = w.integer("sliding_window", cfg.sliding_window, 0, int64_t(1) << 40);
  if (w.has("sliding_layers")) cfg.sliding_layers = w.distinct_integers("sliding_layers", 0, cfg.layers - 1);
  if ((cfg.sliding_window > 0) != !cfg.sliding_layers.empty()) {
    const toml::node* at = w.node("sliding_window") ? w.node("sliding_window") : w.node("sliding_layers");
    const std::string what = "a sliding window of " + std::to_string(cfg.sliding_window) +
                             " tokens needs the layers that slide, and they need a window (" +
                             std::to_string(cfg.sliding_layers.size()) + " sliding layers)";
    if (at != nullptr) w.fail(*at, what);
    throw InputError(w.file() + ": " + what);
  }
}

void read_workload(TableReader w, const ModelLookup& models, const ProfileLookup& profiles, Scenario& sc) {
  WorkloadConfig& cfg = sc.workload;
  if (w.choice("source", "synthetic", {"synthetic", "cache"}) == "cache") {
    read_cache_workload(w, sc);
    w.finish();
    return;
  }
  if (w.has("path")) w.fail(*w.node("path"), "'path' is for source = \"cache\" (a capture directory)");
  if (w.has("samples")) w.fail(*w.node("samples"), "'samples' is for source = \"cache\" (the capture's samples)");
  if (w.has("scales")) w.fail(*w.node("scales"), "'scales' is for source = \"cache\" (scales fitted on a capture)");
  if (const toml::node* m = w.node("model")) {
    if (!m->is_string()) w.fail(*m, "'model' must be a model preset name (configs/models/NAME.toml)");
    sc.model = *m->value<std::string>();
    ModelPreset preset;
    try {
      if (!models) throw InputError("model presets are not available here");
      preset = models(sc.model);
    } catch (const InputError& e) {
      w.fail(*m, e.what());
    }
    // The preset gives the shape and RoPE; explicit keys below still win.
    cfg.head_dim = preset.shape.head_dim;
    cfg.layers = preset.shape.layers;
    cfg.kv_heads = preset.shape.kv_heads;
    cfg.q_per_kv = preset.q_heads / preset.shape.kv_heads;
    cfg.rope.enabled = true;
    cfg.rope.theta = preset.rope_theta;
    cfg.rope.convention = preset.rope_convention;
    cfg.rope.scaling = preset.rope_scaling;
    cfg.sliding_window = preset.shape.sliding_window;
    cfg.sliding_layers = sliding_layer_indices(preset);
    cfg.sliding_rope_theta = preset.sliding_rope_theta;
    cfg.logit_softcap = preset.logit_softcap;
  }
  sc.contexts = contexts(w, cfg.tokens);
  cfg.tokens = sc.contexts.front();
  cfg.head_dim = w.integer("head_dim", cfg.head_dim, 1, 4096);
  cfg.queries = w.integer("queries", cfg.queries, 1, 1 << 16);
  cfg.layers = w.integer("num_layers", cfg.layers, 1, 4096);
  cfg.kv_heads = w.integer("kv_heads", cfg.kv_heads, 1, 1024);
  cfg.q_per_kv = w.integer("q_per_kv", cfg.q_per_kv, 1, 1024);
  read_sliding_window(w, cfg);
  if (cfg.sliding_layers.empty()) cfg.sliding_rope_theta = 0.0;  // a preset's base with no layer left to take it
  // 0 turns a preset's cap off; a cap far below the logits' spread flattens every distribution.
  cfg.logit_softcap = w.real("logit_softcap", cfg.logit_softcap, 0.0, 1e6);
  sc.layers = selection(w, "layers", cfg.layers);
  sc.heads = selection(w, "heads", cfg.kv_heads);
  const int64_t max_sinks = *std::min_element(sc.contexts.begin(), sc.contexts.end()) - 1;
  if (const toml::node* p = w.node("profile")) {
    if (!p->is_string()) w.fail(*p, "'profile' must be a model profile name (configs/profiles/NAME.toml)");
    sc.profile = *p->value<std::string>();
    try {
      if (!profiles) throw InputError("model profiles are not available here");
      // A profile file (kvtune profile --out) is found beside the file that names it.
      const bool is_file = sc.profile.find('/') != std::string::npos || sc.profile.ends_with(".toml");
      sc.profile_fitted_key_order = read_profile(profiles(is_file ? beside(w, *p) : sc.profile), cfg);
    } catch (const InputError& e) {
      w.fail(*p, e.what());
    }
  }
  read_statistics(w, cfg, max_sinks);
  // The workload's own sink count is bounded above; one it left to its profile is checked here,
  // where the profile is named (the generator's check says only "[workload]").
  if (const toml::node* p = w.node("profile"); p != nullptr && cfg.sinks.count > max_sinks) {
    w.fail(*p, "the profile's [sinks] count " + std::to_string(cfg.sinks.count) +
                                   " does not fit this workload's " + std::to_string(max_sinks + 1) +
                                   " tokens (at most " + std::to_string(max_sinks) +
                                   "); set [workload.sinks] count to lower it");
  }

  if (w.has("rope")) {
    TableReader r = w.table("rope");
    cfg.rope.enabled = r.boolean("enabled", true);
    cfg.rope.theta = r.real("theta", cfg.rope.theta, 1.0 + 1e-9, 1e12);
    const std::string convention = cfg.rope.convention == RopeConvention::interleaved ? "interleaved" : "rotate_half";
    cfg.rope.convention = r.choice("convention", convention, {"rotate_half", "interleaved"}) == "interleaved"
                              ? RopeConvention::interleaved
                              : RopeConvention::rotate_half;
    // A scaling of its own replaces the preset's; a theta without one keeps it.
    if (r.has("scaling")) cfg.rope.scaling = detail::read_rope_scaling(r.table("scaling"));
    cfg.sliding_rope_theta = r.real("sliding_theta", cfg.sliding_rope_theta, 1.0 + 1e-9, 1e12);
    if (const toml::node* at = r.node("sliding_theta"); at != nullptr && cfg.sliding_layers.empty()) {
      r.fail(*at, "'sliding_theta' is the sliding layers' RoPE base, and this workload has none "
                  "(set [workload] sliding_window and sliding_layers, or a model with them)");
    }
    r.finish();
  }
  if (cfg.rope.enabled && cfg.head_dim % 2 != 0) {
    // head_dim may come from the model preset or a capture, with no key of its own in [workload].
    const toml::node* at = w.node("rope");
    for (const char* key : {"head_dim", "model", "source"}) at = at != nullptr ? at : w.node(key);
    w.fail(at != nullptr ? *at : static_cast<const toml::node&>(w.raw()),
           "RoPE needs an even head_dim, and it is " + std::to_string(cfg.head_dim));
  }

  read_needles(w, cfg.needles);

  TableReader c = w.table("calibration");
  cfg.calibration.tokens = c.integer("tokens", 0, 0, int64_t(1) << 24);
  cfg.calibration.include_sinks = c.boolean("include_sinks", true);
  cfg.calibration.source =
      c.choice("source", "same", {"same", "fresh"}) == "fresh" ? CalibrationSource::fresh : CalibrationSource::same;
  cfg.calibration.samples = c.integer("samples", 1, 1, 4096);
  cfg.calibration.granularity = c.choice("granularity", "head", {"head", "layer"}) == "layer"
                                    ? CalibrationGranularity::layer
                                    : CalibrationGranularity::head;
  for (const char* key : {"source", "samples", "granularity"}) {
    if (c.has(key) && cfg.calibration.tokens == 0) {
      c.fail(*c.node(key), "calibration needs 'tokens' (the size of the calibration window)");
    }
  }
  for (const char* key : {"samples", "granularity"}) {
    if (c.has(key) && cfg.calibration.source != CalibrationSource::fresh) {
      c.fail(*c.node(key), std::string("'") + key +
                               "' needs source = \"fresh\": a calibration set is drawn apart from the evaluated "
                               "context");
    }
  }
  c.finish();

  w.finish();
}

void validate_workload(const Scenario& sc, const std::string& source_name) {
  if (sc.capture) return;  // read_cache_workload checked the prefixes against the capture
  for (int64_t tokens : sc.contexts) {
    try {
      validate(workload_at(sc, tokens));
    } catch (const InputError& e) {
      const std::string at = sc.contexts.size() > 1 ? " at " + std::to_string(tokens) + " tokens" : "";
      throw InputError(source_name + ": [workload]" + at + ": " + e.what());
    }
  }
}

void read_seeds(TableReader& top, Scenario& sc) {
  const toml::node* seeds = top.node("seeds");
  if (seeds != nullptr && sc.capture) {
    top.fail(*seeds, "a capture's cases are its samples: select them with [workload] samples, not 'seeds'");
  }
  if (seeds != nullptr) {
    if (seeds->is_integer()) {
      const int64_t count = top.integer("seeds", 1, 1, 1 << 20);
      // The last seed, seed_start + count - 1, stays within 0..2^62 as an explicit seed must.
      const int64_t first = top.integer("seed_start", 0, 0, (int64_t(1) << 62) - (count - 1));
      sc.seeds.clear();
      for (int64_t i = 0; i < count; ++i) sc.seeds.push_back(static_cast<uint64_t>(first + i));
    } else if (seeds->is_array()) {
      sc.seeds.clear();
      for (int64_t s : top.distinct_integers("seeds", 0, int64_t(1) << 62)) sc.seeds.push_back(static_cast<uint64_t>(s));
      if (sc.seeds.empty()) top.fail(*seeds, "'seeds' must not be empty");
    } else {
      top.fail(*seeds, "'seeds' must be a count (integer) or an array of seeds");
    }
  }
  if (top.has("seed_start") && !(seeds != nullptr && seeds->is_integer())) {
    top.fail(*top.node("seed_start"), "'seed_start' needs 'seeds' given as a count");
  }
  top.node("seed_start");
}

void read_backend(TableReader& top, Scenario& sc) { sc.backend = top.choice("backend", sc.backend, kEvalBackends); }

void read_metrics(TableReader& top, Scenario& sc) {
  TableReader metrics = top.table("metrics");
  sc.topk = metrics.integer("topk", sc.topk, 1, 1 << 20);
  sc.precision = *precision_from_name(
      metrics.choice("precision", std::string(precision_name(sc.precision)), {"float64", "float32"}));
  metrics.finish();
}

}  // namespace detail

std::vector<CaseKey> scenario_cases(const Scenario& sc) {
  std::vector<CaseKey> out;
  for (uint64_t seed : sc.seeds) {
    for (int64_t layer : sc.layers) {
      for (int64_t head : sc.heads) out.push_back({seed, layer, head});
    }
  }
  return out;
}

Case scenario_case(const Scenario& sc, const CaseKey& key, int64_t tokens) {
  if (sc.capture) {
    Case c = capture_case(*sc.capture, int64_t(key.seed), key.layer, key.kv_head, tokens);
    // The sinks are the sequence's first tokens: a sliding layer's window may have left them behind.
    plant_needles(c, sc.workload.needles, c.positions.front() == 0 ? kCaptureSinkTokens : 0);
    if (sc.scales) {
      c.k_static_scale = sc.scales->k(key.layer, key.kv_head);
      c.v_static_scale = sc.scales->v(key.layer, key.kv_head);
    }
    return c;
  }
  return generate_case(workload_at(sc, tokens), key.seed, key.layer, key.kv_head);
}

WorkloadConfig workload_at(const Scenario& sc, int64_t tokens) {
  WorkloadConfig cfg = sc.workload;
  cfg.tokens = tokens;
  return cfg;
}

Scenario parse_scenario(std::string_view text, const std::string& source_name, const ModelLookup& models,
                        const ProfileLookup& profiles) {
  const toml::table root = detail::parse_toml(text, source_name);
  Scenario sc;
  TableReader top(root, source_name, "");
  sc.name = top.string("name", source_name);
  top.string("description", "");
  detail::read_workload(top.table("workload"), models, profiles, sc);
  detail::validate_workload(sc, source_name);
  detail::read_seeds(top, sc);
  detail::read_backend(top, sc);

  detail::read_metrics(top, sc);

  const toml::node* pairs = top.node("pairs");
  const toml::array* list = pairs ? pairs->as_array() : nullptr;
  if (pairs == nullptr) throw InputError(source_name + ": no [[pairs]]; a scenario needs at least one K/V pair");
  if (list == nullptr || list->empty()) top.fail(*pairs, "'pairs' must be an array of tables ([[pairs]]) with k and v");
  for (const toml::node& entry : *list) {
    if (!entry.is_table()) top.fail(entry, "each [[pairs]] entry must be a table with 'k' and 'v'");
    TableReader p(*entry.as_table(), source_name, "pairs");
    PairRequest req;
    for (const char* role : {"k", "v"}) {
      const toml::node* n = p.node(role);
      if (n == nullptr) p.fail(entry, std::string("[[pairs]] entry has no '") + role + "' scheme spec");
      if (!n->is_string()) p.fail(*n, std::string("'") + role + "' must be a scheme spec string");
      (role[0] == 'k' ? req.k : req.v) = *n->value<std::string>();
    }
    req.where = where(source_name, entry.source());
    req.name = p.string("name", "");
    p.finish();
    sc.pairs.push_back(std::move(req));
  }
  top.finish();
  return sc;
}

Scenario load_scenario(const std::string& path, const ModelLookup& models, const ProfileLookup& profiles) {
  const std::vector<std::byte> bytes = read_file(path);
  return parse_scenario(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path, models,
                        profiles);
}

std::vector<EvalResult> evaluate_scenario(const Scenario& sc, const Registry& registry, int threads,
                                          const EvalBackendPtr& backend,
                                          const std::optional<IsolationOptions>& isolate_plugins) {
  EvalPlan plan = build_plan(sc.pairs, registry, sc.topk);
  plan.precision = sc.precision;
  plan.backend = backend;
  // A scheme that cannot take the workload's shape is refused at the pair that names it.
  for (int64_t tokens : sc.contexts) {
    for (size_t i = 0; i < plan.pairs.size(); ++i) {
      for (const SchemePtr& s : {plan.k_schemes[plan.pairs[i].k], plan.v_schemes[plan.pairs[i].v]}) {
        const std::string why = s->check_shape(tokens == 0 ? sc.workload.tokens : tokens, sc.workload.head_dim);
        if (!why.empty()) throw InputError(sc.pairs[i].where + ": " + why);
      }
    }
  }
  const std::vector<CaseKey> cases = scenario_cases(sc);
  std::vector<EvalResult> runs;
  for (int64_t tokens : sc.contexts) {
    const CaseSource source = [&](size_t i) { return scenario_case(sc, cases[i], tokens); };
    runs.push_back(isolate_plugins && plan_uses_plugins(plan)
                       ? evaluate_isolated(plan, cases.size(), source, threads, *isolate_plugins)
                       : evaluate(plan, cases.size(), source, threads));
  }
  return runs;
}

EvalPlan build_plan(const std::vector<PairRequest>& pairs, const Registry& registry, int64_t topk) {
  EvalPlan plan;
  plan.topk = topk;
  std::map<std::string, size_t> k_index, v_index;
  auto intern = [&](const std::string& spec, const std::string& where, Role role, std::vector<SchemePtr>& list,
                    std::map<std::string, size_t>& index) {
    SchemePtr s;
    try {
      s = registry.make(spec);
    } catch (const InputError& e) {
      throw InputError(where + ": " + e.what());
    }
    if (const std::string why = role_problem(*s, role); !why.empty()) throw InputError(where + ": " + why);
    const auto [it, added] = index.emplace(s->spec(), list.size());
    if (added) list.push_back(s);
    return it->second;
  };
  for (const PairRequest& p : pairs) {
    EvalPair e;
    e.k = intern(p.k, p.where, Role::key, plan.k_schemes, k_index);
    e.v = intern(p.v, p.where, Role::value, plan.v_schemes, v_index);
    e.name = p.name.empty() ? plan.k_schemes[e.k]->spec() + " / " + plan.v_schemes[e.v]->spec() : p.name;
    plan.pairs.push_back(std::move(e));
  }
  return plan;
}

}  // namespace kvtune
