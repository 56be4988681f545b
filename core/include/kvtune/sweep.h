// Sweeps (DESIGN §7): a workload, a search space of K and V schemes (with cache-policy values), a
// budget and target runtimes, read from a TOML sweep file (docs/sweep-file.md). Every point is
// expanded and validated before anything is evaluated. The runner (sweep_run.h) evaluates the
// points and streams one record per point; the analysis (sweep_analysis.h) finds the feasible set,
// the Pareto frontier, the best configuration and each runtime's best expressible configuration.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/model_preset.h"
#include "kvtune/registry.h"
#include "kvtune/runtime_table.h"
#include "kvtune/scenario.h"

namespace kvtune {

// How K and V candidates form points.
enum class Pairing {
  cartesian,    // every K candidate with every V candidate
  matched,      // K and V use the same spec (runtimes with one cache dtype)
  independent,  // each K with exact V and each V with exact K, then every pair of the two
                // per-role Pareto sets (bits vs rel_out_err)
};

// The memory budget as a deployment: the cache of `sequences` sequences of `ctx` tokens (model
// shape from the workload's model preset) plus `weights` must fit in `gpu_mem`.
struct MemoryFit {
  uint64_t gpu_mem = 0, weights = 0;
  int64_t ctx = 0, sequences = 1;
};

// What "best" means among the feasible points.
enum class Objective {
  min_bits,   // the fewest bits per element (ties: lower rel_out_err); the default with an error bound
  min_error,  // the lowest rel_out_err (ties: fewer bits); the default with only a memory bound
};

struct SweepBudget {
  Objective objective = Objective::min_bits;
  std::optional<double> max_rel_out_err;  // mean over queries and cases
  std::optional<double> max_attn_kl_p95;
  std::optional<double> min_needle_hit;   // mean; needs needles in the workload
  std::optional<double> max_bits;         // (k_bits + v_bits) / 2 per element
  std::optional<MemoryFit> fit;
};

struct RuntimeTarget {
  std::string name;                // configs/runtimes/<name>.toml
  std::string version = "latest";  // a version of the table's scheme, or "latest"
};

// A point to evaluate: a canonical K spec and V spec, and where it came from.
struct SweepPoint {
  std::string k, v;
  std::string origin;  // "search" or "runtime <name> <version>: <option name>"
};

struct SweepSpec {
  std::string name;
  std::string source;         // the file the spec was read from ("(embedded) ..." for the default)
  std::string text;           // the file's text, written to the output as the resolved spec
  Scenario scenario;          // workload, contexts (exactly one), seeds, layers/heads, model, topk
  std::optional<ModelPreset> model;  // the workload's model preset, when it names one
  Pairing pairing = Pairing::cartesian;
  std::vector<std::string> k_candidates, v_candidates;  // canonical, deduplicated, in file order
  std::vector<SweepPoint> points;                        // expanded, validated, deduplicated
  SweepBudget budget;
  std::vector<RuntimeTarget> runtimes;
  std::vector<RuntimeView> runtime_views;  // one per target: the options its version offers
  std::vector<std::string> plugins;        // shared libraries the file names (sweep_plugin_paths)
  std::vector<std::string> notes;          // what expansion dropped and why (e.g. a runtime option
                                           // whose scheme cannot take the workload's head_dim)
  // Of everything that determines a point's metrics (workload, contexts, seeds, layers, heads,
  // topk) but not of the point list: a resumed sweep may add candidates, never change the workload.
  uint64_t hash = 0;
};

// What a sweep reads besides its own file.
struct SweepContext {
  const Registry* registry = nullptr;
  ModelLookup models;                       // model = "NAME"
  std::vector<RuntimeTable> runtime_tables; // configs/runtimes
};

// Reads and fully validates a sweep file: every candidate spec resolves, every point fits the
// workload's shape, every runtime and version exists. Errors are InputErrors naming
// file:line:column (or the key) and what was expected.
SweepSpec parse_sweep(std::string_view text, const std::string& source_name, const SweepContext& context);
SweepSpec load_sweep(const std::string& path, const SweepContext& context);

// The file's `plugins = [...]`, read before anything else (their families must be in the registry
// that parse_sweep validates against); a relative path is taken from the sweep file's folder.
std::vector<std::string> sweep_plugin_paths(std::string_view text, const std::string& source_name);

const char* pairing_name(Pairing pairing);
const char* objective_name(Objective objective);

}  // namespace kvtune
