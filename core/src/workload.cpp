#include "kvtune/workload.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <utility>

#include "figure_text.h"
#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/numeric/normal_draws.h"
#include "kvtune/numeric/row_dots.h"

namespace kvtune {
namespace {

// SplitMix64 (Steele, Lea, Flood 2014; constants as in Vigna's splitmix64.c): mixes (seed, layer,
// head) into independent engine seeds.
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Unit-variance draws, so `scale` is the standard deviation whatever the shape. The normal draws
// are std::normal_distribution<double>'s over std::mt19937_64, made in bulk (NormalDraws).
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : draws_(seed) {}
  Mt19937_64& engine() { return draws_.engine(); }

  void fill(Matrix& m, Distribution d, double scale) {
    float* p = m.data();
    const auto n = static_cast<size_t>(m.size());
    if (d == Distribution::normal) return draws_.fill(p, n, scale);
    for (size_t i = 0; i < n; ++i) p[i] = static_cast<float>(scale * draw(d));
  }

  double normal() { return draws_.next(); }

  // A uniformly random direction in `d` dimensions: d normal draws, normalized.
  std::vector<double> unit_vector(int64_t d) {
    std::vector<double> u(static_cast<size_t>(d));
    double norm = 0.0;
    for (double& v : u) {
      v = normal();
      norm += v * v;
    }
    norm = std::sqrt(norm);
    for (double& v : u) v /= norm;
    return u;
  }

 private:
  double draw(Distribution d) {
    switch (d) {
      case Distribution::uniform:
        return std::sqrt(3.0) * (2.0 * uniform_(engine()) - 1.0);
      case Distribution::laplace: {
        const double u = uniform_(engine()) - 0.5;
        return -std::copysign(1.0, u) * std::log1p(-2.0 * std::abs(u)) / std::sqrt(2.0);
      }
      case Distribution::normal:
        break;
    }
    return normal();
  }

  NormalDraws draws_;
  std::uniform_real_distribution<double> uniform_{0.0, 1.0};
};

double dot(const float* a, const float* b, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += double(a[i]) * double(b[i]);
  return s;
}

double logsumexp(const std::vector<double>& l, int64_t skip = -1) {
  double m = -INFINITY;
  for (size_t j = 0; j < l.size(); ++j) {
    if (static_cast<int64_t>(j) != skip) m = std::max(m, l[j]);
  }
  double s = 0.0;
  for (size_t j = 0; j < l.size(); ++j) {
    if (static_cast<int64_t>(j) != skip) s += std::exp(l[j] - m);
  }
  return m + std::log(s);
}

// The query rows' products with every key (row_key_dots), sixteen queries at a time so that the
// buffer stays 16 x T whatever the number of queries: row(i) computes i's sixteen when first
// asked, from the queries and keys as they are then, and says so in `fresh`.
class QueryKeyProducts {
 public:
  QueryKeyProducts(const Matrix& queries, const Matrix& keys)
      : queries_(queries), keys_(keys), products_(static_cast<size_t>(kChunk * keys.rows())) {}

  const double* row(int64_t i, bool* fresh = nullptr) {
    const int64_t first = i - i % kChunk, t = keys_.rows(), d = keys_.cols();
    const bool compute = first != first_;
    if (compute) {
      const int64_t n = std::min(kChunk, queries_.rows() - first);
      rows_.assign(queries_.row(first), queries_.row(first) + n * d);
      row_key_dots(rows_.data(), n, keys_.data(), t, d, products_.data());
      first_ = first;
    }
    if (fresh != nullptr) *fresh = compute;
    return products_.data() + (i - first) * t;
  }

