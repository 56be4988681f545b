// Sweeps (DESIGN §7): a workload, a search space of K and V schemes (with cache-policy values), a
// budget and target runtimes, read once from a TOML sweep file (docs/sweep-file.md) into one typed
// SweepSpec that the runner, resume, shards, merge and the analysis all use. Every point is
// expanded, made and validated before anything is evaluated. The runner (sweep_run.h) evaluates the
// points and streams one record per point; the analysis (sweep_analysis.h) finds the feasible set,
// the Pareto frontier, the best configuration and each runtime's best expressible configuration.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/metrics.h"
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
// shape from the workload's model preset) plus `weights` must fit in `gpu_mem`. With
// `tensor_parallel` N > 1 that holds on each of N GPUs of `gpu_mem`: the weights split evenly and
// each GPU holds its share of the KV heads (fit_per_gpu, memory.h).
struct MemoryFit {
  uint64_t gpu_mem = 0, weights = 0;  // gpu_mem: one GPU's; weights: the whole model's
  int64_t ctx = 0, sequences = 1;
  int64_t tensor_parallel = 1;
};

// What "best" means among the feasible points.
enum class Objective {
  min_bits,   // the fewest bits per element (ties: lower rel_out_err); the default with an error bound
  min_error,  // the lowest rel_out_err (ties: fewer bits); the default with only a memory bound
};

// A budget term: a statistic of one metric's samples bounded from above or below. A sweep file
// spells it max_<metric>[_p95] or min_<metric>[_p95] (mean without the suffix), for every metric of
// kMetricNames: max_rel_out_err, max_attn_kl_p95, min_needle_hit, min_top1_agree_p95, ...
enum class Statistic { mean, p95 };
enum class BoundKind { at_most, at_least };
struct BudgetTerm {
  Metric metric = Metric::rel_out_err;
  Statistic statistic = Statistic::mean;
  BoundKind kind = BoundKind::at_most;
  double bound = 0.0;

  std::string key() const;  // the sweep-file key, e.g. "max_attn_kl_p95"
  double value(const Summary& s) const { return statistic == Statistic::mean ? s.mean : s.p95; }
  const Interval& interval(const Summary& s) const { return statistic == Statistic::mean ? s.mean_ci : s.p95_ci; }
  // NaN fails every bound: a broken metric is never feasible.
  bool holds(double v) const { return kind == BoundKind::at_most ? v <= bound : v >= bound; }
};
// The term a key names (its bound left 0), or nullopt when the key names none.
std::optional<BudgetTerm> budget_term_for_key(std::string_view key);

struct SweepBudget {
  Objective objective = Objective::min_bits;
  std::vector<BudgetTerm> terms;   // in the file's order
  std::optional<double> max_bits;  // (k_bits + v_bits) / 2 per element
  std::optional<MemoryFit> fit;
  // [budget] confidence: judge each error term on its confidence interval at this level instead of
  // its estimate. A term holds when the whole interval meets the bound, fails when none of it does,
  // and leaves the point undecided when the interval straddles the bound. The level is also that of
  // every interval the records carry (kDefaultConfidence without it), so it is part of the hash.
  std::optional<double> confidence;
  double interval_level() const { return confidence.value_or(kDefaultConfidence); }
};

struct RuntimeTarget {
  std::string name;                // configs/runtimes/<name>.toml
  std::string version = "latest";  // a version of the table's scheme, or "latest"
};

// A point to evaluate: its two schemes (made once, shared, immutable), their canonical specs, and
// where it came from.
struct SweepPoint {
  std::string k, v;    // canonical specs: k_scheme->spec(), v_scheme->spec()
  std::string origin;  // "search" or "runtime <name> <version>: <option name>"
  SchemePtr k_scheme, v_scheme;
};
// A point of two specs made by `registry` (InputError for a spec it refuses).
SweepPoint make_point(const Registry& registry, std::string_view k, std::string_view v, std::string origin);

// Something expansion dropped, as data (sweep_report.h's note_text renders it).
struct SweepNote {
  enum class Kind {
    grid_dropped,         // skip_invalid dropped `dropped` combinations of the grid at `where`
    list_dropped,         // [search] skip_invalid dropped `dropped` k/v/both entries the shape cannot take
    constraints_dropped,  // [search.constraints] dropped `dropped` of `of` pairs
    option_dropped,       // runtime `where` ("name version"): option `option` cannot take the workload
  };
  Kind kind = Kind::grid_dropped;
  std::string where, option;
  size_t dropped = 0, of = 0;
  size_t by_order = 0, by_sum = 0, by_exclude = 0;  // constraints_dropped: k_bits_at_least_v_bits,
                                                    // max_pair_bits, exclude
  std::vector<std::string> reasons;                 // the schemes' own messages (the first few)
};
const char* note_kind_name(SweepNote::Kind kind);

