// The registry every command uses: the built-ins, then the plugins of KVTUNE_PLUGIN_PATH, then
// those given with --plugin (repeatable, on every command), loaded once per process. Each plugin
// is loaded in a child process first (probe_plugin), so a crash in its dlopen or describe cannot
// take the command down: a KVTUNE_PLUGIN_PATH plugin that crashes is skipped with a warning on
// stderr, any other is an error naming it, where it came from and the signal.
#pragma once

#include <CLI/CLI.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "kvtune/registry.h"

namespace kvtune::cli {

// Where a plugin was named, as messages say it.
inline constexpr const char* kOriginOption = "--plugin";
inline constexpr const char* kOriginEnvironment = "KVTUNE_PLUGIN_PATH";
inline constexpr const char* kOriginSweepFile = "a sweep file's plugins";

// Adds --plugin PATH to a command; the paths go to a process-wide list.
void add_plugin_option(CLI::App& command);

// The built-ins plus the plugins above, built on first use (InputError for a plugin it refuses).
const Registry& command_registry();

// command_registry() plus more plugins (a sweep file's `plugins = [...]`, or the plugins a sweep's
// resolved.json recorded).
Registry command_registry_with(const std::vector<std::string>& more, const std::string& origin = kOriginSweepFile);

// `base` plus the plugins at `paths`, each probed in a child process first. A plugin whose child
// crashed is skipped with a warning on `warnings` when `skip_crashing`, else a PluginFault.
// Refusals are the loader's InputErrors, starting with "ORIGIN: ".
Registry registry_with_probed_plugins(const Registry& base, const std::vector<std::string>& paths,
                                      const std::string& origin, bool skip_crashing, std::ostream& warnings);

}  // namespace kvtune::cli
