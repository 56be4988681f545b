// Bit casts usable in host and device code (memcpy is the portable, optimizer-friendly idiom).
#pragma once

#include <cstdint>
#include <cstring>

#include "kvtune/hd.h"

namespace kvtune {

KVTUNE_HD uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

KVTUNE_HD float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace kvtune
