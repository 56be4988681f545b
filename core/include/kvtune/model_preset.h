// Model presets: the shapes of published models, read from configs/models/NAME.toml (data, not
// code; each file names the Hugging Face config.json its numbers come from). The file format is
// described in docs/memory.md.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/memory.h"
#include "kvtune/rope.h"

namespace kvtune {

struct ModelPreset {
  std::string name;    // the file's stem: "llama-3.1-70b"
  std::string title;   // "Llama-3.1-70B" (the Hugging Face repository name)
  std::string source;  // where the numbers come from: the config.json URL
  ModelShape shape;
  int64_t q_heads = 0;  // attention (query) heads
  double rope_theta = 0.0;
  RopeConvention rope_convention = RopeConvention::rotate_half;
  RopeScaling rope_scaling;  // [rope_scaling], the config's (none without one)
  int64_t max_context = 0;  // max_position_embeddings of the published config
  int64_t parameters = 0;   // 0 when the file does not give it
  // Sliding-window layers follow Hugging Face's pattern: layer i slides unless (i + 1) is a
  // multiple of the pattern (Gemma 2: 2, so even layers slide). 0 with a window: every layer slides.
  int64_t sliding_window_pattern = 0;
  // The sliding layers' own RoPE base, plain RoPE without rope_scaling (Gemma 3's
  // rope_local_base_freq); 0: the sliding layers turn as the others do.
  double sliding_rope_theta = 0.0;
  // attn_logit_softcapping (Gemma 2): attention logits l become c · tanh(l / c); 0: none.
  double logit_softcap = 0.0;
  // The config's architectures[0] ("Gemma3ForConditionalGeneration"), which runtimes key some
  // behaviour on (CellAllocation::for_architectures); empty when the file does not give it.
  std::string architecture;
};

// The indices of the preset's sliding-window layers, ascending (empty without a window).
std::vector<int64_t> sliding_layer_indices(const ModelPreset& preset);

// Reads one preset; `text` is the TOML, `source_name` the file named in errors. Errors are
// InputErrors naming file:line:column, the key and what was expected; unknown keys list the valid ones.
ModelPreset parse_model_preset(std::string_view text, const std::string& source_name, const std::string& name);
ModelPreset load_model_preset(const std::filesystem::path& path);  // name = the file's stem

// Where configs/ may be, in the order tried: <exe_dir>/../share/kvtune/configs (an install),
// <exe_dir>/../configs (a build directory inside the source tree), <source_dir>/configs (the build
// tree's sources; skipped when source_dir is empty).
std::vector<std::filesystem::path> config_dir_candidates(const std::filesystem::path& exe_dir,
                                                         const std::filesystem::path& source_dir);

// The first candidate holding a models/ folder; InputError listing every candidate when none does.
std::filesystem::path find_config_dir(const std::vector<std::filesystem::path>& candidates);

// The directory of the running executable (Linux: /proc/self/exe); empty when it cannot be known.
std::filesystem::path executable_dir();

// The preset names under <config_dir>/models, sorted.
std::vector<std::string> model_preset_names(const std::filesystem::path& config_dir);

// <config_dir>/models/<name>.toml; InputError listing the available names when there is none.
ModelPreset find_model_preset(const std::filesystem::path& config_dir, const std::string& name);

// The model profile names under <config_dir>/profiles, sorted.
std::vector<std::string> model_profile_names(const std::filesystem::path& config_dir);

// <config_dir>/profiles/<name>.toml; InputError listing the available names when there is none.
std::filesystem::path find_model_profile(const std::filesystem::path& config_dir, const std::string& name);

}  // namespace kvtune
