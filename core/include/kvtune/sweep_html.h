// report.html: one self-contained page for a sweep's results. The charts are Vega-Lite
// specifications with their data embedded, drawn in the page by vega-embed; the JavaScript of vega,
// vega-lite and vega-embed is inlined (with its licence), so the page opens without a network. The
// specifications are written beside the page too, for notebooks (Altair, Observable, vega-embed).
// Everything but the file writing is a pure function of the spec, the records and the analysis.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "kvtune/sweep.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_run.h"

namespace kvtune {

// One Vega-Lite chart of the page.
struct ChartSpec {
  std::string name;   // "pareto": the page's element id (chart-NAME) and the file NAME.vl.json
  std::string title;  // the section heading
  std::string about;  // one sentence under the heading: what is drawn and how to read it
  std::string vega_lite;  // the specification, JSON with its data inline
};

// The charts a sweep's results support, in page order: pareto (always), needles (records with
// needle depths), layers and heads (more than one sampled), kv_split, memory (a model preset).
std::vector<ChartSpec> sweep_charts(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                    const SweepAnalysis& analysis);

// One JavaScript library inlined into the page.
struct ChartScript {
  std::string package;   // npm name: "vega"
  std::string version;   // as its package.json says
  std::string license;   // SPDX id
  std::string license_text;
  std::string code;      // the UMD build (a browser global)
};

// The packages the page needs, in load order (vega-lite and vega-embed use the vega global).
inline constexpr const char* kChartPackages[] = {"vega", "vega-lite", "vega-embed"};

// Reads the chart scripts from an npm node_modules folder (or a copy of its layout):
// DIR/PACKAGE/package.json, DIR/PACKAGE/LICENSE and DIR/PACKAGE/build/PACKAGE.min.js for each of
// kChartPackages. InputError naming the missing file.
std::vector<ChartScript> load_chart_scripts(const std::filesystem::path& node_modules);

// The page: the header (workload, budget), the charts, the sortable table of every point and the
// report's text (best configuration, runtimes with their settings as copyable blocks, notes).
std::string sweep_report_html(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                              const SweepAnalysis& analysis, const std::vector<ChartScript>& scripts);

// Writes the page to `html_path` and each chart to STEM-charts/NAME.vl.json beside it (STEM: the
// page's name without .html), each file atomically. InputError naming a path that cannot be written.
void write_sweep_html(const std::string& html_path, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                      const SweepAnalysis& analysis, const std::vector<ChartScript>& scripts);

}  // namespace kvtune
