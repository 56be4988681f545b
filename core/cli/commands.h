// The kvtune subcommands. Each registers its options on the CLI11 app and returns a runner; the
// core library below knows nothing of the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>
#include <string>

namespace kvtune::cli {

using Runner = std::function<int()>;

// The number a value spells, when all of it is one.
inline std::optional<double> number_in(const std::string& v) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  return end != v.c_str() && *end == '\0' ? std::optional(x) : std::nullopt;
}

// A finite number above zero. (CLI::PositiveNumber spells its range with DBL_MAX in full, about 300
// digits, and lets NaN through.)
inline const CLI::Validator kPositive(
    [](std::string& v) {
      const std::optional<double> x = number_in(v);
      return x && std::isfinite(*x) && *x > 0 ? std::string() : "'" + v + "' is not a finite number > 0";
    },
    "POSITIVE", "POSITIVE");

// A floating-point value that is a number must be finite (NaN passes every CLI::Range, since no
// comparison with it holds); what is not a number at all is left to CLI11's conversion message.
inline const CLI::Validator kFinite(
    [](std::string& v) {
      const std::optional<double> x = number_in(v);
      return x && !std::isfinite(*x) ? "'" + v + "' is not a finite number" : std::string();
    },
    "", "FINITE");

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
