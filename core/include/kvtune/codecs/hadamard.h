// The normalized Walsh-Hadamard transform on a group of n = 2^k floats, in the order llama.cpp
// applies it to a quantized KV cache: multiply by 1/sqrt(n) first, then butterflies of length
// 1, 2, 4, ..., n/2. The normalized transform is its own inverse, so the same call rotates back.
#pragma once

#include <cmath>

#include "kvtune/hd.h"

namespace kvtune {

KVTUNE_HD float hadamard_scale(int n) { return 1.0f / sqrtf(static_cast<float>(n)); }

KVTUNE_HD void hadamard_transform(float* x, int n) {
  const float scale = hadamard_scale(n);
  for (int i = 0; i < n; ++i) x[i] *= scale;
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

}  // namespace kvtune
