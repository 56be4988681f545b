// A point's figures as the console and HTML reports print them: a few significant digits, more
// where fewer would print a figure equal to a budget bound it is not equal to, so a judged end just
// past its bound ("[0.0412, 0.05003]" against max 0.05) never reads as the bound itself. Internal.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "kvtune/metrics.h"
#include "kvtune/sweep.h"

namespace kvtune::detail {

inline std::string significant(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*g", digits, v);
  return buf;
}

// The fewest significant digits, at least `digits`, that print every x apart from every bound it
// differs from, all at once: one more digit can print two values equal that one fewer kept apart
// (0.1249 and 0.1251: "0.12" and "0.13", then "0.125" twice). Rounding keeps order, so printed
// apart they also keep their sides.
inline int digits_apart(const std::vector<double>& xs, const std::vector<double>& bounds, int digits) {
  auto collides = [&](int d) {
    for (double x : xs) {
      for (double b : bounds) {
        if (x != b && significant(x, d) == significant(b, d)) return true;
      }
    }
    return false;
  };
  while (digits < 17 && collides(digits)) ++digits;
  return digits;
}

// The bounds the budget puts on one quantity: a metric's mean or its p95.
inline std::vector<double> bounds_on(const SweepBudget& budget, Metric metric, Statistic statistic) {
  std::vector<double> out;
  for (const BudgetTerm& t : budget.terms) {
    if (t.metric == metric && t.statistic == statistic) out.push_back(t.bound);
  }
  return out;
}

// "value [lo, hi]" (the interval when the summary has one): the value to `digits` and the interval's
// ends to `interval_digits` significant digits, each with more where a bound needs them.
inline std::string figure_text(const Summary& s, Statistic statistic, const std::vector<double>& bounds, int digits,
                               int interval_digits) {
  const double v = statistic == Statistic::mean ? s.mean : s.p95;
  const Interval& ci = statistic == Statistic::mean ? s.mean_ci : s.p95_ci;
  auto text = [&](double x, int d) { return significant(x, digits_apart({x}, bounds, d)); };
  std::string out = text(v, digits);
  if (s.has_intervals()) out += " [" + text(ci.lo, interval_digits) + ", " + text(ci.hi, interval_digits) + "]";
  return out;
}

}  // namespace kvtune::detail
