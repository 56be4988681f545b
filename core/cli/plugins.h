// The registry every command uses: the built-ins, then the plugins of KVTUNE_PLUGIN_PATH, then
// those given with --plugin (repeatable, on every command), loaded once per process.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "kvtune/registry.h"

namespace kvtune::cli {

// Adds --plugin PATH to a command; the paths go to a process-wide list.
void add_plugin_option(CLI::App& command);

// The built-ins plus the plugins above, built on first use (InputError for a plugin it refuses).
const Registry& command_registry();

// command_registry() plus more plugins (a sweep file's `plugins = [...]`).
Registry command_registry_with(const std::vector<std::string>& more);

}  // namespace kvtune::cli
