// A read-ahead hint for the codecs' loops: every 64-byte line of the next floats they will read is
// asked for while the work in hand runs (prefetcht0; nothing is read, nothing can fault).
#pragma once

#include <cstdint>

namespace kvtune::builtin {

inline void prefetch_floats(const float* p, int64_t n) {
  const char* bytes = reinterpret_cast<const char*>(p);
  for (int64_t b = 0; b < n * int64_t(sizeof(float)); b += 64) __builtin_prefetch(bytes + b);
}

}  // namespace kvtune::builtin
