#include "sweep_support.h"

#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/model_preset.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_report.h"
#include "plugins.h"
#include "presets.h"

namespace kvtune::cli {
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), std::as_bytes(std::span(text.data(), text.size())));
}

std::string resolved_json(const SweepSpec& spec) {
  nlohmann::json points = nlohmann::json::array();
  for (const SweepPoint& p : spec.points) points.push_back({{"k", p.k}, {"v", p.v}, {"origin", p.origin}});
  nlohmann::json runtimes = nlohmann::json::array();
  for (size_t i = 0; i < spec.runtimes.size(); ++i) {
    const RuntimeView& view = spec.runtime_views.at(i);
    runtimes.push_back({{"name", spec.runtimes[i].name},
                        {"version", view.version},
                        {"title", view.title},
                        {"beyond_checked", view.beyond_checked},
                        {"options", view.options.size()}});
  }
  const nlohmann::json j = {{"name", spec.name},
                            {"source", spec.source},
                            {"pairing", pairing_name(spec.pairing)},
                            {"objective", objective_name(spec.budget.objective)},
                            {"tokens", spec.scenario.contexts.front()},
                            {"k_candidates", spec.k_candidates},
                            {"v_candidates", spec.v_candidates},
                            {"points", std::move(points)},
                            {"runtimes", std::move(runtimes)},
                            {"plugins", spec.plugins},
                            {"notes", spec.notes}};
  return j.dump(2) + "\n";
}

}  // namespace

SweepContext sweep_context(const Registry& registry) {
  SweepContext c;
  c.registry = &registry;
  c.models = resolve_model_preset;
  const fs::path configs = find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR));
  c.runtime_tables = load_runtime_tables(configs, registry);
  return c;
}

LoadedSweep load_sweep_with_plugins(std::string_view text, const std::string& source_name) {
  LoadedSweep loaded;
  loaded.registry = std::make_unique<Registry>(command_registry_with(sweep_plugin_paths(text, source_name)));
  loaded.spec = parse_sweep(text, source_name, sweep_context(*loaded.registry));
  return loaded;
}

void prepare_out_dir(const std::string& out, const SweepSpec& spec) {
  std::error_code ec;
  fs::create_directories(out, ec);
  if (ec || !fs::is_directory(out)) throw InputError(out + ": cannot create the output directory (" + ec.message() + ")");
  write_text(fs::path(out) / kSweepSpecFile, spec.text);
  write_text(fs::path(out) / "resolved.json", resolved_json(spec));
}

std::vector<SweepRecord> run_and_record(const SweepSpec& spec, const Registry& registry, const SweepRunOptions& options) {
  prepare_out_dir(options.out_dir, spec);
  return run_sweep(spec, registry, options);
}

void report(const SweepSpec& spec, const Registry& registry, const std::vector<SweepRecord>& records,
            const std::string& out, bool json) {
  const SweepAnalysis analysis = analyze_sweep(spec, records, registry);
  write_sweep_report(out, spec, records, analysis);
  if (json) {
    std::cout << sweep_summary_json(spec, records, analysis);
  } else {
    print_sweep_summary(std::cout, spec, records, analysis);
    std::cout << "\nwritten to " << out << "/: sweep.toml resolved.json results.jsonl summary.json frontier.csv report.md\n";
  }
}

}  // namespace kvtune::cli