 private:
  static constexpr int64_t kChunk = 16;
  const Matrix& queries_;
  const Matrix& keys_;
  std::vector<double> rows_, products_;
  int64_t first_ = -1;
};

// Tilts each query toward (or away from) the sink keys until they hold `mass` of its attention
// (bisection on the tilt; the sink mass grows monotonically with it because the sinks share one
// direction). Away matters as much as toward: a sink key is several times longer than the others,
// so an untilted random query may already give the sinks almost all of its attention.
void tilt_queries_toward_sinks(Case& c, const SinkProfile& sinks) {
  const int64_t d = c.keys.cols(), t = c.keys.rows();
  std::vector<double> w(static_cast<size_t>(d), 0.0);
  for (int64_t j = 0; j < sinks.count; ++j) {
    for (int64_t k = 0; k < d; ++k) w[k] += c.keys(j, k);
  }
  double norm = 0.0;
  for (double v : w) norm += v * v;
  norm = std::sqrt(norm);
  if (norm == 0.0 || sinks.mass <= 0.0) return;
  for (double& v : w) v /= norm;
  const double inv_sqrt_d = 1.0 / std::sqrt(double(d));
  std::vector<double> a(static_cast<size_t>(t)), b(static_cast<size_t>(t)), l(static_cast<size_t>(t));
  row_key_dots(w.data(), 1, c.keys.data(), t, d, b.data());
  for (double& v : b) v *= inv_sqrt_d;  // the tilt's logits, the same for every query
  // Each query's products as drawn: a query's tilt changes only that query, after its own
  // products are taken.
  QueryKeyProducts products(c.queries, c.keys);
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    const double* p = products.row(i);
    for (int64_t j = 0; j < t; ++j) a[j] = p[j] * inv_sqrt_d;
    auto sink_mass = [&](double alpha) {
      for (int64_t j = 0; j < t; ++j) l[j] = capped_logit(a[j] + alpha * b[j], c.logit_softcap);
      const double lse = logsumexp(l);
      double m = 0.0;
      for (int64_t j = 0; j < sinks.count; ++j) m += std::exp(l[j] - lse);
      return m;
    };
    const double untilted = sink_mass(0.0);
    if (untilted == sinks.mass) continue;
    double lo = 0.0, hi = 0.0;
    if (untilted < sinks.mass) {
      hi = 1.0;
      for (int it = 0; it < 60 && sink_mass(hi) < sinks.mass; ++it) hi *= 2.0;
    } else {
      lo = -1.0;
      for (int it = 0; it < 60 && sink_mass(lo) > sinks.mass; ++it) lo *= 2.0;
    }
    // Capped logits bound what any tilt reaches: say so rather than plant a sink of another mass.
    if (const double reach = sink_mass(untilted < sinks.mass ? hi : lo);
        c.logit_softcap > 0.0 && (untilted < sinks.mass ? reach < sinks.mass : reach > sinks.mass)) {
      throw InputError("workload: under a logit softcap of " + detail::significant(c.logit_softcap, 4) +
                       " the sinks hold " + (untilted < sinks.mass ? "at most " : "at least ") +
                       detail::significant(reach, 3) +
                       " of a query's attention, not the sink mass " + detail::significant(sinks.mass, 3) +
                       "; raise the cap or change [workload.sinks] mass");
    }
    auto tilted = [&](double alpha, int64_t k) { return static_cast<float>(c.queries(i, k) + alpha * w[k]); };
    // Whether every tilt in [lo, hi] gives the same query: each channel's tilted float is monotone in
    // the tilt, so equal (nonzero) floats at both ends hold across the interval, and the bisection's
    // last hi, which lies in it, gives this query whatever the remaining steps would do.
    auto settled = [&] {
      for (int64_t k = 0; k < d; ++k) {
        const float at_lo = tilted(lo, k), at_hi = tilted(hi, k);
        if (at_lo != at_hi || at_lo == 0.0f) return false;
      }
      return true;
    };
    for (int it = 0; it < 60 && !settled(); ++it) {
      const double mid = 0.5 * (lo + hi);
      // Once the midpoint is an end, every later step repeats this one's evaluation and outcome.
      const bool last = mid == lo || mid == hi;
      (sink_mass(mid) < sinks.mass ? lo : hi) = mid;
      if (last) break;
    }
    for (int64_t k = 0; k < d; ++k) c.queries(i, k) = tilted(hi, k);
  }
}

// The direction to move query row i's needle keys along: the part of q_i orthogonal to every
// other query row, so planting row i's needles leaves the other rows' logits unchanged (queries
// share directions through the sink tilt and the recency bias; moving along q_i itself would make
// one row's needle a strong competitor of another's). Falls back to q_i when the other rows span
// it (as many rows as channels).
std::vector<double> needle_direction(const Matrix& queries, int64_t i) {
  const int64_t n = queries.rows(), d = queries.cols();
  std::vector<double> r(static_cast<size_t>(d));
  for (int64_t e = 0; e < d; ++e) r[e] = queries(i, e);
  if (n > 1 && n - 1 < d) {
    Eigen::MatrixXd others(n - 1, d);
    for (int64_t j = 0, row = 0; j < n; ++j) {
      if (j == i) continue;
      for (int64_t e = 0; e < d; ++e) others(row, e) = queries(j, e);
      ++row;
    }
    const Eigen::Map<Eigen::VectorXd> q(r.data(), d);
    const Eigen::VectorXd coef = (others * others.transpose()).ldlt().solve(others * q);
    const Eigen::VectorXd rest = q - others.transpose() * coef;
    if (rest.squaredNorm() > 1e-6 * q.squaredNorm()) {
      for (int64_t e = 0; e < d; ++e) r[e] = rest[e];
    }
  }
  return r;
}

}  // namespace

// The largest |logit| / softcap a needle is planted for: tanh reaches 1 - 1e-9 near 10.7 times the
// cap, as far as float keys still resolve the step.
constexpr double kMaxCappedShare = 1.0 - 1e-9;

