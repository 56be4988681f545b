#include "kvtune/workload.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kvtune/error.h"

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

// Unit-variance draws, so `scale` is the standard deviation whatever the shape.
class Sampler {
 public:
  explicit Sampler(uint64_t seed) : engine_(seed) {}
  std::mt19937_64& engine() { return engine_; }

  void fill(Matrix& m, Distribution d, double scale) {
    float* p = m.data();
    for (int64_t i = 0; i < m.size(); ++i) p[i] = static_cast<float>(scale * draw(d));
  }

  double normal() { return normal_(engine_); }

 private:
  double draw(Distribution d) {
    switch (d) {
      case Distribution::uniform:
        return std::sqrt(3.0) * (2.0 * uniform_(engine_) - 1.0);
      case Distribution::laplace: {
        const double u = uniform_(engine_) - 0.5;
        return -std::copysign(1.0, u) * std::log1p(-2.0 * std::abs(u)) / std::sqrt(2.0);
      }
      case Distribution::normal:
        break;
    }
    return normal_(engine_);
  }

  std::mt19937_64 engine_;
  std::normal_distribution<double> normal_{0.0, 1.0};
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

// Tilts each query toward the sink keys until they hold `mass` of its attention (bisection on the
// tilt; the sink mass grows monotonically with it because the sinks share one direction).
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
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    for (int64_t j = 0; j < t; ++j) {
      a[j] = dot(c.queries.row(i), c.keys.row(j), d) * inv_sqrt_d;
      double bj = 0.0;
      for (int64_t k = 0; k < d; ++k) bj += w[k] * c.keys(j, k);
      b[j] = bj * inv_sqrt_d;
    }
    auto sink_mass = [&](double alpha) {
      for (int64_t j = 0; j < t; ++j) l[j] = a[j] + alpha * b[j];
      const double lse = logsumexp(l);
      double m = 0.0;
      for (int64_t j = 0; j < sinks.count; ++j) m += std::exp(l[j] - lse);
      return m;
    };
    if (sink_mass(0.0) >= sinks.mass) continue;
    double lo = 0.0, hi = 1.0;
    for (int it = 0; it < 60 && sink_mass(hi) < sinks.mass; ++it) hi *= 2.0;
    for (int it = 0; it < 60; ++it) {
      const double mid = 0.5 * (lo + hi);
      (sink_mass(mid) < sinks.mass ? lo : hi) = mid;
    }
    for (int64_t k = 0; k < d; ++k) c.queries(i, k) = static_cast<float>(c.queries(i, k) + hi * w[k]);
  }
}

