#include "sweep_support.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <iostream>

#include "kvtune/error.h"
#include "kvtune/layer_exemption.h"
#include "kvtune/model_preset.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep_dir.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_report.h"
#include "plugins.h"
#include "presets.h"

namespace kvtune::cli {
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};

extern "C" void on_sigint(int) {
  g_interrupted.store(true);
  static const char msg[] =
      "\nkvtune: stopping after the running batch (its records are kept); Ctrl-C again stops at once\n";
  [[maybe_unused]] const ssize_t n = ::write(STDERR_FILENO, msg, sizeof msg - 1);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process
}

// SIGINT sets g_interrupted while the guard lives.
class InterruptGuard {
 public:
  InterruptGuard() : previous_(std::signal(SIGINT, on_sigint)) { g_interrupted.store(false); }
  ~InterruptGuard() { std::signal(SIGINT, previous_); }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  void (*previous_)(int);
};

}  // namespace

SweepContext sweep_context(ProgressLine* progress) {
  const Registry& registry = command_registry();
  SweepContext c;
  c.registry = &registry;
  c.with_plugins = [](const std::vector<std::string>& plugins) {
    return std::make_shared<const Registry>(command_registry_with(plugins));
  };
  c.models = resolve_model_preset;
  c.profiles = resolve_model_profile;
  c.runtime_tables = command_runtime_tables(registry);
  if (progress != nullptr) {
    c.progress = [progress](std::string_view stage, size_t done, size_t total) {
      progress->update("expanding " + std::string(stage), double(done), double(total), "");
    };
  }
  return c;
}

std::optional<std::vector<SweepRecord>> run_interruptible(const SweepSpec& spec, SweepRunOptions run,
                                                          const std::string& resume_command, ProgressLine& progress) {
  const InterruptGuard guard;
  run.cancel = &g_interrupted;
  run.progress = [&progress](double done, size_t total) { progress.update("evaluating", done, double(total), "points"); };
  try {
    std::vector<SweepRecord> records = run_sweep(spec, run);
    progress.stop();
    return records;
  } catch (const SweepInterrupted& e) {
    progress.stop();
    std::cerr << "kvtune: interrupted; " << e.written << " of " << e.total << " points are in " << e.path
              << "\n  continue with: " << resume_command << "\n";
    return std::nullopt;
  }
}

void check_report_outputs(const std::string& out, bool html) {
  std::error_code ec;
  std::vector<std::string> files(kSweepDirFiles.begin(), kSweepDirFiles.end());
  if (html) files.push_back("report.html");
  // kvtune replaces its own report files (an earlier or interrupted run, a merge: the directory holds
  // the sweep's spec or results), never a file of the user's that happens to have one's name.
  const bool ours = fs::exists(fs::path(out) / kSweepSpecFile, ec) || fs::exists(fs::path(out) / kResultsFile, ec);
  for (const std::string& name : files) {
    const fs::path p = fs::path(out) / name;
    if (fs::is_directory(p, ec)) throw InputError(p.string() + ": is a directory, expected a file name");
    if (!ours && fs::exists(p, ec)) {
      throw InputError(p.string() + ": exists in a directory that is not a kvtune sweep's (no " +
                       std::string(kSweepSpecFile) + " or " + kResultsFile +
                       ") and would be replaced; give a new or empty --out");
    }
  }
  const fs::path charts = fs::path(out) / "report-charts";
  if (html && fs::exists(charts, ec) && !fs::is_directory(charts, ec)) {
    throw InputError(charts.string() + ": is not a directory, and the report's charts go there");
  }
  // Which charts a report has depends on its records, but each is a NAME.vl.json file there: one of
  // those names taken by a directory (or anything but a file) would fail the report after the sweep.
  if (html && fs::is_directory(charts, ec)) {
    for (const fs::directory_entry& e : fs::directory_iterator(charts, ec)) {
      if (e.path().filename().string().ends_with(".vl.json") && !e.is_regular_file(ec)) {
        throw InputError(e.path().string() + ": is not a file, and the report writes a chart there");
      }
    }
  }
}

void report(const SweepSpec& spec, const std::vector<SweepRecord>& evaluated, const std::string& out, bool json,
            const std::optional<std::vector<ChartScript>>& html) {
  // The evaluated records plus the layer exemptions derived from them (never written to results.jsonl).
  const std::vector<SweepRecord> records = with_layer_exemptions(spec, evaluated);
  const SweepAnalysis analysis = analyze_sweep(spec, records);
  write_sweep_report(out, spec, records, analysis);
  if (html) write_sweep_html((fs::path(out) / "report.html").string(), spec, records, analysis, *html);
  if (json) {
    std::cout << sweep_summary_json(spec, records, analysis);
  } else {
    print_sweep_summary(std::cout, spec, records, analysis);
    std::cout << "\nwritten to " << out << "/: sweep.toml resolved.json results.jsonl summary.json frontier.csv report.md"
              << (html ? " report.html report-charts/" : "") << "\n";
  }
}

}  // namespace kvtune::cli
