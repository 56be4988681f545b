// A capture directory's manifest.json (open_capture), beside the layer files of the seed capture
// (seed_capture.h), so a manifest that parses reaches the checks of the files
// against it; an accepted capture is then read case by case.
#include "seed_capture.h"
#include "fuzz_support.h"
#include "kvtune/capture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = kvtune::fuzz::scratch_dir() / "capture";
    kvtune::testing::write_capture(d, kvtune::fuzz::seed_capture_spec());
    return d;
  }();
  std::ofstream(dir / "manifest.json", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), std::streamsize(size));
  kvtune::fuzz::expect_only_input_errors([&] {
    const kvtune::Capture c = kvtune::open_capture(dir.string());
    for (size_t s = 0; s < c.samples.size(); ++s) {
      for (int64_t l : c.layers) kvtune::fuzz::expect_only_input_errors([&] { kvtune::capture_case(c, int64_t(s), l, 0); });
    }
  });
  return 0;
}
