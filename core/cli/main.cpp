// kvtune: KV-cache quantization simulator and autotuner. Exit status: 0 success, 2 bad input
// (the message names the file, key or value), 1 internal error.
#include <iostream>
#include <map>

#include "commands.h"
#include "plugins.h"
#include "kvtune/error.h"
#include "kvtune/version.h"

int main(int argc, char** argv) {
  CLI::App app{"kvtune " KVTUNE_VERSION " - KV-cache quantization simulator and autotuner"};
  app.require_subcommand(1);
  app.set_version_flag("--version", KVTUNE_VERSION);
  std::map<CLI::App*, kvtune::cli::Runner> runners;
  auto add = [&](kvtune::cli::Runner (*make)(CLI::App&), const char* name, const char* help) {
    CLI::App* sub = app.add_subcommand(name, help);
    runners[sub] = make(*sub);
    kvtune::cli::add_plugin_option(*sub);
  };
  add(kvtune::cli::add_sweep, "sweep", "search K/V schemes against a budget; the frontier, the best and each runtime's flags");
  add(kvtune::cli::add_recommend, "recommend", "the common question as a sweep: a model, a context, a budget, runtimes");
  add(kvtune::cli::add_merge, "merge", "combine the results of a sharded sweep and report on them");
  add(kvtune::cli::add_simulate, "simulate", "attention over quantized K/V caches, synthetic or from .npy tensors");
  add(kvtune::cli::add_quantize, "quantize", "round-trip a tensor through a scheme, optionally writing packed bytes");
  add(kvtune::cli::add_schemes, "schemes", "list every scheme family with its parameters and their domains");
  add(kvtune::cli::add_check_plugin, "check-plugin", "run the conformance checks on every scheme of a plugin");
  add(kvtune::cli::add_memory, "memory", "KV-cache bytes per token and per sequence, and how many sequences fit a GPU");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return 2;
  }
  try {
    for (CLI::App* sub : app.get_subcommands()) return runners.at(sub)();
  } catch (const kvtune::InputError& e) {
    std::cerr << "kvtune: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "kvtune: internal error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
