// KVTUNE_MULTIVERSION compiles a hot loop twice, for AVX2 and for baseline x86-64, and picks one
// at run time (GCC target_clones), so one binary vectorizes wherever it can. Only loops whose
// results do not depend on the vector width may use it (element-wise work, per-lane reductions).
// Off under AddressSanitizer, whose start-up runs after the ifunc resolvers.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define KVTUNE_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define KVTUNE_MULTIVERSION
#endif
