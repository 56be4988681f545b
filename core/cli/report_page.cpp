// kvtune report DIR [--out FILE.html]

#include "report_page.h"

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/model_preset.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_dir.h"
#include "kvtune/layer_exemption.h"
#include "sweep_support.h"

namespace kvtune::cli {
namespace fs = std::filesystem;

std::vector<ChartScript> find_chart_scripts() {
  std::vector<fs::path> candidates;
  if (const fs::path exe = executable_dir(); !exe.empty()) {
    candidates.push_back((exe / ".." / "share" / "kvtune" / "web" / "node_modules").lexically_normal());
  }
  candidates.push_back((fs::path(KVTUNE_SOURCE_DIR) / "web" / "node_modules").lexically_normal());
  std::string tried;
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::is_regular_file(dir / "vega-embed" / "build" / "vega-embed.min.js", ec)) return load_chart_scripts(dir);
    tried += (tried.empty() ? "" : ", ") + dir.string();
  }
  throw InputError("report.html: cannot find the chart scripts (vega, vega-lite, vega-embed); looked in " + tried +
                   "; scripts/setup installs them with npm (web/package-lock.json)");
}

std::optional<std::vector<ChartScript>> page_scripts(bool html) {
  return html ? std::optional(find_chart_scripts()) : std::nullopt;
}

namespace {

struct ReportOptions {
  std::string dir;
  std::string out;  // default: DIR/report.html
};

int report_page(const ReportOptions& o) {
  // Everything is read and checked before anything is written.
  const std::vector<ChartScript> scripts = find_chart_scripts();
  const MergedSweep sweep = load_sweep_results({o.dir}, sweep_context());
  const std::vector<SweepRecord> records = with_layer_exemptions(sweep.spec, sweep.records);
  const SweepAnalysis analysis = analyze_sweep(sweep.spec, records);
  const std::string out = o.out.empty() ? (fs::path(o.dir) / "report.html").string() : o.out;
  std::vector<std::string> inputs;  // the sweep directory's files, which report.html must not replace
  for (const char* name : kSweepDirFiles) inputs.push_back((fs::path(o.dir) / name).string());
  require_not_an_input(out, inputs, "--out");
  // The page is HTML: another extension is a slip that would replace some other file (a sweep file).
  if (fs::path(out).extension() != ".html") throw InputError("--out " + out + ": a report page ends in .html");
  write_sweep_html(out, sweep.spec, records, analysis, scripts);
  std::cout << "written: " << out << " (charts also as Vega-Lite JSON in "
            << (fs::path(out).parent_path() / (fs::path(out).stem().string() + "-charts")).string() << "/)\n";
  return 0;
}

}  // namespace

Runner add_report(CLI::App& app) {
  auto o = std::make_shared<ReportOptions>();
  app.add_option("dir", o->dir, "a sweep's output directory (kvtune sweep --out, or kvtune merge --out)")->required();
  app.add_option("--out", o->out, "the page to write (default: DIR/report.html)");
  return [o] { return report_page(*o); };
}

}  // namespace kvtune::cli
