// When a codec's round trip writes its output with non-temporal (streaming) stores. A normal store
// first reads the line it writes (read-for-ownership), so a round trip of a cache larger than the
// caches moved three streams where memcpy, which streams large copies, moves two. Below
// kStreamMinBytes the output may still be in cache when the caller reads it, so it is stored
// normally. Streaming needs 64-byte-aligned rows (Matrix storage is; other buffers may not be).
// Stores are the only thing that changes: the values written are the same bits. The int family's
// per-channel tiles use it (bench_schemes: 1.46 -> 1.11 ms at 16 MiB); the fp8 per-token and
// microscale round trips measured no gain and store normally.
#pragma once

#include <cstdint>

#include "x86_intrinsics.h"

namespace kvtune::builtin {

inline constexpr int64_t kStreamMinBytes = int64_t(8) << 20;

inline bool streams_output(const float* y, int64_t rows, int64_t cols) {
  return reinterpret_cast<uintptr_t>(y) % 64 == 0 && cols % 16 == 0 &&
         rows * cols * int64_t(sizeof(float)) >= kStreamMinBytes;
}

#if KVTUNE_X86_INTRINSICS
// One vector to p (64-byte aligned when stream): streamed or stored. A kernel that streamed ends
// with _mm_sfence(), so its stores are ordered before whatever the caller does next.
KVTUNE_AVX512 inline void store16(float* p, __m512 v, bool stream) {
  if (stream) {
    _mm512_stream_ps(p, v);
  } else {
    _mm512_storeu_ps(p, v);
  }
}
#endif

}  // namespace kvtune::builtin
