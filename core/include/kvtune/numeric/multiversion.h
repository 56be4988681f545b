// Run-time dispatch of hot loops: KVTUNE_CLONES("target", ...) compiles a function once per listed
// x86 target and once for baseline x86-64 (GCC target_clones) and picks one when the program
// starts, so one binary uses AVX-512 or AVX2 wherever the machine has them. A function may use it
// only when its results do not depend on the target: element-wise work, per-lane reductions, or
// sums in one fixed order (the build's -ffp-contract=off keeps an FMA from changing a rounding,
// except in attention_kernels.cpp, which documents why). Empty under clang (the fuzz build),
// AddressSanitizer (whose start-up runs after the ifunc resolvers) and other architectures.
#pragma once

// kMultiversioned: whether this build compiles KVTUNE_CLONES functions per target (else once, for
// the build's own target: baseline x86-64, without FMA).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__)
#define KVTUNE_CLONES(...) __attribute__((target_clones(__VA_ARGS__, "default")))
namespace kvtune {
inline constexpr bool kMultiversioned = true;
}
#else
#define KVTUNE_CLONES(...)
namespace kvtune {
inline constexpr bool kMultiversioned = false;
}
#endif

// The codecs' element-wise loops (plugins/*_kernels.cpp).
#define KVTUNE_MULTIVERSION KVTUNE_CLONES("arch=x86-64-v4", "avx2")
