// Writes the seed inputs that tests/data has no file for: the tests' capture directory (its layer
// files seed the .safetensors target, its manifest the manifest target) and a few plugin tables.
// Usage: write_seeds DIR  (DIR/<target>/ are created)
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "seed_capture.h"

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  if (argc != 2) {
    std::fprintf(stderr, "usage: write_seeds DIR\n");
    return 2;
  }
  const fs::path out = argv[1];
  const fs::path capture = out / "capture-fixture";
  kvtune::testing::write_capture(capture, kvtune::fuzz::seed_capture_spec());
  fs::create_directories(out / "safetensors");
  fs::create_directories(out / "capture_manifest");
  fs::copy_file(capture / "layer_000.safetensors", out / "safetensors" / "layer_000.safetensors",
                fs::copy_options::overwrite_existing);
  fs::copy_file(capture / "manifest.json", out / "capture_manifest" / "manifest.json", fs::copy_options::overwrite_existing);
  fs::remove_all(capture);
  // Plugin tables: bytes that choose a well-formed family with one integer and one choice parameter.
  fs::create_directories(out / "plugin_tables");
  std::ofstream(out / "plugin_tables" / "two-params", std::ios::binary)
      << std::string("\x02\x01\x00\x04name\x00\x00\x00", 11) << "bits=4";
  return 0;
}
