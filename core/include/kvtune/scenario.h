// Scenario files (TOML) for `kvtune simulate`: a workload, its seeds, metric options and a list of
// K/V scheme pairs. Every error names file:line:column and what was expected.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/capture.h"
#include "kvtune/evaluator.h"
#include "kvtune/kv_scale_files.h"
#include "kvtune/model_preset.h"
#include "kvtune/registry.h"
#include "kvtune/workload.h"

namespace kvtune {

struct PairRequest {
  std::string name;   // label; the specs when not given
  std::string k, v;   // scheme specs
  std::string where;  // "file:line:col" or "--pair ..." for error messages
};

struct Scenario {
  std::string name;
  std::string model;               // the model preset the workload's shape came from; empty: none
  // The model profile its key/value statistics came from (configs/profiles); empty: the generic
  // synthetic statistics of the workload's own tables, the same for every model.
  std::string profile;
  // The profile's `fitted_key_order`: the pair order its magnitudes were fitted in ("as_computed":
  // the checkpoint's), or "" when it declares none (a profile measured on a capture).
  std::string profile_fitted_key_order;
  WorkloadConfig workload;         // workload.tokens = contexts.front()
  // `source = "cache"`: the capture the cases come from (docs/real-caches.md). `seeds` then index
  // its samples, `layers` are captured model layers, and a context of 0 means each sample whole.
  std::optional<Capture> capture;
  // `scales = "FILE"` (a checkpoint_kv_scales file, kv_scale_files.h): the static K/V scales each
  // case's schemes with static scales apply, per layer (and head), as a runtime loads them.
  std::optional<LoadedKvScales> scales;
  std::vector<int64_t> contexts;   // context lengths to evaluate, each a separate run
  std::vector<uint64_t> seeds{0};
  std::vector<int64_t> layers{0};  // the sampled layers and KV heads (default: all of them)
  std::vector<int64_t> heads{0};
  int64_t topk = 8;
  // `[metrics] precision`: the products' arithmetic (kvtune/attention.h); float64 unless the file
  // asks for float32.
  Precision precision = Precision::float64;
  std::string backend = "cpu";     // `backend`: one of kEvalBackends; the CLI turns it into an EvalBackend
  std::vector<PairRequest> pairs;
};

// The evaluator backends a scenario or sweep file may name, each with what it declares:
// "cpu"; "cuda" (device formats quantized and dequantized by the GPU kernels: the same bits as the
// CPU); "cuda-kernel" (also attention by the fused decode kernel, so its metrics differ).
struct EvalBackendInfo {
  std::string_view name;
  bool computes_attention;  // its rel_out_err comes from another computation (enters the spec hash)
};
inline constexpr std::array<EvalBackendInfo, 3> kEvalBackendInfo = {{
    {"cpu", false},
    {"cuda", false},
    {"cuda-kernel", true},
}};
inline const std::vector<std::string> kEvalBackends = [] {
  std::vector<std::string> names;
  for (const EvalBackendInfo& b : kEvalBackendInfo) names.emplace_back(b.name);
  return names;
}();
inline bool backend_computes_attention(std::string_view backend) {
  for (const EvalBackendInfo& b : kEvalBackendInfo) {
    if (b.name == backend) return b.computes_attention;
  }
  return false;
}

// One case of a scenario run: seeds x layers x heads, seed-major.
struct CaseKey {
  uint64_t seed = 0;
  int64_t layer = 0, kv_head = 0;
};
std::vector<CaseKey> scenario_cases(const Scenario& scenario);

// The workload at one of the scenario's context lengths.
WorkloadConfig workload_at(const Scenario& scenario, int64_t tokens);

// Case `key` at one of the scenario's context lengths: generated, or read from its capture.
Case scenario_case(const Scenario& scenario, const CaseKey& key, int64_t tokens);

// Resolves `model = "NAME"` (a configs/models preset); the default refuses every name.
using ModelLookup = std::function<ModelPreset(const std::string& name)>;

// Resolves `profile = "NAME"` to the file of a model's key/value statistics (configs/profiles); the
// default refuses every name.
using ProfileLookup = std::function<std::filesystem::path(const std::string& name)>;

Scenario parse_scenario(std::string_view text, const std::string& source_name, const ModelLookup& models = {},
                        const ProfileLookup& profiles = {});
Scenario load_scenario(const std::string& path, const ModelLookup& models = {}, const ProfileLookup& profiles = {});

// Evaluates the scenario's pairs: one EvalResult per context length, each over seeds x layers x
// heads. Throws InputError when a scheme cannot take the workload's shape at some context.
// `backend` null runs on the CPU. With `isolate_plugins`, a plan with plugin schemes
// (plan_uses_plugins) is evaluated by evaluate_isolated with those options, so a crashing plugin
// is a PluginFault rather than the end of the process.
std::vector<EvalResult> evaluate_scenario(const Scenario& scenario, const Registry& registry, int threads = 0,
                                          const EvalBackendPtr& backend = nullptr,
                                          const std::optional<IsolationOptions>& isolate_plugins = std::nullopt);

// Builds an evaluation plan: one scheme per distinct canonical K spec and V spec (the separable
// evaluation quantizes each once). Errors are prefixed with the pair's `where`.
EvalPlan build_plan(const std::vector<PairRequest>& pairs, const Registry& registry, int64_t topk);

}  // namespace kvtune
