#include "kvtune/capture_scales.h"

#include <algorithm>
#include <cmath>

#include "kvtune/error.h"
#include "kvtune/safetensors.h"

namespace kvtune {
namespace {

// The rows of the selected samples of one head's [ΣT, D] slice.
Matrix selected_rows(const Matrix& head, const Capture& c, const std::vector<int64_t>& samples) {
  int64_t rows = 0;
  for (int64_t s : samples) rows += c.samples[size_t(s)].tokens;
  Matrix out(rows, head.cols());
  int64_t at = 0;
  for (int64_t s : samples) {
    const CaptureSample& cs = c.samples[size_t(s)];
    std::copy_n(head.row(cs.first), size_t(cs.tokens * head.cols()), out.row(at));
    at += cs.tokens;
  }
  return out;
}

// Clips `m` at the p-th percentile of |x| (nearest rank), so that an amax fit finds that percentile.
void clip_to_percentile(Matrix& m, double percentile) {
  if (percentile >= 100.0) return;
  std::vector<float> mags(static_cast<size_t>(m.size()));
  for (int64_t i = 0; i < m.size(); ++i) mags[size_t(i)] = std::abs(m.data()[i]);
  const size_t rank = static_cast<size_t>(std::ceil(percentile / 100.0 * double(mags.size())));
  const size_t at = std::clamp<size_t>(rank, 1, mags.size()) - 1;
  std::nth_element(mags.begin(), mags.begin() + std::ptrdiff_t(at), mags.end());
  const float limit = mags[at];
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = std::clamp(m.data()[i], -limit, limit);
}

double fit(const Scheme& scheme, Matrix sample, Role role, double percentile, double margin) {
  clip_to_percentile(sample, percentile);
  QuantContext ctx;
  ctx.role = role;
  const std::optional<double> scale = scheme.calibrate(sample.view(), ctx)->static_scale();
  if (!scale) throw InputError("'" + scheme.spec() + "' fitted no single static scale on the capture");
  return *scale * margin;
}

void check_scheme(const Scheme& s, const char* role) {
  if (!s.traits().static_scales) {
    throw InputError(std::string(role) + " scheme '" + s.spec() +
                     "' has no static scales to fit (give one with scale=calibrated, e.g. fp8:format=e4m3,scale=calibrated)");
  }
}

}  // namespace

CaptureScales fit_capture_scales(const Capture& c, const Scheme& k, const Scheme& v, const ScaleFitOptions& o) {
  check_scheme(k, "--k");
  check_scheme(v, "--v");
  if (!(o.percentile > 0.0 && o.percentile <= 100.0)) throw InputError("the percentile must be in (0, 100]");
  if (!(o.margin >= 1.0 && o.margin <= 1e6)) throw InputError("the margin must be a multiplier >= 1");
  const std::vector<int64_t> samples = capture_samples(c, o.samples);
  CaptureScales out;
  out.k_spec = k.spec();
  out.v_spec = v.spec();
  out.granularity = o.granularity;
  out.percentile = o.percentile;
  out.margin = o.margin;
  out.model_layers = c.model_layers;
  out.kv_heads = c.kv_heads;
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const SafetensorsFile f = SafetensorsFile::open(c.layer_files[i]);
    LayerScales l;
    l.layer = c.layers[i];
    // One head at a time: a layer's scale is the largest head's, which for an amax fit is the
    // scale of all heads together (for a percentile, the largest head percentile).
    for (int64_t h = 0; h < c.kv_heads; ++h) {
      const double ks = fit(k, selected_rows(f.read_matrix("k", h), c, samples), Role::key, o.percentile, o.margin);
      const double vs = fit(v, selected_rows(f.read_matrix("v", h), c, samples), Role::value, o.percentile, o.margin);
      l.k = std::max(l.k, ks);
      l.v = std::max(l.v, vs);
      if (o.granularity == ScaleGranularity::head) {
        l.k_heads.push_back(ks);
        l.v_heads.push_back(vs);
      }
    }
    out.layers.push_back(std::move(l));
  }
  return out;
}

}  // namespace kvtune
