// A sweep's output directory: its files (sweep.toml as given, resolved.json as expanded,
// results.jsonl as evaluated), the advisory lock a run holds on it, and merging the directories of
// a sharded sweep into one. Everything here refuses before it writes: a refused run changes nothing.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "kvtune/sweep.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

inline constexpr const char* kSweepSpecFile = "sweep.toml";
inline constexpr const char* kResolvedFile = "resolved.json";
inline constexpr const char* kResultsFile = "results.jsonl";
// Every file a sweep leaves in its directory besides report.html: its inputs and its reports
// (write_sweep_report's summary.json, frontier.csv and report.md).
inline constexpr std::array<const char*, 6> kSweepDirFiles = {kSweepSpecFile, kResolvedFile, kResultsFile,
                                                              "summary.json",  "frontier.csv", "report.md"};

// An exclusive advisory lock (flock) on the directory itself, held while the object lives: no lock
// file is left behind, and the kernel drops the lock when the process ends, so a killed run never
// leaves the directory stuck. InputError naming the directory when another run holds it.
class SweepDirLock {
 public:
  explicit SweepDirLock(const std::string& dir);
  ~SweepDirLock();
  SweepDirLock(const SweepDirLock&) = delete;
  SweepDirLock& operator=(const SweepDirLock&) = delete;

 private:
  int fd_ = -1;
};

// Creates `dir` if missing (InputError naming it when it cannot).
void create_sweep_dir(const std::string& dir);

// resolved.json: name, source, pairing, objective, tokens, candidates, points, runtimes, plugins
// (absolute paths) and notes after expansion.
std::string resolved_json(const SweepSpec& spec);

// Writes sweep.toml (the spec's text) and resolved.json into `dir`, each atomically.
void write_sweep_inputs(const std::string& dir, const SweepSpec& spec);

// The sweep a directory holds: its sweep.toml read with the plugins its resolved.json recorded
// (sweep.toml may name them relative to a folder it no longer sits in).
SweepSpec load_sweep_dir(const std::string& dir, const SweepContext& context);

struct MergedSweep {
  SweepSpec spec;                    // of the first directory
  std::vector<SweepRecord> records;  // one per point of the spec, in point order
};

// Reads the sweep the directories hold together (one directory for an unsharded sweep, or a merged
// one): refuses a directory without a sweep's files, shards of other sweeps or builds, shard counts
// that disagree, two shards with different records for one point, a half-written results.jsonl,
// and points without a record (naming how many and one of them). Writes nothing.
MergedSweep load_sweep_results(const std::vector<std::string>& dirs, const SweepContext& context);

// Merges the shard directories into `out` (load_sweep_results, then the files): refuses an `out` that is one of the inputs, shards of
// other sweeps or builds, shard counts that disagree, two shards with different records for one
// point, and points without a record (naming how many and one of them). Then writes sweep.toml,
// resolved.json and results.jsonl into `out` (locked while it writes).
MergedSweep merge_sweep(const std::vector<std::string>& dirs, const std::string& out, const SweepContext& context);

}  // namespace kvtune
