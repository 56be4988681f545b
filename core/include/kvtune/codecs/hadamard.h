// The Walsh-Hadamard transform on a group of n = 2^k floats. hadamard_transform is the normalized
// one in the order llama.cpp applies it to a quantized KV cache: multiply by 1/sqrt(n) first, then
// butterflies of length 1, 2, 4, ..., n/2; it is its own inverse, so the same call rotates back.
// hadamard_butterflies alone is the unnormalized H (H H = n I) that vLLM's randomized Hadamard
// transform uses (kvtune/codecs/rht.h).
#pragma once

#include <cmath>

#include "kvtune/hd.h"

namespace kvtune {

KVTUNE_HD float hadamard_scale(int n) { return 1.0f / sqrtf(static_cast<float>(n)); }

// x <- H x, H the unnormalized Walsh-Hadamard matrix of order n: butterflies of length h = 1, 2, 4,
// ..., n/2, each pair (a, b) = (x[j], x[j + h]) becoming (a + b, a - b).
KVTUNE_HD void hadamard_butterflies(float* x, int n) {
  for (int len = 1; len < n; len <<= 1) {
    for (int i = 0; i < n; i += 2 * len) {
      for (int j = i; j < i + len; ++j) {
        const float a = x[j], b = x[j + len];
        x[j] = a + b;
        x[j + len] = a - b;
      }
    }
  }
}

KVTUNE_HD void hadamard_transform(float* x, int n) {
  const float scale = hadamard_scale(n);
  for (int i = 0; i < n; ++i) x[i] *= scale;
  hadamard_butterflies(x, n);
}

}  // namespace kvtune
