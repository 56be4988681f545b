#include "kvtune/model_preset.h"

#include <algorithm>
#include <set>
#include <sstream>
#include <system_error>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "rope_scaling_toml.h"
#include "toml_reader.h"

namespace kvtune {

namespace fs = std::filesystem;

ModelPreset parse_model_preset(std::string_view text, const std::string& source_name, const std::string& name) {
  const toml::table root = detail::parse_toml(text, source_name);
  detail::TableReader r(root, source_name, "");
  ModelPreset p;
  p.name = name;
  p.title = r.string("name", "");
  if (p.title.empty()) p.title = name;
  p.source = r.string("source", "");
  // Bounds are sanity limits, far beyond any published model.
  p.shape.layers = r.required_integer("layers", 1, 4096);
  p.shape.kv_heads = r.required_integer("kv_heads", 1, 4096);
  p.q_heads = r.required_integer("q_heads", 1, 65536);
  p.shape.head_dim = r.required_integer("head_dim", 1, 65536);
  if (p.q_heads % p.shape.kv_heads != 0) {
    r.fail(*r.node("q_heads"), "'q_heads' (" + std::to_string(p.q_heads) + ") must be a multiple of 'kv_heads' (" +
                                   std::to_string(p.shape.kv_heads) + "): each KV head serves a whole group");
  }
  p.rope_theta = r.required_real("rope_theta", 1.0, 1e12);
  p.rope_convention = r.required_choice("rope_convention", {"rotate_half", "interleaved"}) == "interleaved"
                          ? RopeConvention::interleaved
                          : RopeConvention::rotate_half;
  if (r.has("rope_scaling")) p.rope_scaling = detail::read_rope_scaling(r.table("rope_scaling"));
  p.max_context = r.required_integer("max_context", 1, int64_t(1) << 40);
  p.parameters = r.integer("parameters", 0, 1, int64_t(1) << 60);
  p.shape.sliding_window = r.integer("sliding_window", 0, 1, int64_t(1) << 40);
  p.sliding_window_pattern = r.integer("sliding_window_pattern", 0, 2, p.shape.layers);
  if (p.sliding_window_pattern > 0 && p.shape.sliding_window == 0) {
    r.fail(*r.node("sliding_window_pattern"), "'sliding_window_pattern' needs 'sliding_window'");
  }
  if (p.shape.sliding_window > 0) {
    // Hugging Face: layer i slides unless (i + 1) % pattern == 0, so a pattern of N leaves every
    // N-th layer global; without a pattern the window applies to every layer (Mistral v0.1).
    p.shape.sliding_layers = static_cast<int64_t>(sliding_layer_indices(p).size());
  }
  p.sliding_rope_theta = r.real("sliding_rope_theta", 0.0, 1.0 + 1e-9, 1e12);
  p.logit_softcap = r.real("attn_logit_softcapping", 0.0, 1e-3, 1e6);
  p.architecture = r.string("architecture", "");
  if (r.has("architecture") && p.architecture.find_first_not_of(" \t") == std::string::npos) {
    r.fail(*r.node("architecture"), "'architecture' must be the config's architectures[0], not empty");
  }
  if (p.sliding_rope_theta > 0 && p.shape.sliding_window == 0) {
    r.fail(*r.node("sliding_rope_theta"), "'sliding_rope_theta' needs 'sliding_window'");
  }
  r.finish();
  return p;
}

std::vector<int64_t> sliding_layer_indices(const ModelPreset& p) {
  std::vector<int64_t> out;
  if (p.shape.sliding_window == 0) return out;
  for (int64_t i = 0; i < p.shape.layers; ++i) {
    if (p.sliding_window_pattern == 0 || (i + 1) % p.sliding_window_pattern != 0) out.push_back(i);
  }
  return out;
}

ModelPreset load_model_preset(const fs::path& path) {
  const std::vector<std::byte> bytes = read_file(path.string());
  return parse_model_preset(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path.string(),
                            path.stem().string());
}

std::vector<fs::path> config_dir_candidates(const fs::path& exe_dir, const fs::path& source_dir) {
  std::vector<fs::path> out;
  if (!exe_dir.empty()) {
    out.push_back((exe_dir / ".." / "share" / "kvtune" / "configs").lexically_normal());
    out.push_back((exe_dir / ".." / "configs").lexically_normal());
  }
  if (!source_dir.empty()) out.push_back((source_dir / "configs").lexically_normal());
  return out;
}

fs::path find_config_dir(const std::vector<fs::path>& candidates) {
  std::vector<std::string> tried;
  for (const fs::path& dir : candidates) {
    std::error_code ec;
    if (fs::is_directory(dir / "models", ec)) return dir;
    tried.push_back(dir.string());
  }
  throw InputError("cannot find kvtune's configs directory (with models/ inside); looked in: " +
                   (tried.empty() ? std::string("nowhere (the executable's location is unknown)") : join(tried)));
}

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

namespace {

std::vector<std::string> toml_stems(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

fs::path find_named(const fs::path& dir, const std::string& what, const std::string& name) {
  const std::vector<std::string> names = toml_stems(dir);
  if (std::find(names.begin(), names.end(), name) == names.end()) {
    throw InputError("unknown " + what + " '" + name + "'; the " + what + "s in " + dir.string() +
                     " are: " + (names.empty() ? std::string("(none)") : join(names)) +
                     " (or give the path of a .toml file)");
  }
  return dir / (name + ".toml");
}

}  // namespace

std::vector<std::string> model_preset_names(const fs::path& config_dir) { return toml_stems(config_dir / "models"); }

ModelPreset find_model_preset(const fs::path& config_dir, const std::string& name) {
  return load_model_preset(find_named(config_dir / "models", "model", name));
}

std::vector<std::string> model_profile_names(const fs::path& config_dir) { return toml_stems(config_dir / "profiles"); }

fs::path find_model_profile(const fs::path& config_dir, const std::string& name) {
  return find_named(config_dir / "profiles", "model profile", name);
}

}  // namespace kvtune
