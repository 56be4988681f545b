// .safetensors files (SafetensorsFile): the header, then every tensor read as the capture reader does.
#include "fuzz_support.h"
#include "kvtune/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kvtune::fuzz::write_scratch("input.safetensors", data, size);
  kvtune::fuzz::expect_only_input_errors([&] {
    const kvtune::SafetensorsFile f = kvtune::SafetensorsFile::open(path);
    for (const kvtune::SafetensorsTensor& t : f.tensors()) {
      kvtune::fuzz::expect_only_input_errors([&] {
        if (t.dtype[0] == 'I') {
          f.read_integers(t.name);
        } else if (t.shape.size() == 3) {
          f.read_matrix(t.name, 0);
          f.read_rows(t.name, t.shape[0] - 1, 1, 1);
        } else {
          f.read_matrix(t.name);
        }
      });
    }
  });
  return 0;
}
