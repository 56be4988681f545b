// kvtune check-plugin PATH: the in-tree conformance checks on every scheme of a plugin, one
// PASS/FAIL line per check; exit status 0 when all pass, 1 when one fails, 2 when it cannot load.
#include <iostream>

#include "commands.h"
#include "kvtune/conformance.h"
#include "plugins.h"

namespace kvtune::cli {

Runner add_check_plugin(CLI::App& app) {
  auto path = std::make_shared<std::string>();
  app.add_option("path", *path, "the plugin (shared library)")->required();
  return [path] { return conformance::check_plugin(*path, command_registry(), std::cout); };
}

}  // namespace kvtune::cli
