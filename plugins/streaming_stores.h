// When a codec's round trip writes its output with non-temporal (streaming) stores. A normal store
// first reads the line it writes (read-for-ownership); when input and output together exceed the
// cache, a round trip then moves three streams to and from memory where memcpy moves two, and
// streaming saves the third (AMD EPYC, 32 MiB L3, 16 MiB of output: 1.46 -> 1.11 ms). When they
// fit, streaming sends to memory what a normal store would have kept in cache. The cache counted
// is streaming_cache_bytes() (kvtune/numeric/cpu_features.h). On the Intel Xeon VM that reports
// 260 MiB, the int per-channel tiles read, as shares of memcpy, 0.46-0.60 streamed and 0.52-0.71
// not at 16 MiB of output, about the same at 24 MiB, and 0.49-0.56 streamed and 0.34-0.41 not at
// 32 MiB; int4 per token took 10.1-11.1 ms unstreamed and 5.4-6.4 streamed at 64 MiB
// (docs/performance.md, twenty-sixth session). Streaming needs 64-byte-aligned rows (Matrix
// storage is; other buffers may not be). Stores are the only thing that changes: the values written
// are the same bits. The int family's per-channel tiles and sixteen-lane per-token groups use it.
#pragma once

#include <cstdint>

#include "kvtune/numeric/cpu_features.h"
#include "x86_intrinsics.h"

namespace kvtune::builtin {

// Whether [rows, cols] floats written to y stream: y 64-byte aligned, rows of whole vectors, and the
// output outgrowing `cache_bytes` (outgrows_cache).
inline bool streams_output(const float* y, int64_t rows, int64_t cols,
                           int64_t cache_bytes = streaming_cache_bytes()) {
  return reinterpret_cast<uintptr_t>(y) % 64 == 0 && cols % 16 == 0 &&
         outgrows_cache(rows * cols * int64_t(sizeof(float)), cache_bytes);
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
