// report.html on the command line: where the chart scripts are (an install's share/kvtune, or the
// source tree's web/node_modules that scripts/setup fills with npm), and `kvtune report DIR`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kvtune/sweep_html.h"

namespace kvtune::cli {

// The chart scripts from the first place that has them; InputError listing where it looked
// (scripts/setup installs them) when none does.
std::vector<ChartScript> find_chart_scripts();

// The --report flag of sweep, merge and recommend.
inline constexpr const char* kReportFlagHelp =
    "also write report.html (charts, every point, the runtimes' flags; docs/report.md)";

// find_chart_scripts() when `html` (a command's --report), found before any work starts.
std::optional<std::vector<ChartScript>> page_scripts(bool html);

}  // namespace kvtune::cli
