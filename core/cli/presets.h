// Model presets for the commands: a bare name is looked up in configs/models (found relative to
// the executable, see config_dir_candidates), a path names a preset file of the user's own.
#pragma once

#include <filesystem>
#include <string>

#include "kvtune/model_preset.h"
#include "kvtune/registry.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep.h"

namespace kvtune::cli {

ModelPreset resolve_model_preset(const std::string& name_or_path);

// Model profiles the same way: a bare name is configs/profiles/NAME.toml, a path the user's own file.
std::filesystem::path resolve_model_profile(const std::string& name_or_path);

// Every runtime table under configs/runtimes, its specs checked through `registry`.
std::vector<RuntimeTable> command_runtime_tables(const Registry& registry);

// "NAME" or "NAME@VERSION" (version "latest" without one); InputError naming `option` otherwise.
RuntimeTarget parse_runtime_target(const std::string& text, const std::string& option);

}  // namespace kvtune::cli