void plant_needles(Case& c, const NeedleProfile& needles, int64_t protected_leading) {
  const int64_t t = c.keys.rows(), d = c.keys.cols();
  const auto& depths = needles.depths;
  c.needles.clear();
  c.needle_depths = depths;
  if (depths.empty()) return;
  std::vector<bool> taken(static_cast<size_t>(t), false);
  for (int64_t j = 0; j < std::min(protected_leading, t); ++j) taken[j] = true;
  const double inv_sqrt_d = 1.0 / std::sqrt(double(d));
  const double share = needles.mass / double(needles.per_query);
  // The queries' products with the keys; a key an earlier query's needles moved since those
  // products were taken (`moved`) is taken again.
  QueryKeyProducts products(c.queries, c.keys);
  std::vector<int64_t> moved;
  std::vector<double> l(static_cast<size_t>(t));
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    const float* q = c.queries.row(i);
    if (dot(q, q, d) == 0.0) continue;  // a zero query attends uniformly: no key can be made to stand out
    std::vector<Needle> mine;
    for (int64_t n = 0; n < needles.per_query; ++n) {
      const int64_t depth = (i * needles.per_query + n) % static_cast<int64_t>(depths.size());
      int64_t pos = std::clamp<int64_t>(std::llround(depths[depth] * double(t - 1)), 0, t - 1);
      for (int64_t step = 0; step < t && taken[pos]; ++step) pos = (pos + 1) % t;
      if (taken[pos]) break;  // more needles than free tokens
      taken[pos] = true;
      mine.push_back({i, pos, depth});
    }
    if (mine.empty()) continue;
    bool fresh = false;
    const double* taken_products = products.row(i, &fresh);
    if (fresh) moved.clear();
    for (int64_t j = 0; j < t; ++j) l[j] = taken_products[j] * inv_sqrt_d;
    for (int64_t j : moved) l[j] = dot(q, c.keys.row(j), d) * inv_sqrt_d;
    // p_needle = share when its (capped) logit is log(share / (1 - total)) above the others'
    // log-sum-exp; under a softcap c the needle's own logit is then c · atanh(target / c).
    std::vector<double> rest = l;
    for (double& x : rest) x = capped_logit(x, c.logit_softcap);
    for (const Needle& n : mine) rest[n.token] = -INFINITY;
    double target = std::log(share / (1.0 - share * double(mine.size()))) + logsumexp(rest);
    if (const double cap = c.logit_softcap; cap > 0.0) {
      if (!(std::abs(target) < kMaxCappedShare * cap)) {
        throw InputError("workload: under a logit softcap of " + detail::significant(cap, 4) + " no needle holds " +
                         detail::significant(share, 3) + " of a query's attention over " + std::to_string(t) +
                         " tokens (its logit would have to reach the cap); raise the cap or lower "
                         "[workload.needles] mass");
      }
      target = cap * std::atanh(target / cap);
    }
    const std::vector<double> r = needle_direction(c.queries, i);
    double qr = 0.0;  // q_i . r: how much one unit along r moves row i's logit (times sqrt(D))
    for (int64_t e = 0; e < d; ++e) qr += double(q[e]) * r[e];
    for (const Needle& n : mine) {
      const double step = (target - l[n.token]) * std::sqrt(double(d)) / qr;
      float* k = c.keys.row(n.token);
      for (int64_t e = 0; e < d; ++e) k[e] = static_cast<float>(k[e] + step * r[e]);
      std::copy(k, k + d, c.keys_pre_rope.row(n.token));
      const int64_t p = c.positions[n.token];
      apply_rope({c.keys_pre_rope.row(n.token), 1, d}, std::span<const int64_t>(&p, 1), c.rope, /*inverse=*/true);
      moved.push_back(n.token);
    }
    c.needles.insert(c.needles.end(), mine.begin(), mine.end());
  }
}

namespace {

// Adds the recency component (RecencyProfile) along a drawn direction u: g·u to every query and
// g·exp(-age/tokens)·u to every non-sink key, with g² / sqrt(D) = strength. Applied to the cached
// (post-RoPE) keys, with the pre-RoPE keys kept consistent through the inverse rotation.
void add_recency(Case& c, const WorkloadConfig& cfg, Sampler& rng) {
  const int64_t t = c.keys.rows(), d = c.keys.cols();
  const std::vector<double> u = rng.unit_vector(d);
  const double g = std::sqrt(cfg.recency.strength * std::sqrt(double(d)));
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    for (int64_t e = 0; e < d; ++e) c.queries(i, e) = static_cast<float>(c.queries(i, e) + g * u[e]);
  }
  // The rows' deltas are un-rotated a block at a time: each apply_rope call sets up its frequencies
  // (one pow per channel pair), which one call per row repeated for every row.
  constexpr int64_t kBlock = 256;
  Matrix delta(kBlock, d);
  for (int64_t j0 = std::min(cfg.sinks.count, t); j0 < t; j0 += kBlock) {
    const int64_t rows = std::min(kBlock, t - j0);
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t j = j0 + r;
      const double w = g * std::exp(-double(t - 1 - j) / cfg.recency.tokens);
      for (int64_t e = 0; e < d; ++e) {
        delta(r, e) = static_cast<float>(w * u[e]);
        c.keys(j, e) += delta(r, e);
      }
    }
    const std::span<const int64_t> positions = std::span<const int64_t>(c.positions).subspan(size_t(j0), size_t(rows));
    apply_rope({delta.data(), rows, d}, positions, cfg.rope, /*inverse=*/true);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t e = 0; e < d; ++e) c.keys_pre_rope(j0 + r, e) += delta(r, e);
    }
  }
}

