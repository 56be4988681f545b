// The kvtune subcommands. Each registers its options on the CLI11 app and returns a runner; the
// core library below knows nothing of the command line.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kvtune::cli {

using Runner = std::function<int()>;

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
