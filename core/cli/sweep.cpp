// kvtune sweep [FILE.toml] [--out DIR] [--resume] [--shard I/N|auto[/N]] [--jobs N] [--json] [--report]
// kvtune merge DIR... [--out DIR] [--json] [--report]

#include <cstdlib>
#include <iostream>
#include <optional>

#include "backends.h"
#include "commands.h"
#include "embedded_scenarios.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/sweep_dir.h"
#include "report_page.h"
#include "shard_option.h"
#include "sweep_support.h"

namespace kvtune::cli {
namespace {

struct SweepOptions {
  std::string file;
  std::string out = "kvtune-out";
  bool resume = false;
  std::string shard;  // "I/N", "auto" or "auto/N" (shard_option.h)
  int jobs = 0;
  bool json = false;
  bool html = false;
};

std::string read_text(const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// The command that continues an interrupted run, for the user to paste.
std::string resume_command(const SweepOptions& o) {
  std::string cmd = "kvtune sweep";
  if (!o.file.empty()) cmd += " " + o.file;
  cmd += " --out " + o.out + " --resume";
  if (!o.shard.empty()) cmd += " --shard " + o.shard;
  return cmd;
}

int sweep(const SweepOptions& o) {
  const std::optional<std::vector<ChartScript>> scripts = page_scripts(o.html);
  check_report_outputs(o.out, o.html);
  const auto [shard, shards] = o.shard.empty() ? Shard{} : resolve_shard(o.shard, [](const char* name) {
    return std::getenv(name);
  });
  // A sharded run under a batch scheduler has no terminal: it logs a progress line now and then.
  ProgressLine progress(shards > 1 ? "kvtune sweep shard " + std::to_string(shard) + "/" + std::to_string(shards)
                                   : std::string("kvtune sweep"),
                        ProgressLine::mode_for_stderr(shards > 1));
  const SweepContext context = sweep_context(&progress);
  const SweepSpec spec = o.file.empty() ? parse_sweep(kDefaultSweep, kDefaultSweepName, context)
                                        : parse_sweep(read_text(o.file), o.file, context);
  SweepRunOptions run;
  run.out_dir = o.out;
  run.resume = o.resume;
  run.shard = shard;
  run.shards = shards;
  run.threads = o.jobs;
  run.backend = make_backend(spec.scenario.backend, spec.source);
  const std::optional<std::vector<SweepRecord>> records = run_interruptible(spec, run, resume_command(o), progress);
  if (!records) return kInterruptedStatus;
  if (shards > 1) {
    std::cerr << "kvtune sweep: shard " << shard << "/" << shards << " done (" << records->size() << " points in "
              << o.out << "/results.jsonl); combine the shards with: kvtune merge DIR..."
              << (o.html ? " --report (a shard alone has no report.html)" : "") << "\n";
    return 0;
  }
  report(spec, *records, o.out, o.json, scripts);
  return 0;
}

struct MergeOptions {
  std::vector<std::string> dirs;
  std::string out = "kvtune-merged";
  bool json = false;
  bool html = false;
};

int merge(const MergeOptions& o) {
  const std::optional<std::vector<ChartScript>> scripts = page_scripts(o.html);
  check_report_outputs(o.out, o.html);
  const MergedSweep merged = merge_sweep(o.dirs, o.out, sweep_context());
  report(merged.spec, merged.records, o.out, o.json, scripts);
  return 0;
}

}  // namespace

Runner add_sweep(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  app.add_option("file", o->file, "sweep TOML (default: the embedded sweeps/default.toml; docs/sweep-file.md)");
  app.add_option("--out", o->out, "output directory: sweep.toml, results.jsonl, summary.json, frontier.csv, report.md")
      ->capture_default_str();
  app.add_flag("--resume", o->resume, "continue the sweep in --out, skipping the points already there");
  app.add_option("--shard", o->shard,
                 "I/N: evaluate only points i with i mod N = I (then kvtune merge); auto[/N]: I and N from a Slurm "
                 "job array or a Kubernetes Indexed Job");
  app.add_option("--jobs", o->jobs, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  app.add_flag("--report", o->html, kReportFlagHelp);
  return [o] { return sweep(*o); };
}

Runner add_merge(CLI::App& app) {
  auto o = std::make_shared<MergeOptions>();
  app.add_option("dirs", o->dirs, "the --out directories of the shards")->required();
  app.add_option("--out", o->out, "where the merged results and reports go")->capture_default_str();
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  app.add_flag("--report", o->html, kReportFlagHelp);
  return [o] { return merge(*o); };
}

}  // namespace kvtune::cli