// The channels whose RoPE pair lies in the workload's outlier band: pair p rotates at theta^(-2p/D)
// (a rope_scaling slows the slow pairs further and keeps the order), so p / (D/2 - 1) runs from 0
// (fastest) to 1 (slowest). rotate_half pairs p with p + D/2,
// interleaved 2p with 2p + 1 (rope.h); without RoPE the same index still names the band.
std::vector<int64_t> outlier_candidates(const WorkloadConfig& cfg) {
  const int64_t d = cfg.head_dim, pairs = std::max<int64_t>(d / 2, 1);
  std::vector<int64_t> out;
  for (int64_t e = 0; e < d; ++e) {
    const int64_t p = cfg.rope.convention == RopeConvention::interleaved ? e / 2 : e % pairs;
    const double f = pairs > 1 ? double(p) / double(pairs - 1) : 0.0;
    if (f >= cfg.keys.outlier_band_low && f <= cfg.keys.outlier_band_high) out.push_back(e);
  }
  return out;
}

// The channel that RoPE rotates together with channel e (rope.h's pairing).
int64_t rope_partner(const WorkloadConfig& cfg, int64_t e) {
  const int64_t half = cfg.head_dim / 2;
  if (cfg.rope.convention == RopeConvention::interleaved) return e ^ 1;
  return e < half ? e + half : e - half;
}

// `outlier_count` channels drawn without replacement from the band (a partial Fisher-Yates shuffle);
// with outlier_pairs, outlier_count / 2 pairs drawn by their first channel.
std::vector<int64_t> draw_outlier_channels(const WorkloadConfig& cfg, Sampler& rng) {
  std::vector<int64_t> all = outlier_candidates(cfg);
  if (cfg.keys.outlier_pairs) {
    std::erase_if(all, [&](int64_t e) { return e > rope_partner(cfg, e); });
  }
  const int64_t n = static_cast<int64_t>(all.size());
  const int64_t draws = cfg.keys.outlier_pairs ? cfg.keys.outlier_count / 2 : cfg.keys.outlier_count;
  for (int64_t i = 0; i < draws; ++i) {
    std::uniform_int_distribution<int64_t> pick(i, n - 1);
    std::swap(all[i], all[pick(rng.engine())]);
  }
  all.resize(static_cast<size_t>(draws));
  if (cfg.keys.outlier_pairs) {
    for (int64_t i = 0; i < draws; ++i) all.push_back(rope_partner(cfg, all[i]));
  }
  std::sort(all.begin(), all.end());
  return all;
}

CalibrationSample slice_sample(const Case& c, int64_t first, int64_t count) {
  CalibrationSample s;
  s.keys = copy_of(c.keys.view().row_range(first, count));
  s.values = copy_of(c.values.view().row_range(first, count));
  s.positions.assign(c.positions.begin() + first, c.positions.begin() + first + count);
  s.head_rows = count;
  return s;
}

CalibrationSample calibration_set(const WorkloadConfig& cfg, uint64_t seed, int64_t layer, int64_t kv_head,
                                  int64_t skip);

// Keeps the last `n` tokens of `c` (keys before and after RoPE, values, positions).
void keep_last_tokens(Case& c, int64_t n) {
  const int64_t first = c.keys.rows() - n;
  c.keys_pre_rope = copy_of(std::as_const(c.keys_pre_rope).view().row_range(first, n));
  c.keys = copy_of(std::as_const(c.keys).view().row_range(first, n));
  c.values = copy_of(std::as_const(c.values).view().row_range(first, n));
  c.positions.erase(c.positions.begin(), c.positions.begin() + first);
}

// Rows [first, first + count) of `c` appended to `out` at row `at`.
void append_rows(CalibrationSample& out, int64_t at, const Case& c, int64_t first, int64_t count) {
  const size_t d = static_cast<size_t>(c.keys.cols());
  std::copy_n(c.keys.row(first), size_t(count) * d, out.keys.row(at));
  std::copy_n(c.values.row(first), size_t(count) * d, out.values.row(at));
  std::copy_n(c.positions.begin() + first, count, out.positions.begin() + at);
}

}  // namespace

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::uniform:
      return "uniform";
    case Distribution::laplace:
      return "laplace";
    case Distribution::normal:
      break;
  }
  return "normal";
}

