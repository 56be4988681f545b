// A model profile fitted on a capture (`kvtune profile`, docs/real-caches.md "Profile"): the
// generator's parameters (workload.h) measured on a real model's keys, values and queries, per
// captured layer, so a synthetic workload at any context and layer count draws the model's own
// statistics. Each (sample, layer, KV head) slice is measured on its own, as the generator draws
// each case on its own, and the layer's parameters are the means over its slices.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvtune/capture.h"
#include "kvtune/workload.h"

namespace kvtune {

struct ProfileFitOptions {
  std::vector<int64_t> layers;   // captured layers to measure (empty: all)
  std::vector<int64_t> samples;  // sample indices (empty: all)
  int64_t tokens = 0;            // a prefix of each sample (0: whole)
  // A key channel is an outlier when its RMS over the tokens exceeds this multiple of the median
  // channel's: 3.5 separates a 10x channel from the spread a channel_offset of 1 gives the others
  // (their RMS stays below 2.9 x the median for 128 channels).
  double outlier_threshold = 3.5;
  // A leading token is a sink when the median query gives it at least this share of its
  // attention and 8x the uniform share, or when its key is 3x the median key norm or its value
  // under a third of the median value norm; the sinks are the tokens up to the last such one
  // among the first max_sinks.
  double sink_min_mass = 0.002;
  int64_t max_sinks = 16;
};

// What one captured layer's slices measure. The generator's knobs first, then what the generator
// does not model but the profile records (`measured`).
struct LayerMeasurement {
  int64_t layer = 0;
  int64_t slices = 0;
  Distribution key_distribution = Distribution::normal, value_distribution = Distribution::normal,
               query_distribution = Distribution::normal;
  double key_scale = 0, value_scale = 0, query_scale = 0;
  double outlier_count = 0;  // mean per slice (the generator draws this many per case)
  double outlier_scale = 1, outlier_offset = 0, channel_offset = 0, query_outlier_scale = 1;
  double outlier_band_low = 0, outlier_band_high = 1;
  double outlier_pair_fraction = 0;  // of outlier channels whose RoPE partner is an outlier too
  std::vector<int64_t> outlier_channels;  // every channel detected in some slice, ascending
  double sink_count = 0;  // mean per slice
  double sink_key_norm = 0, sink_value_scale = 0, sink_mass = 0;
  double recency_strength = 0, recency_tokens = 256;
  // Measured only: kurtosis of the standardized keys and values, effective rank (exp of the
  // entropy of the covariance spectrum) of keys and values, mean attention entropy in nats.
  double key_kurtosis = 0, value_kurtosis = 0, key_rank = 0, value_rank = 0, attention_entropy = 0;
};

struct FittedProfile {
  std::string model, capture_dir;
  int64_t model_layers = 0, head_dim = 0, kv_heads = 0, q_per_kv = 0;
  int64_t samples = 0, tokens = 0;  // samples measured; tokens of the shortest
  bool keys_derotated = false;      // pre-RoPE keys were recovered by inverse RoPE (no k_pre_rope)
  bool keys_as_cached = false;      // neither: no k_pre_rope and a RoPE kvtune cannot undo (Capture::rope_unknown)
  std::string rope_unmodelled;      // then the rope_scaling it does not reproduce (Capture's); empty: convention unknown
  std::vector<LayerMeasurement> layers;
  // The profile: the base statistics (medians over the layers) and one override per measured layer
  // for what overrides can change. Shape fields are the capture's.
  WorkloadConfig workload;
};

// Measures the capture. InputError for a layer or sample outside the capture, or samples too short
// to hold the sinks and some tokens.
FittedProfile fit_profile(const Capture& capture, const ProfileFitOptions& options = {});

// Why a profile's keys were measured as cached (keys_as_cached): "its rotary convention is unknown"
// or "its rope_scaling (yarn) is not reproduced"; empty otherwise. For the profile's header and the
// CLI's line.
std::string keys_as_cached_reason(const FittedProfile& profile);

// The profile file (configs/profiles format, docs/scenario-file.md "Profiles"): name, description,
// source, num_layers, [keys] [values] [queries_profile] [sinks] [recency], [[overrides]] per layer
// and a [measured] table, each number with a comment saying what it was measured on.
std::string profile_toml(const FittedProfile& profile, const std::string& name);

}  // namespace kvtune
