// kvtune sweep [FILE.toml] [--out DIR] [--resume] [--shard I/N] [--jobs N] [--json]
// kvtune merge DIR... [--out DIR] [--json]
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "builtin.h"
#include "backends.h"
#include "commands.h"
#include "embedded_scenarios.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_report.h"
#include "plugins.h"
#include "sweep_support.h"

namespace kvtune::cli {
namespace {

namespace fs = std::filesystem;

struct SweepOptions {
  std::string file;
  std::string out = "kvtune-out";
  bool resume = false;
  std::string shard;  // "I/N"
  int jobs = 0;
  bool json = false;
};

// "I/N" with 0 <= I < N.
std::pair<int64_t, int64_t> parse_shard(const std::string& text) {
  const size_t slash = text.find('/');
  try {
    size_t a = 0, b = 0;
    if (slash == std::string::npos) throw std::invalid_argument(text);
    const int64_t i = std::stoll(text.substr(0, slash), &a), n = std::stoll(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1 || n < 1 || i < 0 || i >= n) throw std::invalid_argument(text);
    return {i, n};
  } catch (const std::logic_error&) {
    throw InputError("--shard '" + text + "': expected I/N with 0 <= I < N, e.g. 0/4");
  }
}

std::string read_text(const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

int sweep(const SweepOptions& o) {
  const LoadedSweep loaded = o.file.empty() ? load_sweep_with_plugins(kDefaultSweep, kDefaultSweepName)
                                            : load_sweep_with_plugins(read_text(o.file), o.file);
  const SweepSpec& spec = loaded.spec;
  const auto [shard, shards] = o.shard.empty() ? std::pair<int64_t, int64_t>{0, 1} : parse_shard(o.shard);
  SweepRunOptions run;
  run.out_dir = o.out;
  run.resume = o.resume;
  run.shard = shard;
  run.shards = shards;
  run.threads = o.jobs;
  run.backend = make_backend(spec.scenario.backend, spec.source);
  if (::isatty(STDERR_FILENO)) {
    run.progress = [](size_t done, size_t total) {
      std::cerr << "\rkvtune sweep: " << done << "/" << total << " points" << (done == total ? "\n" : "") << std::flush;
    };
  }
  const std::vector<SweepRecord> records = run_and_record(spec, *loaded.registry, run);
  if (shards > 1) {
    std::cerr << "kvtune sweep: shard " << shard << "/" << shards << " done (" << records.size() << " points in "
              << o.out << "/results.jsonl); combine the shards with: kvtune merge DIR...\n";
    return 0;
  }
  report(spec, *loaded.registry, records, o.out, o.json);
  return 0;
}

struct MergeOptions {
  std::vector<std::string> dirs;
  std::string out = "kvtune-merged";
  bool json = false;
};

// The plugins a sweep loaded, as resolved.json records them (absolute paths: the sweep.toml beside
// it may name them relative to a folder it no longer sits in).
std::vector<std::string> recorded_plugins(const std::string& dir) {
  const std::string path = (fs::path(dir) / "resolved.json").string();
  try {
    const nlohmann::json resolved = nlohmann::json::parse(read_text(path));
    return resolved.value("plugins", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not the resolved.json kvtune sweep writes (" + e.what() + ")");
  }
}

int merge(const MergeOptions& o) {
  const std::string spec_path = (fs::path(o.dirs.front()) / kSweepSpecFile).string();
  const Registry registry = command_registry_with(recorded_plugins(o.dirs.front()));
  const SweepSpec spec = parse_sweep(read_text(spec_path), spec_path, sweep_context(registry));
  std::vector<SweepRecord> merged = merge_records(o.dirs);
  if (!merged.empty() && merged.front().spec_hash != spec.hash) {
    throw InputError(spec_path + ": this sweep's workload is not the one its results were computed for (spec hash " +
                     "differs); merge the shards of one sweep");
  }
  // Every point of the spec needs a record: a missing shard is an error, not a smaller sweep.
  std::map<std::pair<std::string, std::string>, size_t> at;
  for (size_t i = 0; i < merged.size(); ++i) at.emplace(std::make_pair(merged[i].k, merged[i].v), i);
  std::vector<SweepRecord> records;
  std::vector<std::string> missing;
  for (const SweepPoint& p : spec.points) {
    const auto it = at.find({p.k, p.v});
    if (it == at.end()) {
      missing.push_back(p.k + " / " + p.v);
    } else {
      records.push_back(merged[it->second]);
    }
  }
  if (!missing.empty()) {
    throw InputError("merge: " + std::to_string(missing.size()) + " of " + std::to_string(spec.points.size()) +
                     " points have no record in the given directories (a missing shard?), e.g. " + missing.front());
  }
  prepare_out_dir(o.out, spec);
  std::string lines;
  for (const SweepRecord& r : records) lines += record_to_json_line(r);
  write_file_atomic((fs::path(o.out) / "results.jsonl").string(), std::as_bytes(std::span(lines.data(), lines.size())));
  report(spec, registry, records, o.out, o.json);
  return 0;
}

}  // namespace

Runner add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  app.add_option("file", o->file, "sweep TOML (default: the embedded sweeps/default.toml; docs/sweep-file.md)");
  app.add_option("--out", o->out, "output directory: sweep.toml, results.jsonl, summary.json, frontier.csv, report.md")
      ->capture_default_str();
  app.add_flag("--resume", o->resume, "continue the sweep in --out, skipping the points already there");
  app.add_option("--shard", o->shard, "I/N: evaluate only points i with i mod N = I (then kvtune merge)");
  app.add_option("--jobs", o->jobs, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  return [o] { return sweep(*o); };
}

Runner add_merge(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  app.add_option("dirs", o->dirs, "the --out directories of the shards")->required();
  app.add_option("--out", o->out, "where the merged results and reports go")->capture_default_str();
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  return [o] { return merge(*o); };
}

}  // namespace kvtune::cli