namespace {

void validate_layer(const WorkloadConfig& cfg) {
  for (int64_t ch : cfg.keys.outlier_channels) {
    if (ch < 0 || ch >= cfg.head_dim) {
      throw InputError("workload: outlier channel " + std::to_string(ch) + " is outside head_dim " +
                       std::to_string(cfg.head_dim));
    }
  }
  if (cfg.keys.outlier_count < 0 || cfg.keys.outlier_count > cfg.head_dim) {
    throw InputError("workload: outlier_count must be in 0.." + std::to_string(cfg.head_dim));
  }
  if (!(cfg.keys.outlier_band_low >= 0.0 && cfg.keys.outlier_band_low <= cfg.keys.outlier_band_high &&
        cfg.keys.outlier_band_high <= 1.0)) {
    throw InputError("workload: outlier_band must be [low, high] with 0 <= low <= high <= 1");
  }
  if (cfg.keys.outlier_pairs && (cfg.keys.outlier_count % 2 != 0 || cfg.head_dim % 2 != 0)) {
    throw InputError("workload: outlier_pairs needs an even outlier_count and an even head_dim");
  }
  const int64_t in_band = static_cast<int64_t>(outlier_candidates(cfg).size());
  if (cfg.keys.outlier_count > in_band) {
    throw InputError("workload: outlier_count " + std::to_string(cfg.keys.outlier_count) + " exceeds the " +
                     std::to_string(in_band) + " channels in outlier_band");
  }
  if (cfg.sinks.count < 0 || cfg.sinks.count >= cfg.tokens) {
    throw InputError("workload: sinks count must be in 0.." + std::to_string(cfg.tokens - 1));
  }
  if (cfg.sinks.mass < 0.0 || cfg.sinks.mass >= 1.0) throw InputError("workload: sinks mass must be in [0, 1)");
  if (!cfg.needles.depths.empty() && cfg.tokens - cfg.sinks.count < cfg.needles.per_query + 1) {
    throw InputError("workload: " + std::to_string(cfg.needles.per_query) +
                     " needle(s) per query need at least one more token besides the sinks (tokens = " +
                     std::to_string(cfg.tokens) + ", sinks " + std::to_string(cfg.sinks.count) + ")");
  }
  const CalibrationProfile& cal = cfg.calibration;
  const int64_t skip = cal.include_sinks ? 0 : cfg.sinks.count;
  if (cal.tokens > 0 && cal.source == CalibrationSource::same && skip + cal.tokens > cfg.tokens) {
    throw InputError("workload: calibration tokens " + std::to_string(cal.tokens) +
                     (skip > 0 ? " after " + std::to_string(skip) + " sink tokens" : std::string()) +
                     " exceed the context of " + std::to_string(cfg.tokens) + " tokens (source = \"same\")");
  }
  if (cal.samples < 1) throw InputError("workload: calibration samples must be >= 1");
  if (cal.source == CalibrationSource::same && (cal.samples > 1 || cal.granularity == CalibrationGranularity::layer)) {
    throw InputError("workload: calibration samples > 1 and granularity = \"layer\" need source = \"fresh\"");
  }
  const int64_t set_heads = cal.granularity == CalibrationGranularity::layer ? cfg.kv_heads : 1;
  if (cal.tokens > 0 && set_heads * cal.samples * cal.tokens > kMaxCalibrationRows) {
    throw InputError("workload: the calibration set of " + std::to_string(set_heads) + " head(s) x " +
                     std::to_string(cal.samples) + " samples x " + std::to_string(cal.tokens) + " tokens exceeds " +
                     std::to_string(kMaxCalibrationRows) + " rows (it is held in memory per case); lower samples or tokens");
  }
  if (cal.tokens > 0 && cal.source == CalibrationSource::fresh && cal.include_sinks && cal.tokens <= cfg.sinks.count) {
    throw InputError("workload: calibration tokens must exceed the " + std::to_string(cfg.sinks.count) +
                     " sink tokens they include");
  }
}

bool among(std::span<const int64_t> layers, int64_t layer) {
  return std::find(layers.begin(), layers.end(), layer) != layers.end();
}

}  // namespace

int64_t attended_tokens(int64_t tokens, int64_t window, std::span<const int64_t> sliding_layers, int64_t layer) {
  return window > 0 && among(sliding_layers, layer) ? std::min(tokens, window) : tokens;
}

RopeConfig layer_rope(const RopeConfig& rope, double sliding_theta, std::span<const int64_t> sliding_layers,
                      int64_t layer) {
  if (sliding_theta <= 0 || !among(sliding_layers, layer)) return rope;
  return {rope.enabled, sliding_theta, rope.convention, {}};
}

