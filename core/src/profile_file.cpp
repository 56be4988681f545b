// profile_toml: a FittedProfile as a configs/profiles file. Written as text (toml++ writes no
// comments, and a profile says where each number comes from); strings go through toml++'s
// formatter so they are escaped as TOML wants.
#include <cstdio>
#include <sstream>
#include <toml++/toml.h>

#include "kvtune/profile_fit.h"

namespace kvtune {
namespace {

std::string num(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  std::string s = text;
  // TOML floats need a fraction or an exponent.
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string quoted(const std::string& s) {
  std::ostringstream out;
  out << toml::value<std::string>(s);
  return out.str();
}

template <typename T, typename F>
std::string array(const std::vector<T>& items, F&& format) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i ? ", " : "") + format(items[i]);
  return out + "]";
}

}  // namespace

std::string keys_as_cached_reason(const FittedProfile& p) {
  if (!p.keys_as_cached) return {};
  return p.rope_unmodelled.empty() ? "its rotary convention is unknown"
                                   : "its rope_scaling (" + p.rope_unmodelled + ") is not reproduced";
}

std::string profile_toml(const FittedProfile& p, const std::string& name) {
  const WorkloadConfig& w = p.workload;
  std::ostringstream o;
  o << "# Key/value statistics measured on a capture by `kvtune profile` (docs/real-caches.md, \"Profile\").\n"
    << "# Use it as [workload] profile = \"" << name << ".toml\" (a path, beside the scenario) with the model's\n"
    << "# shape: head_dim " << p.head_dim << ", kv_heads " << p.kv_heads << ", q_per_kv " << p.q_per_kv
    << ", num_layers " << p.model_layers << ".\n"
    << "# Every number is a mean over the " << p.samples << " sample(s) x " << p.kv_heads
    << " KV head(s) of each measured layer; the base\n"
    << "# tables hold the median over the layers and [[overrides]] each measured layer's own values.\n";
  if (p.keys_derotated) {
    o << "# The capture has no pre-RoPE keys: they were recovered by inverse RoPE (theta " << num(w.rope.theta);
    if (const RopeScaling& s = w.rope.scaling; s.type != RopeScalingType::none) {
      o << ", rope_scaling " << rope_scaling_name(s.type) << " factor " << num(s.factor);
    }
    if (w.sliding_rope_theta > 0) o << "; the sliding layers' theta " << num(w.sliding_rope_theta);
    o << ").\n";
  } else if (p.keys_as_cached) {
    o << "# The capture has no pre-RoPE keys and kvtune cannot undo its RoPE (" << keys_as_cached_reason(p)
      << "): the keys were measured as cached, after RoPE, which spreads a channel's statistics over its pair.\n";
  }
  o << "name = " << quoted(name) << "\n"
    << "description = " << quoted("measured on a capture of " + (p.model.empty() ? std::string("a model") : p.model))
    << "\n"
    << "source = " << quoted("kvtune profile " + p.capture_dir + " (" + std::to_string(p.samples) + " samples, " +
                             std::to_string(p.tokens) + "+ tokens each)")
    << "\n"
    << "num_layers = " << p.model_layers << "   # the overrides' layer indices are this model's (mapped by depth)\n\n";

  o << "[keys]                       # before RoPE, over the tokens after the sinks\n"
    << "distribution = " << quoted(distribution_name(w.keys.distribution)) << "\n"
    << "scale = " << num(w.keys.scale) << "                # median std-dev of the ordinary channels\n"
    << "outlier_count = " << w.keys.outlier_count << "            # channels whose RMS exceeds the threshold x the median\n"
    << "outlier_band = [" << num(w.keys.outlier_band_low) << ", " << num(w.keys.outlier_band_high)
    << "]   # where they sit in the RoPE spectrum (0 fastest, 1 slowest)\n"
    << "outlier_pairs = " << (w.keys.outlier_pairs ? "true" : "false") << "\n"
    << "outlier_scale = " << num(w.keys.outlier_scale) << "        # their token-to-token std-dev / scale\n"
    << "outlier_offset = " << num(w.keys.outlier_offset) << "       # their |mean| / scale\n"
    << "channel_offset = " << num(w.keys.channel_offset) << "       # std-dev of the ordinary channels' means\n\n";
  o << "[values]\n"
    << "distribution = " << quoted(distribution_name(w.values.distribution)) << "\n"
    << "scale = " << num(w.values.scale) << "\n\n";
  o << "[queries_profile]              # spread about the rows' mean (the sink and recency directions removed)\n"
    << "distribution = " << quoted(distribution_name(w.query.distribution)) << "\n"
    << "scale = " << num(w.query.scale) << "\n"
    << "outlier_scale = " << num(w.query.outlier_scale) << "        # on the keys' outlier channels\n\n";
  o << "[sinks]                        # the leading tokens the real queries give a large share\n"
    << "count = " << w.sinks.count << "\n"
    << "key_norm = " << num(w.sinks.key_norm) << "             # over the median key norm\n"
    << "value_scale = " << num(w.sinks.value_scale) << "\n"
    << "mass = " << num(w.sinks.mass) << "                 # their share of the real queries' attention\n\n";
  o << "[recency]                      # logit(age) - its mean, fitted as strength * exp(-age / tokens)\n"
    << "strength = " << num(w.recency.strength) << "\n"
    << "tokens = " << num(w.recency.tokens) << "\n";
  for (const LayerOverride& ov : w.overrides) {
    o << "\n[[overrides]]\nlayers = " << array(ov.layers, [](int64_t l) { return std::to_string(l); }) << "\n"
      << "[overrides.keys]\n"
      << "outlier_count = " << ov.outlier_count.value_or(0) << "\n"
      << "outlier_scale = " << num(ov.outlier_scale.value_or(1.0)) << "\n"
      << "outlier_offset = " << num(ov.outlier_offset.value_or(0.0)) << "\n"
      << "channel_offset = " << num(ov.channel_offset.value_or(0.0)) << "\n"
      << "[overrides.sinks]\n"
      << "count = " << ov.sink_count.value_or(0) << "\n";
    if (ov.sink_key_norm) o << "key_norm = " << num(*ov.sink_key_norm) << "\n";
    if (ov.sink_mass) o << "mass = " << num(*ov.sink_mass) << "\n";
  }
  // What the generator does not draw from, recorded per measured layer for the reader.
  auto per_layer = [&](double LayerMeasurement::*field) {
    return array(p.layers, [&](const LayerMeasurement& l) { return num(l.*field); });
  };
  o << "\n[measured]                     # per measured layer; read by people, not by the generator\n"
    << "layers = " << array(p.layers, [](const LayerMeasurement& l) { return std::to_string(l.layer); }) << "\n"
    << "key_kurtosis = " << per_layer(&LayerMeasurement::key_kurtosis) << "\n"
    << "value_kurtosis = " << per_layer(&LayerMeasurement::value_kurtosis) << "\n"
    << "key_effective_rank = " << per_layer(&LayerMeasurement::key_rank) << "\n"
    << "value_effective_rank = " << per_layer(&LayerMeasurement::value_rank) << "\n"
    << "attention_entropy = " << per_layer(&LayerMeasurement::attention_entropy) << "   # nats\n"
    << "key_scale = " << per_layer(&LayerMeasurement::key_scale) << "\n"
    << "value_scale = " << per_layer(&LayerMeasurement::value_scale) << "\n"
    << "query_scale = " << per_layer(&LayerMeasurement::query_scale) << "\n"
    << "recency_strength = " << per_layer(&LayerMeasurement::recency_strength) << "\n";
  for (const LayerMeasurement& l : p.layers) {
    o << "outlier_channels_" << l.layer << " = "
      << array(l.outlier_channels, [](int64_t e) { return std::to_string(e); }) << "\n";
  }
  return o.str();
}

}  // namespace kvtune
