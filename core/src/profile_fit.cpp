#include "kvtune/profile_fit.h"

#include <Eigen/Dense>
#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "first_repeat.h"
#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/safetensors.h"

namespace kvtune {
namespace {

// One (sample, layer, KV head) slice as the model computed it.
struct Slice {
  Matrix keys, keys_pre_rope, values;  // [T, D]
  Matrix queries;                      // [rows, D], every captured query of the group's heads
  std::vector<int64_t> positions;      // [T]
  std::vector<int64_t> query_positions;  // [rows]
};

Slice read_slice(const Capture& c, const SafetensorsFile& f, int64_t layer, int64_t sample, int64_t head,
                 int64_t tokens) {
  const CaptureSample& s = c.samples[size_t(sample)];
  Slice out;
  out.keys = f.read_rows("k", head, s.first, tokens);
  out.values = f.read_rows("v", head, s.first, tokens);
  const std::vector<int64_t> positions = f.read_integers("positions");
  out.positions.assign(positions.begin() + s.first, positions.begin() + s.first + tokens);
  if (c.k_pre_rope) {
    out.keys_pre_rope = f.read_rows("k_pre_rope", head, s.first, tokens);
  } else {
    out.keys_pre_rope = out.keys;
    if (c.rope.enabled) apply_rope(out.keys_pre_rope, out.positions, capture_layer_rope(c, layer), /*inverse=*/true);
  }
  // The sample's queries that attend within the prefix, of every query head of the group.
  const std::vector<int64_t> q_positions = f.read_integers("q_positions");
  const int64_t n = c.queries_per_sample, first = sample * n, last_position = out.positions.back();
  std::vector<int64_t> rows;
  for (int64_t i = first; i < first + n; ++i) {
    if (q_positions[size_t(i)] <= last_position) rows.push_back(i);
  }
  out.queries = Matrix(int64_t(rows.size()) * c.q_per_kv(), c.head_dim);
  int64_t r = 0;
  for (int64_t g = 0; g < c.q_per_kv(); ++g) {
    for (int64_t i : rows) {
      const Matrix q = f.read_rows("q", head * c.q_per_kv() + g, i, 1);
      std::copy_n(q.row(0), c.head_dim, out.queries.row(r++));
      out.query_positions.push_back(q_positions[size_t(i)]);
    }
  }
  scale_queries_to_model(c, out.queries);  // logits as the model scales them
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  return v[mid];
}

// The generator's distribution whose kurtosis (uniform 1.8, normal 3, Laplace 6) is nearest in log.
Distribution nearest_distribution(double kurtosis) {
  const std::pair<double, Distribution> shapes[] = {
      {1.8, Distribution::uniform}, {3.0, Distribution::normal}, {6.0, Distribution::laplace}};
  Distribution best = Distribution::normal;
  double gap = INFINITY;
  for (const auto& [k, d] : shapes) {
    const double g = std::abs(std::log(std::max(kurtosis, 1e-9) / k));
    if (g < gap) gap = g, best = d;
  }
  return best;
}

// exp(entropy of the normalized eigenvalues of the rows' covariance): 1 for one direction, D for
// isotropic rows.
double effective_rank(const Matrix& m, int64_t first) {
  const int64_t n = m.rows() - first, d = m.cols();
  if (n < 2) return 0.0;
  Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>> x(m.row(first), n, d);
  const Eigen::MatrixXd centered = x.cast<double>().rowwise() - x.cast<double>().colwise().mean();
  const Eigen::MatrixXd cov = centered.transpose() * centered / double(n - 1);
  const Eigen::VectorXd ev = Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd>(cov, Eigen::EigenvaluesOnly).eigenvalues();
  const double total = ev.cwiseMax(0.0).sum();
  if (total <= 0.0) return 0.0;
  double h = 0.0;
  for (int64_t i = 0; i < ev.size(); ++i) {
    const double p = std::max(ev[i], 0.0) / total;
    if (p > 0.0) h -= p * std::log(p);
  }
  return std::exp(h);
}

// Per-channel mean and std-dev of rows [first, T).
void channel_moments(const Matrix& m, int64_t first, std::vector<double>& mean, std::vector<double>& sd) {
  const int64_t n = m.rows() - first, d = m.cols();
  mean.assign(size_t(d), 0.0);
  sd.assign(size_t(d), 0.0);
  for (int64_t r = first; r < m.rows(); ++r) {
    for (int64_t e = 0; e < d; ++e) mean[e] += m(r, e);
  }
  for (double& v : mean) v /= double(n);
  for (int64_t r = first; r < m.rows(); ++r) {
    for (int64_t e = 0; e < d; ++e) sd[e] += (m(r, e) - mean[e]) * (m(r, e) - mean[e]);
  }
  for (double& v : sd) v = std::sqrt(v / double(std::max<int64_t>(n - 1, 1)));
}

// Mean fourth moment of the standardized entries of rows [first, T) on `channels`.
double kurtosis(const Matrix& m, int64_t first, const std::vector<double>& mean, const std::vector<double>& sd,
                const std::vector<int64_t>& channels) {
  double s4 = 0.0;
  int64_t n = 0;
  for (int64_t r = first; r < m.rows(); ++r) {
    for (int64_t e : channels) {
      if (sd[e] <= 0.0) continue;
      const double z = (m(r, e) - mean[e]) / sd[e];
      s4 += z * z * z * z;
      ++n;
    }
  }
  return n == 0 ? 3.0 : s4 / double(n);
}

// The pair index of channel e as a fraction of the spectrum: 0 fastest-rotating, 1 slowest (the
// generator's outlier_band), and e's rotary partner.
double band_position(int64_t e, int64_t d, RopeConvention convention) {
  const int64_t pairs = std::max<int64_t>(d / 2, 1);
  const int64_t p = convention == RopeConvention::interleaved ? e / 2 : e % pairs;
  return pairs > 1 ? double(p) / double(pairs - 1) : 0.0;
}
int64_t partner(int64_t e, int64_t d, RopeConvention convention) {
  if (convention == RopeConvention::interleaved) return e ^ 1;
  return e < d / 2 ? e + d / 2 : e - d / 2;
}

std::vector<double> row_norms(const Matrix& x) {
  std::vector<double> n(static_cast<size_t>(x.rows()));
  for (int64_t r = 0; r < x.rows(); ++r) {
    double s2 = 0.0;
    for (int64_t e = 0; e < x.cols(); ++e) s2 += double(x(r, e)) * x(r, e);
    n[size_t(r)] = std::sqrt(s2);
  }
  return n;
}

// Sums over one layer's slices; finish() turns them into the layer's measurement.
struct LayerAccumulator {
  LayerMeasurement m;
  double key_kurt = 0, value_kurt = 0, query_kurt = 0;
  double pairs_found = 0, outliers_found = 0;
  std::set<int64_t> channels;
  std::vector<double> band;
  double sink_key_norm = 0, sink_value_scale = 0;
  int64_t slices_with_sinks = 0, slices_with_outliers = 0;

