// The x86-64 intrinsics for the codecs' explicit vector paths (fp8, int, microscale). Functions are
// compiled for AVX-512 one by one through KVTUNE_AVX512 (the rest of the build stays baseline
// x86-64) and called only where cpu_has_avx512() (kvtune/numeric/cpu_features.h) says so.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__)
// GCC 12 reports the AVX-512 intrinsics' own _mm512_undefined_* operands as maybe uninitialized
// (a false positive inside avx512fintrin.h), as in plugins/ggml/ggml_avx2.cpp.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#define KVTUNE_X86_INTRINSICS 1
#define KVTUNE_AVX512 __attribute__((target("avx512f,avx512dq")))
// AVX2 with F16C (called where cpu_has_avx2_f16c()), and AVX-512 code that inlines such helpers
// (every AVX-512 CPU has AVX2 and F16C).
#define KVTUNE_AVX2_F16C __attribute__((target("avx2,f16c")))
#define KVTUNE_AVX512_F16C __attribute__((target("avx512f,avx512dq,avx2,f16c")))
#endif
