// The best of `repeats` timed calls of f, in seconds: the benchmarks' yardsticks (a memcpy, the
// std draws) are timed this way beside what they measure, in the same process.
#pragma once

#include <algorithm>
#include <chrono>

template <class F>
double best_seconds(F&& f, int repeats) {
  double best = 1e30;
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