  // `where` names the slice (file, layer, KV head, sample) for a refusal.
  void add(const Slice& s, const Capture& c, const ProfileFitOptions& o, const std::string& where);
  LayerMeasurement finish();
};

void LayerAccumulator::add(const Slice& s, const Capture& c, const ProfileFitOptions& o, const std::string& where) {
  const int64_t t = s.keys.rows(), d = s.keys.cols(), rows = s.queries.rows();
  const double inv_sqrt_d = 1.0 / std::sqrt(double(d));
  // Attention of every captured query over the tokens up to its position (causal).
  std::vector<std::vector<double>> attn(static_cast<size_t>(rows));
  std::vector<std::vector<double>> logits(static_cast<size_t>(rows));
  std::vector<int64_t> visible(static_cast<size_t>(rows));
  for (int64_t i = 0; i < rows; ++i) {
    int64_t n = 0;
    while (n < t && s.positions[size_t(n)] <= s.query_positions[size_t(i)]) ++n;
    visible[i] = n;
    std::vector<double>& l = logits[i];
    l.resize(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0.0;
      for (int64_t e = 0; e < d; ++e) dot += double(s.queries(i, e)) * s.keys(j, e);
      l[j] = capped_logit(dot * inv_sqrt_d, c.logit_softcap);
    }
    const double mx = *std::max_element(l.begin(), l.end());
    std::vector<double>& p = attn[i];
    p.resize(static_cast<size_t>(n));
    double z = 0.0;
    for (int64_t j = 0; j < n; ++j) z += (p[j] = std::exp(l[j] - mx));
    double h = 0.0;
    for (double& v : p) {
      v /= z;
      if (v > 0.0) h -= v * std::log(v);
    }
    m.attention_entropy += h / double(rows);
  }

  // Sinks: the leading tokens up to the last of the first max_sinks that is one by attention (the
  // median query gives it a large share; one query that happens to favour a token does not count)
  // or by its vectors (a key 3x longer than the median, a value under a third of the median: a
  // sink's key can hold its attention by direction alone, and RoPE turns a run of sink keys by
  // their positions, so some of a run hold little).
  const std::vector<double> key_norms = row_norms(s.keys_pre_rope), value_norms = row_norms(s.values);
  const double key_norm = median(key_norms), value_norm = median(value_norms);
  // Every statistic is relative to the typical key and value (norms, channel spreads): a slice whose
  // typical row is zero has none to give, and would write NaN into the profile.
  if (key_norm == 0.0 || value_norm == 0.0) {
    throw InputError(where + ": most of its " + (key_norm == 0.0 ? "keys" : "values") +
                     " are zero rows, so there is nothing to measure them against; leave this layer out (--layers)");
  }
  int64_t sinks = 0;
  std::vector<double> mass(static_cast<size_t>(std::min(o.max_sinks, t - 2)), 0.0);
  for (size_t j = 0; j < mass.size(); ++j) {
    std::vector<double> shares;
    for (int64_t i = 0; i < rows; ++i) shares.push_back(int64_t(j) < visible[i] ? attn[i][j] : 0.0);
    mass[j] = std::accumulate(shares.begin(), shares.end(), 0.0) / double(rows);
    const double typical = median(shares);
    const bool by_attention = typical >= o.sink_min_mass && typical >= 8.0 / double(t);
    const bool by_vectors = key_norms[j] >= 3.0 * key_norm || value_norms[j] * 3.0 <= value_norm;
    if (by_attention || by_vectors) sinks = int64_t(j) + 1;
  }
  const double sink_mass = std::accumulate(mass.begin(), mass.begin() + sinks, 0.0);
  m.sink_count += double(sinks);
  m.sink_mass += sink_mass;

  // Keys (before RoPE) and values over the other tokens.
  std::vector<double> kmean, ksd, vmean, vsd;
  channel_moments(s.keys_pre_rope, sinks, kmean, ksd);
  channel_moments(s.values, sinks, vmean, vsd);
  std::vector<double> rms(static_cast<size_t>(d));
  for (int64_t e = 0; e < d; ++e) rms[e] = std::sqrt(kmean[e] * kmean[e] + ksd[e] * ksd[e]);
  const double typical = median(rms);
  std::vector<int64_t> outliers, normal;
  for (int64_t e = 0; e < d; ++e) (rms[e] > o.outlier_threshold * typical ? outliers : normal).push_back(e);
  std::vector<double> normal_sd;
  for (int64_t e : normal) normal_sd.push_back(ksd[e]);
  const double scale = median(normal_sd);
  m.key_scale += scale;
  m.outlier_count += double(outliers.size());
  if (!outliers.empty()) {
    double sd_ratio = 0.0, offset = 0.0;
    for (int64_t e : outliers) {
      sd_ratio += ksd[e] / scale;
      offset += std::abs(kmean[e]) / scale;
      channels.insert(e);
      band.push_back(band_position(e, d, c.rope.convention));
      pairs_found += std::find(outliers.begin(), outliers.end(), partner(e, d, c.rope.convention)) != outliers.end();
    }
    outliers_found += double(outliers.size());
    m.outlier_scale += sd_ratio / double(outliers.size());
    m.outlier_offset += offset / double(outliers.size());
    ++slices_with_outliers;
  }
  // channel_offset: the spread of the other channels' means, less what the finite sample adds.
  double mean_sq = 0.0;
  for (int64_t e : normal) mean_sq += kmean[e] * kmean[e];
  mean_sq = mean_sq / double(std::max<size_t>(normal.size(), 1)) - scale * scale / double(t - sinks);
  m.channel_offset += std::sqrt(std::max(mean_sq, 0.0));
  key_kurt += kurtosis(s.keys_pre_rope, sinks, kmean, ksd, normal);
  std::vector<int64_t> all(static_cast<size_t>(d));
  std::iota(all.begin(), all.end(), int64_t(0));
  value_kurt += kurtosis(s.values, sinks, vmean, vsd, all);
  std::vector<double> value_sd(vsd);
  const double vscale = std::sqrt(std::accumulate(value_sd.begin(), value_sd.end(), 0.0,
                                                  [](double a, double b) { return a + b * b; }) /
                                  double(d));
  m.value_scale += vscale;
  m.key_rank += effective_rank(s.keys_pre_rope, sinks);
  m.value_rank += effective_rank(s.values, sinks);

  if (sinks > 0) {
    std::vector<double> norms;
    for (int64_t j = sinks; j < t; ++j) {
      double n2 = 0.0;
      for (int64_t e = 0; e < d; ++e) n2 += double(s.keys_pre_rope(j, e)) * s.keys_pre_rope(j, e);
      norms.push_back(std::sqrt(n2));
    }
    const double typical_norm = median(norms);
    double knorm = 0.0, vnorm = 0.0;
    for (int64_t j = 0; j < sinks; ++j) {
      double k2 = 0.0, v2 = 0.0;
      for (int64_t e = 0; e < d; ++e) {
        k2 += double(s.keys_pre_rope(j, e)) * s.keys_pre_rope(j, e);
        v2 += double(s.values(j, e)) * s.values(j, e);
      }
      knorm += std::sqrt(k2) / typical_norm;
      vnorm += std::sqrt(v2 / double(d)) / vscale;
    }
    sink_key_norm += knorm / double(sinks);
    sink_value_scale += vnorm / double(sinks);
    ++slices_with_sinks;
  }

  // Queries: their spread about the rows' mean (the sink tilt and the recency direction are shared
  // by the rows), on the keys' ordinary channels and on its outlier channels.
  if (rows >= 2) {
    std::vector<double> qmean, qsd;
    channel_moments(s.queries, 0, qmean, qsd);
    std::vector<double> sd_normal;
    for (int64_t e : normal) sd_normal.push_back(qsd[e]);
    const double qscale = median(sd_normal);
    m.query_scale += qscale;
    double ratio = 0.0;
    for (int64_t e : outliers) ratio += qsd[e] / qscale;
    m.query_outlier_scale += outliers.empty() ? 1.0 : ratio / double(outliers.size());
    query_kurt += kurtosis(s.queries, 0, qmean, qsd, normal);
  } else {
    m.query_outlier_scale += 1.0;
    query_kurt += 3.0;
  }

  // Recency: the rows' logits over the non-sink tokens against the token's age, as
  // strength * exp(-age / tau) plus a constant per row; tau on a log grid, strength by least squares.
  double best_fit = 0.0, best_strength = 0.0, best_tau = 256.0;
  for (double tau = 2.0; tau <= 8192.0; tau *= std::sqrt(2.0)) {
    double sxy = 0.0, sxx = 0.0;
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t n = visible[i];
      if (n - sinks < 2) continue;
      std::vector<double> x(static_cast<size_t>(n - sinks));
      double mx = 0.0, my = 0.0;
      for (int64_t j = sinks; j < n; ++j) {
        x[j - sinks] = std::exp(-double(s.query_positions[i] - s.positions[j]) / tau);
        mx += x[j - sinks];
        my += logits[i][j];
      }
      mx /= double(n - sinks);
      my /= double(n - sinks);
      for (int64_t j = sinks; j < n; ++j) {
        const double xc = x[j - sinks] - mx;
        sxy += xc * (logits[i][j] - my);
        sxx += xc * xc;
      }
    }
    if (sxx <= 0.0) continue;
    const double strength = sxy / sxx, explained = strength * sxy;
    if (strength > 0.0 && explained > best_fit) best_fit = explained, best_strength = strength, best_tau = tau;
  }
  m.recency_strength += best_strength;
  m.recency_tokens += best_tau;
  ++m.slices;
}

LayerMeasurement LayerAccumulator::finish() {
  LayerMeasurement out = m;
  const double n = double(std::max<int64_t>(m.slices, 1));
  for (double* v : {&out.key_scale, &out.value_scale, &out.query_scale, &out.outlier_count, &out.channel_offset,
                    &out.query_outlier_scale, &out.sink_count, &out.sink_mass, &out.recency_strength, &out.recency_tokens,
                    &out.key_rank, &out.value_rank, &out.attention_entropy}) {
    *v /= n;
  }
  out.key_kurtosis = key_kurt / n;
  out.value_kurtosis = value_kurt / n;
  out.key_distribution = nearest_distribution(out.key_kurtosis);
  out.value_distribution = nearest_distribution(out.value_kurtosis);
  out.query_distribution = nearest_distribution(query_kurt / n);
  if (slices_with_outliers > 0) {
    out.outlier_scale = m.outlier_scale / double(slices_with_outliers);
    out.outlier_offset = m.outlier_offset / double(slices_with_outliers);
    out.outlier_pair_fraction = pairs_found / outliers_found;
    out.outlier_band_low = *std::min_element(band.begin(), band.end());
    out.outlier_band_high = *std::max_element(band.begin(), band.end());
  } else {
    out.outlier_scale = 1.0;
    out.outlier_offset = 0.0;
  }
  out.outlier_channels.assign(channels.begin(), channels.end());
  if (slices_with_sinks > 0) {
    out.sink_key_norm = sink_key_norm / double(slices_with_sinks);
    out.sink_value_scale = sink_value_scale / double(slices_with_sinks);
  }
  return out;
}

double median_of(const std::vector<LayerMeasurement>& layers, double LayerMeasurement::*field) {
  std::vector<double> v;
  for (const LayerMeasurement& l : layers) v.push_back(l.*field);
  return median(v);
}

// The most common distribution over the layers.
Distribution mode_of(const std::vector<LayerMeasurement>& layers, Distribution LayerMeasurement::*field) {
  int counts[3] = {0, 0, 0};
  for (const LayerMeasurement& l : layers) ++counts[int(l.*field)];
  return Distribution(std::max_element(counts, counts + 3) - counts);
}

}  // namespace

