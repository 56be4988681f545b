#include "presets.h"

#include "kvtune/error.h"

namespace kvtune::cli {

ModelPreset resolve_model_preset(const std::string& name_or_path) {
  const bool is_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_file) return load_model_preset(name_or_path);
  return find_model_preset(find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR)), name_or_path);
}

std::vector<RuntimeTable> command_runtime_tables(const Registry& registry) {
  return load_runtime_tables(find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR)), registry);
}

RuntimeTarget parse_runtime_target(const std::string& text, const std::string& option) {
  const size_t at = text.find('@');
  RuntimeTarget t{text.substr(0, at), at == std::string::npos ? "latest" : text.substr(at + 1)};
  if (t.name.empty() || t.version.empty()) throw InputError(option + " '" + text + "': expected NAME or NAME@VERSION");
  return t;
}

std::filesystem::path resolve_model_profile(const std::string& name_or_path) {
  const bool is_file = name_or_path.find('/') != std::string::npos || name_or_path.ends_with(".toml");
  if (is_file) return name_or_path;
  return find_model_profile(find_config_dir(config_dir_candidates(executable_dir(), KVTUNE_SOURCE_DIR)), name_or_path);
}

}  // namespace kvtune::cli
