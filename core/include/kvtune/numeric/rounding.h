// Round half to even for the bounded values a quantizer produces (|v| <= 2^22).
#pragma once

#include <cmath>

#include "kvtune/hd.h"

namespace kvtune {

// Adding and subtracting 1.5 * 2^23 leaves the integer nearest to v, ties to even, under the
// default rounding mode. Unlike nearbyintf it vectorizes on baseline x86-64 (SSE2), and it is
// exact because the codecs compile with -ffp-contract=off and never with fast-math flags.
KVTUNE_HD float round_half_even(float v) {
#if defined(__CUDA_ARCH__)
  return rintf(v);
#else
  constexpr float kMagic = 12582912.0f;
  return (v + kMagic) - kMagic;
#endif
}

// C's roundf (half away from zero) for |v| <= 2^22, built on round_half_even so it inlines and
// vectorizes instead of calling libm: round |v| to even, bump the exact ties up, restore the sign
// (copysign also keeps roundf's signed zero, roundf(-0.3) = -0).
KVTUNE_HD float round_half_away(float v) {
  const float a = fabsf(v);
  const float r = round_half_even(a);
  return copysignf(r + (a - r == 0.5f ? 1.0f : 0.0f), v);  // a - r is exact: r is within 0.5 of a
}

// Clamp that maps onto minps/maxps (and fminf/fmaxf on the device). Inputs are never NaN:
// tensors are validated finite when they enter kvtune.
KVTUNE_HD float clamp_level(float v, float lo, float hi) {
  v = v < lo ? lo : v;
  return v > hi ? hi : v;
}

}  // namespace kvtune
