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
#endif
