// Static K/V scales fitted on a capture (docs/real-caches.md, "Calibrated scales"), the way the
// calibration tools fit the k_scale / v_scale a runtime loads: each scheme's own calibrate() on
// the capture's keys (or values) of every selected sample, per KV head or per layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/capture.h"
#include "kvtune/scheme.h"

namespace kvtune {

enum class ScaleGranularity { layer, head };

struct ScaleFitOptions {
  ScaleGranularity granularity = ScaleGranularity::layer;
  // The fitted statistic: 100 = the maximum |x| (llm-compressor's static_minmax), lower = that
  // percentile of |x| (values beyond it are clipped when the scale is fitted).
  double percentile = 100.0;
  double margin = 1.0;            // multiplier on each fitted scale (>= 1 leaves headroom)
  std::vector<int64_t> samples;   // the capture's samples to fit on; empty = all
};

struct LayerScales {
  int64_t layer = 0;
  double k = 0.0, v = 0.0;           // per layer: the largest of the heads' scales
  std::vector<double> k_heads, v_heads;  // per KV head (with granularity head; empty otherwise)
};

struct CaptureScales {
  std::string k_spec, v_spec;     // the schemes fitted (canonical specs)
  ScaleGranularity granularity = ScaleGranularity::layer;
  double percentile = 100.0, margin = 1.0;
  int64_t model_layers = 0, kv_heads = 0;
  std::vector<LayerScales> layers;  // the captured layers, ascending
};

// Fits `k` on the keys and `v` on the values of every captured layer. Each scheme must declare
// static scales (traits().static_scales) and fit one (static_scale() after calibrate()); InputError
// names the spec otherwise, and names the capture's file for its data errors.
CaptureScales fit_capture_scales(const Capture& capture, const Scheme& k, const Scheme& v,
                                 const ScaleFitOptions& options);

}  // namespace kvtune
