#include "presets.h"

namespace kvtune::cli {

ModelPreset resolve_model_preset(const std::string& name_or_path) {
  const bool is_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_file) return load_model_preset(name_or_path);
  return find_model_preset(find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR)), name_or_path);
}

std::filesystem::path resolve_model_profile(const std::string& name_or_path) {
  const bool is_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_file) return name_or_path;
  return find_model_profile(find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR)), name_or_path);
}

}  // namespace kvtune::cli
