// Run-time CPU checks for the hand-vectorized codec and attention paths.
#pragma once

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

}  // namespace kvtune
