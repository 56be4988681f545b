// Scenario files (parse_scenario): TOML, the workload, the pairs; model presets and profiles are
// resolved from the source tree's configs, as the CLI does.
#include <filesystem>
#include <string_view>

#include "fuzz_support.h"
#include "kvtune/model_preset.h"
#include "kvtune/scenario.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const fs::path configs = fs::path(KVTUNE_SOURCE_DIR) / "configs";
  const kvtune::ModelLookup models = [&](const std::string& name) {
    return kvtune::find_model_preset(configs, name);
  };
  const kvtune::ProfileLookup profiles = [&](const std::string& name) {
    return kvtune::find_model_profile(configs, name);
  };
  kvtune::fuzz::expect_only_input_errors([&] {
    kvtune::parse_scenario(text, (kvtune::fuzz::scratch_dir() / "fuzz.toml").string(), models, profiles);
  });
  return 0;
}
