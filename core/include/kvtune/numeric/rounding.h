// Round half to even for the bounded values a quantizer produces (|v| <= 2^22).
#pragma once

#include "kvtune/hd.h"

namespace kvtune {

// Adding and subtracting 1.5 * 2^23 leaves the integer nearest to v, ties to even, under the
// default rounding mode. Unlike nearbyintf it vectorizes on baseline x86-64 (SSE2), and it is
// exact because the codecs compile with -ffp-contract=off and never with -ffast-math.
KVTUNE_HD float round_half_even(float v) {
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
#endif
}

// Clamp that maps onto minps/maxps (and fminf/fmaxf on the device). Inputs are never NaN:
// tensors are validated finite when they enter kvtune.
KVTUNE_HD float clamp_level(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

}  // namespace kvtune
