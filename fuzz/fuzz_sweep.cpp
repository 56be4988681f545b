// Sweep files (parse_sweep): TOML, the workload, the search expansion, the budget, the runtimes
// (the source tree's configs/runtimes tables). Plugins are refused: no library is loaded.
#include <filesystem>
#include <string_view>

#include "builtin.h"
#include "fuzz_support.h"
#include "kvtune/model_preset.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep.h"

namespace fs = std::filesystem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const kvtune::SweepContext context = [] {
    const fs::path configs = fs::path(KVTUNE_SOURCE_DIR) / "configs";
    kvtune::SweepContext c;
    c.registry = &kvtune::builtin_registry();
    c.models = [configs](const std::string& name) { return kvtune::find_model_preset(configs, name); };
    c.profiles = [configs](const std::string& name) { return kvtune::find_model_profile(configs, name); };
    c.runtime_tables = kvtune::load_runtime_tables(configs, kvtune::builtin_registry());
    return c;
  }();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  kvtune::fuzz::expect_only_input_errors(
      [&] { kvtune::parse_sweep(text, (kvtune::fuzz::scratch_dir() / "fuzz.toml").string(), context); });
  return 0;
}
