// kvtune profile DIR --out PROFILE.toml [--layers L,...] [--samples I,...] [--tokens N]
//                [--outlier-threshold X] [--json]
// Condenses a capture into a model profile (docs/real-caches.md, "Profile"): the generator's
// parameters measured on the model's own keys, values and queries, so a synthetic workload at any
// context and layer count draws them without the capture. The file is written atomically.
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <span>

#include "commands.h"
#include "kvtune/capture.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/profile_fit.h"

namespace kvtune::cli {
namespace {

namespace fs = std::filesystem;

struct ProfileOptions {
  std::string dir, out;
  std::vector<int64_t> layers, samples;
  int64_t tokens = 0;
  double outlier_threshold = ProfileFitOptions{}.outlier_threshold;
  bool json = false;
};

int run(const ProfileOptions& o) {
  const fs::path out(o.out);
  if (out.extension() != ".toml") throw InputError("--out " + o.out + ": a profile file ends in .toml");
  if (fs::exists(out)) throw InputError("--out " + o.out + " exists; give a new file");
  const Capture capture = open_capture(o.dir);
  ProfileFitOptions fit;
  fit.layers = o.layers;
  fit.samples = o.samples;
  fit.tokens = o.tokens;
  fit.outlier_threshold = o.outlier_threshold;
  const FittedProfile p = fit_profile(capture, fit);
  const std::string text = profile_toml(p, out.stem().string());
  write_file_atomic(out.string(), std::as_bytes(std::span(text.data(), text.size())));

  if (o.json) {
    nlohmann::json layers = nlohmann::json::array();
    for (const LayerMeasurement& l : p.layers) {
      layers.push_back({{"layer", l.layer},
                        {"key_scale", l.key_scale},
                        {"outlier_count", l.outlier_count},
                        {"outlier_channels", l.outlier_channels},
                        {"outlier_scale", l.outlier_scale},
                        {"outlier_offset", l.outlier_offset},
                        {"channel_offset", l.channel_offset},
                        {"sink_count", l.sink_count},
                        {"sink_mass", l.sink_mass},
                        {"sink_key_norm", l.sink_key_norm},
                        {"recency_strength", l.recency_strength},
                        {"recency_tokens", l.recency_tokens},
                        {"value_scale", l.value_scale},
                        {"query_scale", l.query_scale},
                        {"key_effective_rank", l.key_rank},
                        {"value_effective_rank", l.value_rank},
                        {"attention_entropy", l.attention_entropy}});
    }
    // Where the key statistics' pre-RoPE keys came from: "captured", "inverse_rope" or "as_cached"
    // (a RoPE kvtune cannot undo; rope_unmodelled names the scaling, empty for an unknown convention).
    const char* keys = p.keys_derotated ? "inverse_rope" : p.keys_as_cached ? "as_cached" : "captured";
    std::cout << nlohmann::json{{"capture", o.dir},  {"out", o.out},
                                {"samples", p.samples}, {"pre_rope_keys", keys},
                                {"rope_unmodelled", p.rope_unmodelled}, {"layers", layers}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << "profile of " << o.dir << " (" << (capture.model.empty() ? "unnamed model" : capture.model) << "): "
            << p.samples << " sample(s), " << p.kv_heads << " KV head(s) per layer"
            << (p.keys_derotated ? ", pre-RoPE keys by inverse RoPE" : "")
            << (p.keys_as_cached ? ", keys as cached: kvtune cannot undo their RoPE (" + keys_as_cached_reason(p) + ")"
                                 : std::string())
            << "\n\n"
            << "  layer  k_scale  outliers  outl_offset  ch_offset  sinks  sink_mass  recency  v_scale  q_scale  k_rank\n";
  for (const LayerMeasurement& l : p.layers) {
    char line[160];
    std::snprintf(line, sizeof line, "  %5lld  %7.3g  %8.2f  %11.3g  %9.3g  %5.2f  %9.3f  %7.3g  %7.3g  %7.3g  %6.1f\n",
                  static_cast<long long>(l.layer), l.key_scale, l.outlier_count, l.outlier_offset, l.channel_offset,
                  l.sink_count, l.sink_mass, l.recency_strength, l.value_scale, l.query_scale, l.key_rank);
    std::cout << line;
  }
  std::cout << "\nwritten to " << o.out << " (use it as [workload] profile = \"" << out.filename().string()
            << "\" with the model's shape)\n";
  return 0;
}

}  // namespace

Runner add_profile(CLI::App& app) {
  auto o = std::make_shared<ProfileOptions>();
  app.add_option("dir", o->dir, "capture directory (python/kvtune_capture.py)")->required();
  app.add_option("--out", o->out, "the profile file to write (.toml; must not exist)")->required();
  app.add_option("--layers", o->layers, "captured layers to measure (default: all)")->delimiter(',');
  app.add_option("--samples", o->samples, "the capture's samples to measure (default: all)")->delimiter(',');
  app.add_option("--tokens", o->tokens, "measure each sample's first N tokens (default: whole)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--outlier-threshold", o->outlier_threshold,
                 "a key channel is an outlier above this multiple of the median channel's RMS")
      ->check(CLI::Range(1.0, 1e6))
      ->capture_default_str();
  app.add_flag("--json", o->json, "print the per-layer measurements as JSON");
  return [o] { return run(*o); };
}

}  // namespace kvtune::cli
