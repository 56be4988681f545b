// Running a sweep: the points of one shard are evaluated in batches (each batch one separable
// evaluation over the points' own schemes, so each K and V configuration of a batch is quantized
// once per case) and each point's record is appended to results.jsonl as one JSON line, flushed,
// as soon as its batch is done. An interrupted sweep resumes: records already in the file are kept
// and their points skipped, after checking that the file was written by the same spec (its hash).
// The output directory (sweep_dir.h) is locked for the run and left untouched by a refused one.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kvtune/metrics.h"
#include "kvtune/sweep.h"

namespace kvtune {

// The metrics of the cases of one sampled layer.
struct LayerSummary {
  int64_t layer = 0;  // the model layer
  std::array<Summary, kMetricCount> metrics{};  // count 0: no samples (or not attributable to layers)
};

// The metrics of the cases of one sampled KV head (every sampled layer's head of that index).
struct HeadSummary {
  int64_t kv_head = 0;
  std::array<Summary, kMetricCount> metrics{};
};

// needle_hit over the needles planted at one depth (a fraction of the context): Wilson interval.
struct DepthSummary {
  double depth = 0.0;
  Summary needle_hit;
};

// One evaluated point, as one line of results.jsonl; or a point derived from two evaluated ones
// with some layers exempt from quantization (layer_exemption.h), which is never written there.
struct SweepRecord {
  std::string k, v, origin;
  bool ok = true;
  std::string error;  // why the point failed (ok = false): its scheme's message
  double k_bits = 0.0, v_bits = 0.0;
  std::array<Summary, kMetricCount> metrics{};  // count 0: does not apply (needle metrics, failed point)
  // What computed the attention output: "cpu", the kernel backend's name, or "cpu (no fused kernel
  // for this pair: WHY)" in kernel mode (PairResult::backend_used).
  std::string backend = "cpu";
  // Per sampled layer, in the scenario's layer order; empty when the sweep samples one layer.
  std::vector<LayerSummary> layers;
  // Per sampled KV head, in the scenario's head order; empty when the sweep samples one head.
  std::vector<HeadSummary> heads;
  // needle_hit per needle depth, in the workload's order; empty without needles (and for records
  // written before depths were kept, which read back without them).
  std::vector<DepthSummary> needle_depths;
  // A derived record: these model layers keep `exempt` (K and V, e.g. "bf16") while every other
  // layer stores k / v. Its p95 values are bounds of the mixture, not sample quantiles.
  std::vector<int64_t> exempt_layers;
  std::string exempt;
  // "sliding_window": every sliding-window layer of the model is exempt (vLLM's attention-type
  // pattern), exempt_layers being the sampled ones; empty: exactly exempt_layers.
  std::string exempt_pattern;
  // Provenance, written on every line.
  uint64_t spec_hash = 0;
  std::string kvtune_version, git_commit, host, time;  // time: UTC ISO 8601
  int64_t shard = 0, shards = 1;

  double bits() const { return (k_bits + v_bits) / 2.0; }
  bool derived() const { return !exempt_layers.empty(); }
  const Summary& metric(Metric m) const { return metrics[static_cast<size_t>(m)]; }
};

struct SweepRunOptions {
  std::string out_dir;     // results.jsonl goes here (created if missing)
  bool resume = false;     // keep an existing results.jsonl and skip its points
  int64_t shard = 0;       // this shard's index...
  int64_t shards = 1;      // ...of this many: point i belongs to shard i % shards
  int threads = 0;         // evaluation threads (0 = all cores)
  EvalBackendPtr backend;  // the evaluator backend (null: the CPU)
  size_t batch_points = 64;  // points per separable evaluation (and per flush)
  // Points done (fractional inside a batch) of the shard's total: after each batch and, during one,
  // each time a case's K or V configuration is evaluated — then from the evaluation threads, so it
  // must be safe to call concurrently. May be empty.
  std::function<void(double done, size_t total)> progress;
  const std::atomic<bool>* cancel = nullptr;  // set (e.g. by SIGINT): stop after the running batch
};

// Thrown by run_sweep when options.cancel was set: what is in results.jsonl stays there.
struct SweepInterrupted : std::runtime_error {
  SweepInterrupted(size_t written_records, size_t shard_points, std::string results_path)
      : std::runtime_error("sweep interrupted"),
        written(written_records),
        total(shard_points),
        path(std::move(results_path)) {}
  size_t written, total;  // records in the file, points of the shard
  std::string path;       // results.jsonl
};

// Evaluates this shard's points and returns every record of the shard (resumed ones included), in
// point order. Locks out_dir, then throws InputError when it cannot be written, is locked by another
// run, when results.jsonl exists without --resume, or when it belongs to another spec, shard or
// build (kvtune version and git commit); only then writes sweep.toml and resolved.json. A point
// whose scheme fails at run time (an InputError, a plugin's crash) becomes a record with ok = false
// and the sweep goes on; any other exception is a bug and ends the sweep.
std::vector<SweepRecord> run_sweep(const SweepSpec& spec, const SweepRunOptions& options);

// results.jsonl <-> records. read_records names file:line for a malformed line.
std::string record_to_json_line(const SweepRecord& record);
std::vector<SweepRecord> read_records(const std::string& path);

// Merges the results.jsonl of several shard directories: all must carry the same spec hash, come
// from the same build (version and commit) and the same shard count; a point present twice keeps
// its first record when both agree and is refused when they differ. Records come in directory
// order, then file order.
std::vector<SweepRecord> merge_records(const std::vector<std::string>& dirs);

// Whether two records of one point hold the same result (provenance aside).
bool same_result(const SweepRecord& a, const SweepRecord& b);

}  // namespace kvtune
