// .npy bytes (parse_npy): header, dtype, shape, data length, non-finite values.
#include <vector>

#include "fuzz_support.h"
#include "kvtune/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(data), reinterpret_cast<const std::byte*>(data) + size);
  kvtune::fuzz::expect_only_input_errors([&] { kvtune::parse_npy(bytes, "fuzz.npy"); });
  return 0;
}