bool windowed(const WorkloadConfig& cfg, int64_t layer) {
  return attended_tokens(cfg.tokens, cfg.sliding_window, cfg.sliding_layers, layer) < cfg.tokens;
}

WorkloadConfig layer_config(const WorkloadConfig& cfg, int64_t layer) {
  WorkloadConfig out = cfg;
  out.overrides.clear();
  for (const LayerOverride& o : cfg.overrides) {
    if (std::find(o.layers.begin(), o.layers.end(), layer) == o.layers.end()) continue;
    if (o.outlier_channels) {
      out.keys.outlier_channels = *o.outlier_channels;
      out.keys.outlier_count = 0;
    }
    if (o.outlier_count) {
      out.keys.outlier_count = *o.outlier_count;
      out.keys.outlier_channels.clear();
    }
    if (o.outlier_scale) out.keys.outlier_scale = *o.outlier_scale;
    if (o.outlier_offset) out.keys.outlier_offset = *o.outlier_offset;
    if (o.channel_offset) out.keys.channel_offset = *o.channel_offset;
    if (o.sink_count) out.sinks.count = *o.sink_count;
    if (o.sink_key_norm) out.sinks.key_norm = *o.sink_key_norm;
    if (o.sink_mass) out.sinks.mass = *o.sink_mass;
  }
  out.rope = layer_rope(cfg.rope, cfg.sliding_rope_theta, cfg.sliding_layers, layer);
  return out;
}

void validate(const WorkloadConfig& cfg) {
  if (cfg.tokens < 1) throw InputError("workload: tokens must be >= 1");
  if (cfg.head_dim < 1) throw InputError("workload: head_dim must be >= 1");
  if (cfg.queries < 1) throw InputError("workload: queries must be >= 1");
  if (cfg.layers < 1 || cfg.kv_heads < 1 || cfg.q_per_kv < 1) {
    throw InputError("workload: layers, kv_heads and q_per_kv must each be >= 1");
  }
  if (cfg.rope.enabled && cfg.head_dim % 2 != 0) throw InputError("workload: RoPE needs an even head_dim");
  if (cfg.rope.enabled && !(cfg.rope.theta > 1.0)) throw InputError("workload: rope theta must be > 1");
  if (!(cfg.logit_softcap >= 0.0) || !std::isfinite(cfg.logit_softcap)) {
    throw InputError("workload: the logit softcap must be a finite number >= 0 (0: none)");
  }
  if (cfg.sliding_rope_theta != 0.0 && !(cfg.sliding_rope_theta > 1.0)) {
    throw InputError("workload: the sliding layers' rope theta must be > 1");
  }
  if (cfg.needles.mass <= 0.0 || cfg.needles.mass >= 1.0) throw InputError("workload: needles mass must be in (0, 1)");
  if (cfg.needles.per_query < 1) throw InputError("workload: needles per_query must be >= 1");
  for (double depth : cfg.needles.depths) {
    if (depth < 0.0 || depth > 1.0) throw InputError("workload: needle depths must be fractions in [0, 1]");
  }
  if (cfg.recency.strength < 0.0 || !(cfg.recency.tokens > 0.0)) {
    throw InputError("workload: recency strength must be >= 0 and its decay tokens > 0");
  }
  if (cfg.calibration.tokens < 0) throw InputError("workload: calibration tokens must be >= 0");
  if (cfg.sliding_window < 0 || (cfg.sliding_window > 0) != !cfg.sliding_layers.empty()) {
    throw InputError("workload: a sliding window (>= 1 token) and the layers that slide go together (window " +
                     std::to_string(cfg.sliding_window) + ", " + std::to_string(cfg.sliding_layers.size()) + " layers)");
  }
  for (int64_t layer : cfg.sliding_layers) {
    if (layer < 0 || layer >= cfg.layers) {
      throw InputError("workload: sliding layer " + std::to_string(layer) + " is outside 0.." +
                       std::to_string(cfg.layers - 1));
    }
  }
  const bool tilts = !cfg.needles.depths.empty() || cfg.sinks.count > 0 ||
                     std::any_of(cfg.overrides.begin(), cfg.overrides.end(), [](const LayerOverride& o) {
                       return o.sink_count.value_or(0) > 0;
                     });
  if (tilts && !(cfg.query.scale > 0.0)) {
    throw InputError("workload: needles and sinks need queries with scale > 0 (queries_profile.scale)");
  }
  const double rows = double(cfg.queries) * double(cfg.q_per_kv);
  const double cells = double(cfg.tokens) * double(cfg.head_dim), scores = double(cfg.tokens) * rows;
  if (cells > double(int64_t(1) << 28) || scores > double(int64_t(1) << 28)) {
    throw InputError("workload: tokens x head_dim and tokens x queries (all query heads) must each stay below 2^28 (" +
                     std::to_string(cfg.tokens) + " tokens, head_dim " + std::to_string(cfg.head_dim) + ", " +
                     std::to_string(cfg.queries * cfg.q_per_kv) + " queries)");
  }
  validate_layer(cfg);
  for (const LayerOverride& o : cfg.overrides) {
    for (int64_t layer : o.layers) {
      if (layer < 0 || layer >= cfg.layers) {
        throw InputError("workload: override layer " + std::to_string(layer) + " is outside 0.." +
                         std::to_string(cfg.layers - 1));
      }
      try {
        validate_layer(layer_config(cfg, layer));
      } catch (const InputError& e) {
        throw InputError("layer " + std::to_string(layer) + ": " + e.what());
      }
    }
  }
}

