#include "kvtune/numeric/normal_draws.h"

#include <algorithm>
#include <cmath>

#include "kvtune/numeric/multiversion.h"

namespace kvtune {
namespace {

// std::mt19937_64's parameters (C++ [rand.predef]): n = 312 words, m = 156, r = 31, matrix a,
// tempering u, d, s, b, t, c, l, and the seeding multiplier f.
constexpr size_t kMiddle = 156;
constexpr uint64_t kMatrixA = 0xb5026f5aa96619e9ull;
constexpr uint64_t kUpperMask = ~uint64_t(0) << 31, kLowerMask = ~kUpperMask;
constexpr uint64_t kSeedMultiplier = 6364136223846793005ull;

uint64_t twist(uint64_t word, uint64_t next, uint64_t middle) {
  const uint64_t y = (word & kUpperMask) | (next & kLowerMask);
  return middle ^ (y >> 1) ^ ((uint64_t(0) - (y & 1)) & kMatrixA);  // the branch-free "y odd ? a : 0"
}

// The twist and the tempering of a whole block: each word reads the next one before that one is
// rewritten and the one 156 ahead (behind, in the second loop), so the loops vectorize.
KVTUNE_MULTIVERSION
void next_block(uint64_t* state, uint64_t* out) {
  constexpr size_t n = Mt19937_64::kBlock;
  for (size_t k = 0; k < n - kMiddle; ++k) state[k] = twist(state[k], state[k + 1], state[k + kMiddle]);
  for (size_t k = n - kMiddle; k < n - 1; ++k) state[k] = twist(state[k], state[k + 1], state[k + kMiddle - n]);
  state[n - 1] = twist(state[n - 1], state[0], state[kMiddle - 1]);
  for (size_t k = 0; k < n; ++k) {
    uint64_t z = state[k];
    z ^= (z >> 29) & 0x5555555555555555ull;
    z ^= (z << 17) & 0x71d67fffeda60000ull;
    z ^= (z << 37) & 0xfff7eee000000000ull;
    out[k] = z ^ (z >> 43);
  }
}

// generate_canonical<double, 53> of one 64-bit output, as libstdc++ computes it: the output rounded
// to a double (to nearest even), over 2^64, and the largest double below 1 where that reaches 1.
// The rounding without a branch: an output with its top bit set is halved first, the bit shifted
// out kept as a sticky bit, so the halved value rounds as the whole one would.
double canonical(uint64_t u) {
  const uint64_t top = u >> 63;
  const double rounded = double(int64_t((u >> top) | (u & top))) * (1.0 + double(top));
  return std::min(rounded * 0x1p-64, 0x1.fffffffffffffp-1);
}

bool accepted(double r2) { return !(r2 > 1.0 || r2 == 0.0); }

// The polar method's candidates (x, y) = 2 (u[2k], u[2k + 1]) - 1 and r2 = x^2 + y^2, k < pairs,
// and whether each is accepted. The build's -ffp-contract=off keeps r2 a product and a sum, each
// rounded, as libstdc++'s is.
KVTUNE_MULTIVERSION
void candidates(const uint64_t* u, size_t pairs, double* x, double* y, double* r2, uint8_t* ok) {
  for (size_t k = 0; k < pairs; ++k) {
    x[k] = 2.0 * canonical(u[2 * k]) - 1.0;
    y[k] = 2.0 * canonical(u[2 * k + 1]) - 1.0;
    r2[k] = x[k] * x[k] + y[k] * y[k];
    ok[k] = accepted(r2[k]) ? 1 : 0;
  }
}

// sqrt(-2 ln(r2) / r2) from ln(r2) and r2, as libstdc++ computes it. (This file is compiled with
// -fno-math-errno, so that the square roots vectorize: their arguments are never negative.)
KVTUNE_MULTIVERSION
void multipliers(const double* log_r2, const double* r2, size_t n, double* mult) {
  for (size_t j = 0; j < n; ++j) mult[j] = std::sqrt(-2 * log_r2[j] / r2[j]);
}

// The distribution's `ret * stddev + mean` for N(0, 1), which turns -0 into +0.
double standard(double v) { return v * 1.0 + 0.0; }

}  // namespace

Mt19937_64::Mt19937_64(uint64_t seed) {
  state_[0] = seed;
  for (size_t i = 1; i < kBlock; ++i) state_[i] = kSeedMultiplier * (state_[i - 1] ^ (state_[i - 1] >> 62)) + i;
}

void Mt19937_64::refill() {
  next_block(state_.data(), out_.data());
  next_ = 0;
}

double NormalDraws::next() {
  if (saved_available_) {
    saved_available_ = false;
    return standard(saved_);
  }
  double x, y, r2;
  do {
    x = 2.0 * canonical(engine_()) - 1.0;
    y = 2.0 * canonical(engine_()) - 1.0;
    r2 = x * x + y * y;
  } while (!accepted(r2));
  const double mult = std::sqrt(-2 * std::log(r2) / r2);
  saved_ = x * mult;
  saved_available_ = true;
  return standard(y * mult);
}

// One engine block at a time: every candidate pair the block holds is formed at once, then the
// accepted ones are used in order until n values are out. The engine advances past the last pair
// used (rejected pairs before it included), exactly as far as the one-at-a-time draws go; a pair
// that straddles two blocks takes the one-at-a-time path.
void NormalDraws::fill(float* out, size_t n, double scale) {
  constexpr size_t kPairs = Mt19937_64::kBlock / 2;
  alignas(64) double x[kPairs], y[kPairs], r2[kPairs], kept_r2[kPairs], log_r2[kPairs], mult[kPairs];
  uint16_t kept[kPairs];
  uint8_t ok[kPairs];
  size_t i = 0;
  auto emit = [&](double v) { out[i++] = static_cast<float>(scale * standard(v)); };
  while (i < n) {
    if (saved_available_) {
      saved_available_ = false;
      emit(saved_);
      continue;
    }
    const size_t pairs = engine_.available() / 2;
    if (pairs == 0) {
      out[i++] = static_cast<float>(scale * next());
      continue;
    }
    candidates(engine_.upcoming(), pairs, x, y, r2, ok);
    size_t count = 0;
    for (size_t k = 0; k < pairs; ++k) {  // the accepted pairs' indices, without a branch
      kept[count] = static_cast<uint16_t>(k);
      count += ok[k];
    }
    const size_t wanted = (n - i + 1) / 2, used = std::min(count, wanted);
    for (size_t j = 0; j < used; ++j) {
      kept_r2[j] = r2[kept[j]];
      log_r2[j] = std::log(kept_r2[j]);
    }
    multipliers(log_r2, kept_r2, used, mult);
    for (size_t j = 0; j < used; ++j) {
      emit(y[kept[j]] * mult[j]);
      const double second = x[kept[j]] * mult[j];
      if (i < n) {
        emit(second);
      } else {
        saved_ = second;
        saved_available_ = true;
      }
    }
    engine_.advance(used == wanted ? 2 * (size_t(kept[used - 1]) + 1) : 2 * pairs);
  }
}

}  // namespace kvtune
