// kvtune check-plugin PATH: the in-tree conformance checks on every scheme of a plugin, one
// PASS/SKIP/FAIL line per check, each check in a child process (a crash fails that check only);
// exit status 0 when none fails, 1 when one fails, 2 when it cannot load.
#include <iostream>

#include "commands.h"
#include "kvtune/conformance.h"
#include "plugins.h"

namespace kvtune::cli {

Runner add_check_plugin(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  auto options = std::make_shared<conformance::CheckPluginOptions>();
  app.add_option("path", *path, "the plugin (shared library)")->required();
  app.add_option("--timeout", options->timeout_seconds,
                 "seconds each check (and the plugin's describe) may run in its child process before it "
                 "fails as timed out")
      ->default_val(options->timeout_seconds)
      ->check(kPositive);
  return [path, options] { return conformance::check_plugin(*path, command_registry(), std::cout, *options); };
}

}  // namespace kvtune::cli
