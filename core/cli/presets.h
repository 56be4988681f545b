// Model presets for the commands: a bare name is looked up in configs/models (found relative to
// the executable, see config_dir_candidates), a path names a preset file of the user's own.
#pragma once

#include <filesystem>
#include <string>

#include "kvtune/model_preset.h"

namespace kvtune::cli {

ModelPreset resolve_model_preset(const std::string& name_or_path);

// Model profiles the same way: a bare name is configs/profiles/NAME.toml, a path the user's own file.
std::filesystem::path resolve_model_profile(const std::string& name_or_path);

}  // namespace kvtune::cli
