// Run-time CPU checks for the hand-vectorized codec and attention paths.
#pragma once

#include <unistd.h>

#include <cstdint>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace kvtune {

// AVX2 and F16C (vcvtps2ph/vcvtph2ps). F16C comes from CPUID leaf 1 (ECX bit 29): clang's
// __builtin_cpu_supports does not know "f16c". False on other architectures.
inline bool cpu_has_avx2_f16c() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_F16C) != 0;
  }();
  return ok;
#else
  return false;
#endif
}

// AVX-512 F and DQ (the 512-bit float and 32-bit integer operations the kernels use).
inline bool cpu_has_avx512() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return ok;
#else
  return false;
#endif
}

// AVX-512 F, DQ, BW and VBMI (byte permutes across the vector: table lookups of 128 bytes).
inline bool cpu_has_avx512_vbmi() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool ok = cpu_has_avx512() && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vbmi");
  return ok;
#else
  return false;
#endif
}

// The last-level cache's size in bytes as the C library reports it (L3, else L2), or 0 where it
// does not say (glibc reads CPUID leaf 4 or 0x8000001D; a virtual machine reports what its host
// passes through).
inline int64_t cpu_last_level_cache_bytes() {
  static const int64_t bytes = [] {
    long size = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE) && defined(_SC_LEVEL2_CACHE_SIZE)
    size = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (size <= 0) size = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return size > 0 ? int64_t(size) : int64_t(0);
  }();
  return bytes;
}

// The cache a kernel counts on when it decides whether to stream its output past the caches: the
// reported last-level cache, at most kMostCountedCacheBytes, because a virtual machine reports its
// socket's whole L3 and shares it with tenants it cannot see (an Intel Xeon VM reporting 260 MiB
// behaved as if it had under 64: docs/performance.md, twenty-sixth session); kAssumedCacheBytes
// where none is reported.
inline constexpr int64_t kAssumedCacheBytes = int64_t(16) << 20;
inline constexpr int64_t kMostCountedCacheBytes = int64_t(64) << 20;

inline int64_t streaming_cache_bytes() {
  const int64_t reported = cpu_last_level_cache_bytes();
  if (reported <= 0) return kAssumedCacheBytes;
  return reported < kMostCountedCacheBytes ? reported : kMostCountedCacheBytes;
}

// Whether an output of `bytes` and an input of the same size cannot both stay in a cache of
// `cache_bytes`: the output is at least half of it.
inline bool outgrows_cache(int64_t bytes, int64_t cache_bytes = streaming_cache_bytes()) {
  return 2 * bytes >= cache_bytes;
}

}  // namespace kvtune
