#include "plugins.h"

#include <iostream>
#include <memory>

#include "builtin.h"
#include "kvtune/error.h"
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

Registry registry_with_probed_plugins(const Registry& base, const std::vector<std::string>& paths,
                                      const std::string& origin, bool skip_crashing, std::ostream& warnings) {
  Registry registry = base;
  for (const std::string& path : paths) {
    // Loaded in a child first: a plugin whose dlopen or describe crashes fails there, not here.
    if (const std::optional<std::string> crashed = probe_plugin(registry, path, origin)) {
      if (!skip_crashing) throw PluginFault(*crashed);
      warnings << "kvtune: warning: skipping " << *crashed << "\n" << std::flush;
      continue;
    }
    load_plugin(registry, path, origin);
  }
  return registry;
}

const Registry& command_registry() {
  static const std::unique_ptr<const Registry> registry = [] {
    // A plugin installed in KVTUNE_PLUGIN_PATH is loaded by every command, also those that use
    // none of its schemes, so one that crashes is skipped with a warning; one named with --plugin
    // is wanted by this command, so its crash is an error (exit status 2).
    const Registry with_environment = registry_with_probed_plugins(
        builtin_registry(), plugins_from_environment(), kOriginEnvironment, true, std::cerr);
    return std::make_unique<const Registry>(
        registry_with_probed_plugins(with_environment, option_paths(), kOriginOption, false, std::cerr));
  }();
  return *registry;
}

Registry command_registry_with(const std::vector<std::string>& more, const std::string& origin) {
  return registry_with_probed_plugins(command_registry(), more, origin, false, std::cerr);
}

}  // namespace kvtune::cli
