// The kvtune subcommands. Each registers its options on the CLI11 app and returns a runner; the
// core library below knows nothing of the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace kvtune::cli {

using Runner = std::function<int()>;

// A finite number above zero. (CLI::PositiveNumber spells its range with DBL_MAX in full, about 300
// digits, and lets NaN through.)
inline const CLI::Validator kPositive(
    [](std::string& v) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      const bool number = end != v.c_str() && *end == '\0';
      return number && std::isfinite(x) && x > 0 ? std::string() : "'" + v + "' is not a finite number > 0";
    },
    "POSITIVE", "POSITIVE");

Runner add_simulate(CLI::App& app);
Runner add_quantize(CLI::App& app);
Runner add_schemes(CLI::App& app);
Runner add_memory(CLI::App& app);
Runner add_sweep(CLI::App& app);
Runner add_merge(CLI::App& app);
Runner add_report(CLI::App& app);
Runner add_recommend(CLI::App& app);
Runner add_check_plugin(CLI::App& app);
Runner add_calibrate(CLI::App& app);
Runner add_profile(CLI::App& app);

}  // namespace kvtune::cli
