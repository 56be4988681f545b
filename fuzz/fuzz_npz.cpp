// .npz archives (NpzFile): the ZIP directory, then every member inflated and parsed.
#include "fuzz_support.h"
#include "kvtune/npz.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtune::fuzz::write_scratch("input.npz", data, size);
  kvtune::fuzz::expect_only_input_errors([&] {
    const kvtune::NpzFile f = kvtune::NpzFile::open(path);
    for (const std::string& name : f.names()) kvtune::fuzz::expect_only_input_errors([&] { f.read(name); });
  });
  return 0;
}
