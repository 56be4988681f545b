#include "plugins.h"

#include <memory>

#include "builtin.h"
#include "kvtune/plugin_loader.h"

namespace kvtune::cli {
namespace {

std::vector<std::string>& option_paths() {
  static std::vector<std::string> paths;
  return paths;
}

}  // namespace

void add_plugin_option(CLI::App& command) {
  command.add_option("--plugin", option_paths(), "load a scheme plugin (shared library), repeatable; "
                                                 "KVTUNE_PLUGIN_PATH adds every *.so of its directories");
}

const Registry& command_registry() {
  static const std::unique_ptr<const Registry> registry = [] {
    std::vector<std::string> paths = plugins_from_environment();
    paths.insert(paths.end(), option_paths().begin(), option_paths().end());
    return std::make_unique<const Registry>(registry_with_plugins(builtin_registry(), paths));
  }();
  return *registry;
}

Registry command_registry_with(const std::vector<std::string>& more) {
  return registry_with_plugins(command_registry(), more);
}

}  // namespace kvtune::cli
