// The synthetic workload generator (DESIGN §5). A case is one (seed, layer, kv-head) slice: keys
// before and after RoPE, values, queries, positions and needles. Every draw comes from one
// <random> engine seeded from (seed, layer, head), so a case never depends on the thread count
// or on which other cases run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvtune/matrix.h"
#include "kvtune/rope.h"

namespace kvtune {

enum class Distribution { normal, uniform, laplace };  // all with unit variance before `scale`

struct KeyProfile {
  Distribution distribution = Distribution::normal;
  double scale = 1.0;
  std::vector<int64_t> outlier_channels;  // explicit head-dim indices...
  int64_t outlier_count = 0;              // ...or this many drawn per case
  double outlier_scale = 1.0;             // multiplier on the outlier channels
  double channel_offset = 0.0;            // std-dev of a constant per-channel bias
};

struct ValueProfile {
  Distribution distribution = Distribution::normal;
  double scale = 1.0;
};

struct QueryProfile {
  Distribution distribution = Distribution::normal;
  double scale = 1.0;  // larger = sharper attention (lower temperature)
};

// Attention sinks: the first `count` tokens get keys of `key_norm` times the median key norm along
// one shared direction, values scaled by `value_scale`, and each query is tilted toward them until
// they hold `mass` of its reference attention.
struct SinkProfile {
  int64_t count = 0;
  double key_norm = 8.0;
  double value_scale = 0.1;
  double mass = 0.3;
};

// Needles: query i gets a needle key at depth depths[i % n] (fraction of the context) made to hold
// `mass` of its reference attention.
struct NeedleProfile {
  std::vector<double> depths;
  double mass = 0.5;
};

struct WorkloadConfig {
  int64_t tokens = 4096;
  int64_t head_dim = 128;
  int64_t queries = 1;
  KeyProfile keys;
  ValueProfile values;
  QueryProfile query;
  RopeConfig rope;
  SinkProfile sinks;
  NeedleProfile needles;
};

struct Case {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t kv_head = 0;
  Matrix keys_pre_rope;             // [T, D] before RoPE
  Matrix keys;                      // [T, D] as cached (after RoPE when enabled)
  Matrix values;                    // [T, D]
  Matrix queries;                   // [Nq, D] as used in attention (after RoPE)
  std::vector<int64_t> positions;   // [T] token positions 0..T-1
  int64_t query_position = 0;       // position of the decoding token (T)
  std::vector<int64_t> needles;     // [Nq] needle token per query, -1 when none
  std::vector<int64_t> outlier_channels;  // the channels that were scaled
  RopeConfig rope;                        // what turned keys_pre_rope into keys (disabled: none)
};

// Throws InputError when the config cannot be generated (e.g. outlier channel >= head_dim).
void validate(const WorkloadConfig& config);

Case generate_case(const WorkloadConfig& config, uint64_t seed, int64_t layer = 0, int64_t kv_head = 0);

// A case from given tensors (no RoPE, no needles): keys [T, D], values [T, D], queries [Nq, D].
Case case_from_tensors(Matrix keys, Matrix values, Matrix queries);

const char* distribution_name(Distribution d);

}  // namespace kvtune
