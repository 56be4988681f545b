// Built-in scheme families. Each folder under plugins/ defines one register_<name>_family,
// written against the public scheme interface only; builtin_families.cmake lists them.
#pragma once

#include "kvtune/plugin_loader.h"
#include "kvtune/registry.h"

#define KVTUNE_STRINGIFY2(x) #x
#define KVTUNE_STRINGIFY(x) KVTUNE_STRINGIFY2(x)
// Where a built-in family was registered, so a duplicate-name error names both origins.
#define KVTUNE_BUILTIN_ORIGIN ("builtin (" __FILE__ ":" KVTUNE_STRINGIFY(__LINE__) ")")

namespace kvtune {

// Adds every built-in family to `registry`.
void register_builtin_families(Registry& registry);

// A process-wide registry holding the built-ins (built once, thread-safe).
const Registry& builtin_registry();

// The built-ins plus the plugins at `paths` (kvtune/plugin_loader.h), loaded in order.
Registry registry_with_plugins(const std::vector<std::string>& paths);

}  // namespace kvtune
