// vLLM's randomized Hadamard transform (RHT) of its int4_per_token_head KV cache
// (vllm/v1/attention/ops/int4_per_token_head.py @055e47c2: single_rht, _get_rht_signs,
// fast_hadamard_transform), over a whole head of d = 2^k channels (host only):
//
//   forward  y = H (s o x)          H the unnormalized Walsh-Hadamard matrix, H H = d I
//   inverse  x = s o (H y) / d      (vLLM divides by head_size after its inverse single_rht)
//
// with H applied as vLLM's PyTorch tier does (butterflies h = 1, 2, ..., d/2; hadamard_butterflies)
// and s the fixed sign vector vLLM draws once per d:
//   torch.Generator("cpu").manual_seed(0x9E3779B9); 2 * torch.bernoulli(torch.full((d,), 0.5)) - 1
// On torch's CPU generator that is one std::mt19937 output e_i per element,
// u_i = (e_i & 0xFFFFFF) * 2^-24 (uniform_real_distribution<float>) and s_i = +1 when u_i < 0.5
// (bernoulli_distribution<float>), ATen's DistributionsHelper.h / DistributionTemplates.h.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "kvtune/codecs/hadamard.h"

namespace kvtune {

inline constexpr uint32_t kRhtSeed = 0x9E3779B9u;  // vLLM's _get_rht_signs, round 0

// The d signs (+1.0f or -1.0f) of vLLM's RHT for a head of d channels.
inline std::vector<float> rht_signs(int64_t d) {
  std::mt19937 engine(kRhtSeed);
  std::vector<float> s(static_cast<size_t>(d));
  for (float& v : s) {
    const float u = static_cast<float>(engine() & 0xFFFFFFu) * 0x1.0p-24f;
    v = u < 0.5f ? 1.0f : -1.0f;
  }
  return s;
}

// x <- H (s o x) for one head of n = signs.size() channels (n a power of two).
inline void rht_forward(float* x, const std::vector<float>& signs) {
  const int n = static_cast<int>(signs.size());
  for (int i = 0; i < n; ++i) x[i] *= signs[static_cast<size_t>(i)];
  hadamard_butterflies(x, n);
}

// y <- s o (H y) / n, the inverse of rht_forward (exact division: n is a power of two).
inline void rht_inverse(float* y, const std::vector<float>& signs) {
  const int n = static_cast<int>(signs.size());
  hadamard_butterflies(y, n);
  const float d = static_cast<float>(n);
  for (int i = 0; i < n; ++i) y[i] = y[i] * signs[static_cast<size_t>(i)] / d;
}

}  // namespace kvtune
