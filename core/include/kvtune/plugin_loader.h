// Loading out-of-tree scheme plugins (DESIGN §3, docs/plugin-guide.md). A plugin is a shared
// library exporting the C entry point of kvtune/plugin_abi.h; each family it describes is added
// to a Registry as a FamilyInfo whose schemes are kvtune::Scheme adapters over the plugin's C
// vtable, so nothing downstream can tell them from built-ins. Plugins are never unloaded.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/isolation.h"
#include "kvtune/plugin_abi.h"
#include "kvtune/registry.h"

namespace kvtune {

// What a loaded plugin said about itself.
struct PluginInfo {
  std::string path;  // absolute; the origin of each of its families
  std::string name;
  std::string version;
  uint32_t abi_major = 0;
  uint32_t abi_minor = 0;
  std::vector<std::string> families;  // in the plugin's order
};

// Loads the plugin at `path` and adds its families to `registry`, all or none. Throws InputError,
// naming the path, when the file is missing, is not a shared library, has no entry point, was
// built for another ABI major (both versions named), has malformed tables, or declares a family
// whose name is taken (both origins named). `origin` says where the plugin was named
// ("--plugin", "KVTUNE_PLUGIN_PATH", "a sweep file's plugins"; empty: unknown): refusals start
// with "ORIGIN: ", and its schemes' traits().plugin_origin is "ORIGIN PATH", for messages.
PluginInfo load_plugin(Registry& registry, const std::string& path, const std::string& origin = "");

// The check load_plugin makes of one family table a plugin's describe() returned (its struct
// sizes, name, parameter domains), as the FamilyInfo the registry takes; InputError naming `path`
// and the family's index. Public for the fuzz target of the tables (fuzz/fuzz_plugin_tables.cpp).
FamilyInfo plugin_family(const kvtune_family* table, const std::string& path, size_t index, const std::string& origin);

// load_plugin for each path, in order.
std::vector<PluginInfo> load_plugins(Registry& registry, const std::vector<std::string>& paths,
                                     const std::string& origin = "");

// load_plugin into a copy of `registry` in a child process (isolation.h), so that a plugin whose
// dlopen or describe crashes, exits or hangs cannot take the caller down. nullopt when it loads;
// the reason (naming the path, `origin` and the signal, status or time limit) when its child died;
// the same InputError load_plugin would throw when it refuses the plugin.
std::optional<std::string> probe_plugin(const Registry& registry, const std::string& path, const std::string& origin,
                                        const IsolationOptions& options = {30.0});

// The plugins named by a KVTUNE_PLUGIN_PATH value: colon-separated directories, each contributing
// its *.so files in sorted order. Empty entries are skipped; a directory that does not exist is an
// InputError naming it.
std::vector<std::string> plugin_path_entries(std::string_view value);

// plugin_path_entries of the KVTUNE_PLUGIN_PATH environment variable (none when it is unset).
std::vector<std::string> plugins_from_environment();

// A copy of `base` with the plugins at `paths` loaded into it.
Registry registry_with_plugins(const Registry& base, const std::vector<std::string>& paths,
                               const std::string& origin = "");

}  // namespace kvtune