// Plants query i's needle: moves the key at the needle position along q_i until its reference
// attention mass is `mass`, then writes the pre-RoPE key back.
void plant_needles(Case& c, const WorkloadConfig& cfg) {
  const int64_t t = c.keys.rows(), d = c.keys.cols();
  const auto& depths = cfg.needles.depths;
  c.needles.assign(static_cast<size_t>(c.queries.rows()), -1);
  if (depths.empty()) return;
  std::vector<bool> taken(static_cast<size_t>(t), false);
  for (int64_t j = 0; j < std::min(cfg.sinks.count, t); ++j) taken[j] = true;
  const double inv_sqrt_d = 1.0 / std::sqrt(double(d));
  std::vector<double> l(static_cast<size_t>(t));
  for (int64_t i = 0; i < c.queries.rows(); ++i) {
    const double depth = depths[static_cast<size_t>(i) % depths.size()];
    int64_t pos = std::clamp<int64_t>(std::llround(depth * double(t - 1)), 0, t - 1);
    for (int64_t step = 0; step < t && taken[pos]; ++step) pos = (pos + 1) % t;
    if (taken[pos]) continue;  // more needles than free tokens
    taken[pos] = true;
    c.needles[i] = pos;
    const float* q = c.queries.row(i);
    for (int64_t j = 0; j < t; ++j) l[j] = dot(q, c.keys.row(j), d) * inv_sqrt_d;
    const double m = cfg.needles.mass;
    const double target = std::log(m / (1.0 - m)) + logsumexp(l, pos);
    const double qq = dot(q, q, d);
    if (qq == 0.0) {  // a zero query attends uniformly: no key can be made to stand out
      c.needles[i] = -1;
      continue;
    }
    const double step = (target - l[pos]) * std::sqrt(double(d)) / qq;
    float* k = c.keys.row(pos);
    for (int64_t e = 0; e < d; ++e) k[e] = static_cast<float>(k[e] + step * q[e]);
    std::copy(k, k + d, c.keys_pre_rope.row(pos));
    const int64_t p = c.positions[pos];
    apply_rope({c.keys_pre_rope.row(pos), 1, d}, std::span<const int64_t>(&p, 1), cfg.rope, /*inverse=*/true);
  }
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

void validate(const WorkloadConfig& cfg) {
  if (cfg.tokens < 1) throw InputError("workload: tokens must be >= 1");
  if (cfg.head_dim < 1) throw InputError("workload: head_dim must be >= 1");
  if (cfg.queries < 1) throw InputError("workload: queries must be >= 1");
  for (int64_t ch : cfg.keys.outlier_channels) {
    if (ch < 0 || ch >= cfg.head_dim) {
      throw InputError("workload: outlier channel " + std::to_string(ch) + " is outside head_dim " +
                       std::to_string(cfg.head_dim));
    }
  }
  if (cfg.keys.outlier_count < 0 || cfg.keys.outlier_count > cfg.head_dim) {
    throw InputError("workload: outlier_count must be in 0.." + std::to_string(cfg.head_dim));
  }
  if (cfg.rope.enabled && cfg.head_dim % 2 != 0) throw InputError("workload: RoPE needs an even head_dim");
  if (cfg.rope.enabled && !(cfg.rope.theta > 1.0)) throw InputError("workload: rope theta must be > 1");
  if (cfg.sinks.count < 0 || cfg.sinks.count >= cfg.tokens) {
    throw InputError("workload: sinks count must be in 0.." + std::to_string(cfg.tokens - 1));
  }
  if (cfg.sinks.mass < 0.0 || cfg.sinks.mass >= 1.0) throw InputError("workload: sinks mass must be in [0, 1)");
  if (cfg.needles.mass <= 0.0 || cfg.needles.mass >= 1.0) throw InputError("workload: needles mass must be in (0, 1)");
  if ((!cfg.needles.depths.empty() || cfg.sinks.count > 0) && !(cfg.query.scale > 0.0)) {
    throw InputError("workload: needles and sinks need queries with scale > 0 (queries_profile.scale)");
  }
  const double cells = double(cfg.tokens) * double(cfg.head_dim), scores = double(cfg.tokens) * double(cfg.queries);
  if (cells > double(int64_t(1) << 28) || scores > double(int64_t(1) << 28)) {
    throw InputError("workload: tokens x head_dim and tokens x queries must each stay below 2^28 (" +
                     std::to_string(cfg.tokens) + " tokens, head_dim " + std::to_string(cfg.head_dim) + ", " +
                     std::to_string(cfg.queries) + " queries)");
  }
  if (!cfg.needles.depths.empty() && cfg.tokens - cfg.sinks.count < 2) {
    throw InputError("workload: needles need at least two tokens besides the sinks (tokens = " +
                     std::to_string(cfg.tokens) + ")");
  }
  for (double depth : cfg.needles.depths) {
    if (depth < 0.0 || depth > 1.0) throw InputError("workload: needle depths must be fractions in [0, 1]");
  }
}

Case generate_case(const WorkloadConfig& cfg, uint64_t seed, int64_t layer, int64_t kv_head) {
  validate(cfg);
  const int64_t t = cfg.tokens, d = cfg.head_dim;
  Sampler rng(splitmix64(splitmix64(splitmix64(seed) ^ uint64_t(layer)) ^ uint64_t(kv_head)));
  Case c;
  c.seed = seed;
  c.layer = layer;
  c.kv_head = kv_head;

  // Draw order is fixed: outlier channels, offsets, K, V, queries, sink direction.
  c.outlier_channels = cfg.keys.outlier_channels;
  if (c.outlier_channels.empty() && cfg.keys.outlier_count > 0) {
    std::vector<int64_t> all(static_cast<size_t>(d));
    std::iota(all.begin(), all.end(), 0);
    for (int64_t i = 0; i < cfg.keys.outlier_count; ++i) {
      std::uniform_int_distribution<int64_t> pick(i, d - 1);
      std::swap(all[i], all[pick(rng.engine())]);
    }
    c.outlier_channels.assign(all.begin(), all.begin() + cfg.keys.outlier_count);
    std::sort(c.outlier_channels.begin(), c.outlier_channels.end());
  }
  std::vector<double> offsets(static_cast<size_t>(d), 0.0);
  if (cfg.keys.channel_offset > 0.0) {
    for (double& o : offsets) o = cfg.keys.channel_offset * rng.normal();
  }
  c.keys_pre_rope = Matrix(t, d);
  rng.fill(c.keys_pre_rope, cfg.keys.distribution, cfg.keys.scale);
  c.values = Matrix(t, d);
  rng.fill(c.values, cfg.values.distribution, cfg.values.scale);
  c.queries = Matrix(cfg.queries, d);
  rng.fill(c.queries, cfg.query.distribution, cfg.query.scale);

  for (int64_t r = 0; r < t; ++r) {
    float* k = c.keys_pre_rope.row(r);
    for (int64_t ch : c.outlier_channels) k[ch] = static_cast<float>(k[ch] * cfg.keys.outlier_scale);
    if (cfg.keys.channel_offset > 0.0) {
      for (int64_t e = 0; e < d; ++e) k[e] = static_cast<float>(k[e] + offsets[e]);
    }
  }

  if (cfg.sinks.count > 0) {
    std::vector<double> u(static_cast<size_t>(d));
    double norm = 0.0;
    for (double& v : u) {
      v = rng.normal();
      norm += v * v;
    }
    norm = std::sqrt(norm);
    std::vector<double> key_norms(static_cast<size_t>(t));
    for (int64_t r = 0; r < t; ++r) key_norms[r] = std::sqrt(dot(c.keys_pre_rope.row(r), c.keys_pre_rope.row(r), d));
    std::nth_element(key_norms.begin(), key_norms.begin() + t / 2, key_norms.end());
    const double length = cfg.sinks.key_norm * key_norms[t / 2];
    for (int64_t r = 0; r < cfg.sinks.count; ++r) {
      for (int64_t e = 0; e < d; ++e) {
        c.keys_pre_rope(r, e) = static_cast<float>(length * u[e] / norm);
        c.values(r, e) = static_cast<float>(c.values(r, e) * cfg.sinks.value_scale);
      }
    }
  }

  c.positions.resize(static_cast<size_t>(t));
  std::iota(c.positions.begin(), c.positions.end(), 0);
  c.query_position = t;
  c.rope = cfg.rope;
  c.keys = c.keys_pre_rope;
  apply_rope(c.keys, c.positions, cfg.rope);
  const std::vector<int64_t> query_positions(static_cast<size_t>(cfg.queries), c.query_position);
  apply_rope(c.queries, query_positions, cfg.rope);

  if (cfg.sinks.count > 0) tilt_queries_toward_sinks(c, cfg.sinks);
  plant_needles(c, cfg);
  return c;
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
  c.needles.assign(static_cast<size_t>(c.queries.rows()), -1);
  return c;
}

}  // namespace kvtune