// [search] exempt_layers / exempt_spec: besides each point as evaluated, judge it with its N most
// damaged sampled layers kept at `spec` (K and V), for each N of `counts` (layer_exemption.h).
struct LayerExemptionSearch {
  std::vector<int64_t> counts;  // empty: no exemption search by count
  // [search] exempt_sliding_window: also judge each point with every sliding-window layer of the
  // model kept at `spec` (where some sampled layers slide and some do not).
  bool sliding_window = false;
  bool any() const { return !counts.empty() || sliding_window; }
  std::string spec = "bf16";    // canonical; the sweep evaluates the pair (spec, spec) as its baseline
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
  // The top-level serve_ctx: the tokens per sequence the cache is served at when that is not the
  // evaluated context (0: not given). Memory is counted there; a fit's ctx defaults to it.
  int64_t serve_ctx = 0;
  LayerExemptionSearch exemption;
  std::vector<RuntimeTarget> runtimes;
  std::vector<RuntimeView> runtime_views;  // one per target: the options its version offers
  std::vector<std::string> plugins;        // shared libraries the file names (absolute paths)
  std::shared_ptr<const Registry> registry;  // what the specs were made by (plugins included)
  std::map<std::string, SchemePtr, std::less<>> schemes;  // every candidate and option, by canonical spec
  std::vector<SweepNote> notes;            // what expansion dropped and why (e.g. a runtime option
                                           // whose scheme cannot take the workload's head_dim)
  // Of everything that determines a point's metrics (workload, contexts, seeds, layers, heads,
  // topk) but not of the point list: a resumed sweep may add candidates, never change the workload.
  uint64_t hash = 0;

  // The scheme of a canonical spec of this sweep; the registry makes one it does not hold.
  SchemePtr scheme(std::string_view spec) const;
};

// Where expansion is, for a progress display: `stage` ("K candidates", "V candidates", "pairs").
using ExpandProgress = std::function<void(std::string_view stage, size_t done, size_t total)>;

// What a sweep reads besides its own file.
struct SweepContext {
  const Registry* registry = nullptr;
  // The registry plus the file's `plugins` (absolute paths); empty: a file naming plugins is refused.
  std::function<std::shared_ptr<const Registry>(const std::vector<std::string>& plugins)> with_plugins;
  ModelLookup models;                       // model = "NAME"
  ProfileLookup profiles;                   // profile = "NAME"
  std::vector<RuntimeTable> runtime_tables; // configs/runtimes
  ExpandProgress progress;                  // may be empty
};

// A sweep's points are counted before they are made; more than this many is refused unless the
// file raises [search] max_points (16 million points need > 10 GB before the first evaluation).
inline constexpr int64_t kDefaultMaxPoints = 100000;

// Typed changes applied to a sweep file's values before it is read (`kvtune recommend` fills its
// template this way; `merge` gives the plugins resolved.json recorded). Each set
// field replaces the file's key.
struct SweepOverrides {
  std::optional<std::string> name;
  std::optional<std::string> model;                 // [workload] model
  // [workload] source = "cache", path = this (absolute): the capture replaces the synthetic
  // workload's shape and statistics tables, and the file's seeds (the capture's samples are cases).
  std::optional<std::string> cache;
  // [workload] profile; the file's own statistics tables (keys, values, queries_profile, sinks,
  // recency, overrides) are dropped so that the profile's apply.
  std::optional<std::string> profile;
  std::optional<int64_t> tokens;                    // [workload] tokens
  std::optional<int64_t> queries;                   // [workload] queries (per query head)
  std::optional<std::vector<int64_t>> layers;       // [workload] layers
  std::optional<std::vector<int64_t>> exempt_layers;  // [search] exempt_layers (empty: none)
  std::optional<std::vector<BudgetTerm>> terms;     // [budget] error terms
  std::optional<MemoryFit> fit;                     // [budget] fit
  std::optional<int64_t> serve_ctx;                 // serve_ctx
  std::optional<double> confidence;                 // [budget] confidence; 0 removes it (estimates judged)
  std::optional<std::vector<RuntimeTarget>> runtimes;
  std::optional<std::vector<std::string>> plugins;  // absolute paths
};

// Reads and fully validates a sweep file: every candidate spec resolves, every point fits the
// workload's shape, every runtime and version exists. Errors are InputErrors naming
// file:line:column (or the key) and what was expected.
// The file's `plugins = [...]` (a relative path taken from the file's folder) are loaded through
// context.with_plugins before any candidate is validated.
SweepSpec parse_sweep(std::string_view text, const std::string& source_name, const SweepContext& context,
                      const SweepOverrides& overrides = {});
SweepSpec load_sweep(const std::string& path, const SweepContext& context);

const char* pairing_name(Pairing pairing);
const char* objective_name(Objective objective);

}  // namespace kvtune