FittedProfile fit_profile(const Capture& c, const ProfileFitOptions& o) {
  FittedProfile out;
  out.model = c.model;
  out.capture_dir = c.dir;
  out.model_layers = c.model_layers;
  out.head_dim = c.head_dim;
  out.kv_heads = c.kv_heads;
  out.q_per_kv = c.q_per_kv();
  out.keys_derotated = !c.k_pre_rope && c.rope.enabled;
  out.keys_as_cached = !c.k_pre_rope && c.rope_unknown;
  out.rope_unmodelled = c.rope_unmodelled;
  const std::vector<int64_t> layers = o.layers.empty() ? c.layers : o.layers;
  if (const auto i = detail::first_repeat(layers)) {
    throw InputError(c.dir + ": layer " + std::to_string(layers[*i]) + " is given twice");
  }
  const std::vector<int64_t> samples = capture_samples(c, o.samples);
  out.samples = int64_t(samples.size());
  out.tokens = INT64_MAX;
  for (int64_t s : samples) {
    const int64_t t = o.tokens == 0 ? c.samples[size_t(s)].tokens : o.tokens;
    if (t > c.samples[size_t(s)].tokens) {
      throw InputError(c.dir + ": sample '" + c.samples[size_t(s)].name + "' has " +
                       std::to_string(c.samples[size_t(s)].tokens) + " tokens; a prefix of " + std::to_string(t) +
                       " was asked for");
    }
    if (t < o.max_sinks + 16) {
      throw InputError(c.dir + ": sample '" + c.samples[size_t(s)].name + "' has " + std::to_string(t) +
                       " tokens; a profile needs at least " + std::to_string(o.max_sinks + 16) +
                       " (the sinks looked for and some tokens after them)");
    }
    out.tokens = std::min(out.tokens, t);
  }
  for (int64_t l : layers) {
    const auto at = std::find(c.layers.begin(), c.layers.end(), l);
    if (at == c.layers.end()) throw InputError(c.dir + ": layer " + std::to_string(l) + " was not captured");
    const SafetensorsFile f = SafetensorsFile::open(c.layer_files[size_t(at - c.layers.begin())]);
    LayerAccumulator acc;
    acc.m.layer = l;
    // Sums until finish() (the fields' defaults are the generator's, not zero).
    acc.m.outlier_scale = acc.m.query_outlier_scale = acc.m.recency_tokens = 0.0;
    for (int64_t s : samples) {
      const int64_t t = o.tokens == 0 ? c.samples[size_t(s)].tokens : o.tokens;
      for (int64_t h = 0; h < c.kv_heads; ++h) {
        acc.add(read_slice(c, f, l, s, h, t), c, o,
                f.path() + ": layer " + std::to_string(l) + ", KV head " + std::to_string(h) + ", sample '" +
                    c.samples[size_t(s)].name + "'");
      }
    }
    out.layers.push_back(acc.finish());
  }

  // The profile: medians over the layers, and per layer what overrides can say.
  WorkloadConfig& w = out.workload;
  w = capture_shape(c);
  const auto& L = out.layers;
  w.keys.distribution = mode_of(L, &LayerMeasurement::key_distribution);
  w.keys.scale = median_of(L, &LayerMeasurement::key_scale);
  w.keys.outlier_count = std::llround(median_of(L, &LayerMeasurement::outlier_count));
  w.keys.outlier_scale = median_of(L, &LayerMeasurement::outlier_scale);
  // The generator scales outlier_offset by keys.scale (workload.h); measured in the slice's own scale.
  w.keys.outlier_offset = median_of(L, &LayerMeasurement::outlier_offset);
  w.keys.channel_offset = median_of(L, &LayerMeasurement::channel_offset);
  double low = 1.0, high = 0.0, pairs = 0.0, with_outliers = 0.0;
  for (const LayerMeasurement& l : L) {
    if (l.outlier_count <= 0.0) continue;
    low = std::min(low, l.outlier_band_low);
    high = std::max(high, l.outlier_band_high);
    pairs += l.outlier_pair_fraction;
    ++with_outliers;
  }
  if (with_outliers > 0) {
    w.keys.outlier_band_low = low;
    w.keys.outlier_band_high = high;
    w.keys.outlier_pairs = pairs / with_outliers >= 0.5 && w.keys.outlier_count % 2 == 0;
  }
  w.values.distribution = mode_of(L, &LayerMeasurement::value_distribution);
  w.values.scale = median_of(L, &LayerMeasurement::value_scale);
  w.query.distribution = mode_of(L, &LayerMeasurement::query_distribution);
  w.query.scale = median_of(L, &LayerMeasurement::query_scale);
  w.query.outlier_scale = median_of(L, &LayerMeasurement::query_outlier_scale);
  w.sinks.count = std::llround(median_of(L, &LayerMeasurement::sink_count));
  w.sinks.key_norm = median_of(L, &LayerMeasurement::sink_key_norm);
  w.sinks.value_scale = median_of(L, &LayerMeasurement::sink_value_scale);
  w.sinks.mass = std::min(median_of(L, &LayerMeasurement::sink_mass), 0.95);
  w.recency.strength = median_of(L, &LayerMeasurement::recency_strength);
  w.recency.tokens = median_of(L, &LayerMeasurement::recency_tokens);
  for (const LayerMeasurement& l : L) {
    LayerOverride ov;
    ov.layers = {l.layer};
    ov.outlier_count = std::llround(l.outlier_count);
    ov.outlier_scale = l.outlier_scale;
    ov.outlier_offset = l.outlier_offset;
    ov.channel_offset = l.channel_offset;
    ov.sink_count = std::llround(l.sink_count);
    if (l.sink_count > 0.0) {
      ov.sink_key_norm = l.sink_key_norm;
      ov.sink_mass = std::min(l.sink_mass, 0.95);
    }
    w.overrides.push_back(ov);
  }
  return out;
}

}  // namespace kvtune