namespace {

// One case of an already layer-resolved config. `fresh_draw` > 0 draws the tokens from an independent
// stream while keeping the structure (outlier channels, offsets) of (seed, layer, head).
Case generate(const WorkloadConfig& cfg, uint64_t seed, int64_t layer, int64_t kv_head, uint64_t fresh_draw) {
  const int64_t t = cfg.tokens, d = cfg.head_dim;
  const uint64_t stream = splitmix64(splitmix64(splitmix64(seed) ^ uint64_t(layer)) ^ uint64_t(kv_head));
  Sampler rng(stream);
  Case c;
  c.seed = seed;
  c.layer = layer;
  c.kv_head = kv_head;
  c.q_per_kv = cfg.q_per_kv;

  // Draw order is fixed: outlier channels, offsets, K, V, queries, sink direction, recency direction.
  c.outlier_channels = cfg.keys.outlier_channels;
  if (c.outlier_channels.empty() && cfg.keys.outlier_count > 0) c.outlier_channels = draw_outlier_channels(cfg, rng);
  std::vector<double> offsets(static_cast<size_t>(d), 0.0);
  if (cfg.keys.channel_offset > 0.0) {
    for (double& o : offsets) o = cfg.keys.channel_offset * rng.normal();
  }
  // Any fixed constant separates the fresh stream; this one is the first 64 fractional bits of sqrt(2).
  // Draw i of a calibration set takes the i-th stream after it (draw 1 the constant itself).
  if (fresh_draw > 0) rng = Sampler(splitmix64((stream ^ 0x6a09e667f3bcc908ull) + (fresh_draw - 1)));
  c.keys_pre_rope = Matrix(t, d);
  rng.fill(c.keys_pre_rope, cfg.keys.distribution, cfg.keys.scale);
  c.values = Matrix(t, d);
  rng.fill(c.values, cfg.values.distribution, cfg.values.scale);
  c.queries = Matrix(cfg.queries * cfg.q_per_kv, d);
  rng.fill(c.queries, cfg.query.distribution, cfg.query.scale);
  if (cfg.query.outlier_scale != 1.0) {
    for (int64_t r = 0; r < c.queries.rows(); ++r) {
      for (int64_t ch : c.outlier_channels) c.queries(r, ch) = static_cast<float>(c.queries(r, ch) * cfg.query.outlier_scale);
    }
  }

  // The outliers' constant part is structure (the same on every draw of the head) and comes from
  // its own stream, so a workload without it draws exactly what it drew before the knob existed.
  std::vector<double> outlier_bias(c.outlier_channels.size(), 0.0);
  if (cfg.keys.outlier_offset > 0.0) {
    Sampler structure(splitmix64(stream ^ 0xbb67ae8584caa73bull));  // sqrt(3)'s fractional bits
    for (double& b : outlier_bias) {
      b = (structure.normal() < 0.0 ? -1.0 : 1.0) * cfg.keys.outlier_offset * cfg.keys.scale;
    }
  }
  for (int64_t r = 0; r < t; ++r) {
    float* k = c.keys_pre_rope.row(r);
    for (size_t i = 0; i < c.outlier_channels.size(); ++i) {
      const int64_t ch = c.outlier_channels[i];
      k[ch] = static_cast<float>(k[ch] * cfg.keys.outlier_scale + outlier_bias[i]);
    }
    if (cfg.keys.channel_offset > 0.0) {
      for (int64_t e = 0; e < d; ++e) k[e] = static_cast<float>(k[e] + offsets[e]);
    }
  }

  if (cfg.sinks.count > 0) {
    const std::vector<double> u = rng.unit_vector(d);
    std::vector<double> key_norms(static_cast<size_t>(t));
    for (int64_t r = 0; r < t; ++r) key_norms[r] = std::sqrt(dot(c.keys_pre_rope.row(r), c.keys_pre_rope.row(r), d));
    std::nth_element(key_norms.begin(), key_norms.begin() + t / 2, key_norms.end());
    const double length = cfg.sinks.key_norm * key_norms[t / 2];
    for (int64_t r = 0; r < cfg.sinks.count; ++r) {
      for (int64_t e = 0; e < d; ++e) {
        c.keys_pre_rope(r, e) = static_cast<float>(length * u[e]);
        c.values(r, e) = static_cast<float>(c.values(r, e) * cfg.sinks.value_scale);
      }
    }
  }

  c.positions.resize(static_cast<size_t>(t));
  std::iota(c.positions.begin(), c.positions.end(), 0);
  c.query_position = t;
  c.rope = cfg.rope;
  c.logit_softcap = cfg.logit_softcap;
  c.keys = c.keys_pre_rope;
  apply_rope(c.keys, c.positions, cfg.rope);
  const std::vector<int64_t> query_positions(static_cast<size_t>(c.queries.rows()), c.query_position);
  apply_rope(c.queries, query_positions, cfg.rope);

  if (cfg.recency.strength > 0.0) add_recency(c, cfg, rng);
  if (cfg.sinks.count > 0) tilt_queries_toward_sinks(c, cfg.sinks);
  const CalibrationProfile& cal = cfg.calibration;
  const int64_t skip = cal.include_sinks ? 0 : cfg.sinks.count;
  int64_t protected_leading = cfg.sinks.count;
  if (fresh_draw == 0 && windowed(cfg, layer)) {
    // A calibration tool observes every key the model writes, the window's past included: its
    // sample is taken before the case is cut to the tokens the decoding token attends to.
    if (cal.tokens > 0 && cal.source == CalibrationSource::same) c.calibration = slice_sample(c, skip, cal.tokens);
    const int64_t cut = t - cfg.sliding_window;
    keep_last_tokens(c, cfg.sliding_window);
    protected_leading = std::max<int64_t>(0, cfg.sinks.count - cut);
  }
  plant_needles(c, cfg.needles, protected_leading);

  if (cal.tokens > 0 && c.calibration.empty()) {
    if (cal.source == CalibrationSource::same) {
      c.calibration = slice_sample(c, skip, cal.tokens);
    } else {
      c.calibration = calibration_set(cfg, seed, layer, kv_head, skip);
    }
  }
  return c;
}

// The fresh calibration set of case (seed, layer, kv_head): `samples` draws of each head it spans
// (the case's own, or every KV head of the layer), each `tokens` tokens after `skip` sink tokens.
CalibrationSample calibration_set(const WorkloadConfig& cfg, uint64_t seed, int64_t layer, int64_t kv_head,
                                  int64_t skip) {
  const CalibrationProfile& cal = cfg.calibration;
  WorkloadConfig fresh = cfg;
  fresh.tokens = skip + cal.tokens;
  fresh.queries = 1;
  fresh.q_per_kv = 1;
  fresh.needles.depths.clear();
  fresh.calibration = {};
  const bool layer_wide = cal.granularity == CalibrationGranularity::layer;
  const int64_t first_head = layer_wide ? 0 : kv_head, heads = layer_wide ? cfg.kv_heads : 1;
  const int64_t per_head = cal.samples * cal.tokens;
  CalibrationSample out;
  out.keys = Matrix(heads * per_head, cfg.head_dim);
  out.values = Matrix(heads * per_head, cfg.head_dim);
  out.positions.resize(static_cast<size_t>(heads * per_head));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < cal.samples; ++i) {
      const Case draw = generate(fresh, seed, layer, first_head + h, static_cast<uint64_t>(i + 1));
      append_rows(out, h * per_head + i * cal.tokens, draw, skip, cal.tokens);
    }
  }
  out.head_first = (kv_head - first_head) * per_head;
  out.head_rows = per_head;
  return out;
}

}  // namespace

Case generate_case(const WorkloadConfig& cfg, uint64_t seed, int64_t layer, int64_t kv_head) {
  validate(cfg);
  if (layer < 0 || layer >= cfg.layers || kv_head < 0 || kv_head >= cfg.kv_heads) {
    throw InputError("workload: case (layer " + std::to_string(layer) + ", kv head " + std::to_string(kv_head) +
                     ") is outside " + std::to_string(cfg.layers) + " layers x " + std::to_string(cfg.kv_heads) +
                     " KV heads");
  }
  return generate(layer_config(cfg, layer), seed, layer, kv_head, /*fresh_draw=*/0);
}

Case case_from_tensors(Matrix keys, Matrix values, Matrix queries) {
  Case c;
  c.keys_pre_rope = keys;
  c.keys = std::move(keys);
  c.values = std::move(values);
  c.queries = std::move(queries);
  c.positions.resize(static_cast<size_t>(c.keys.rows()));
  std::iota(c.positions.begin(), c.positions.end(), 0);
  c.query_position = c.keys.rows();
  return c;
}

}  // namespace kvtune
