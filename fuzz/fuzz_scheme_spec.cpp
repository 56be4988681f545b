// Scheme spec strings (Registry::make over the built-in families and the cache policy).
#include <string_view>

#include "builtin.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view spec(reinterpret_cast<const char*>(data), size);
  kvtune::fuzz::expect_only_input_errors([&] { kvtune::builtin_registry().make(spec); });
  return 0;
}
