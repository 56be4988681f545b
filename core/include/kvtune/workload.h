// The synthetic workload generator (DESIGN §5). A case is one (seed, layer, kv-head) slice: keys
// before and after RoPE, values, the queries of every query head of the GQA group, positions,
// needles and an optional calibration sample. Every draw comes from <random> engines seeded from
// (seed, layer, head), so a case never depends on the thread count or on which other cases run.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
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
  double outlier_scale = 1.0;             // multiplier on the outlier channels' token-to-token variation
  // A constant of +-outlier_offset * scale on each outlier channel (sign drawn per channel): an
  // outlier that is mostly a per-channel bias, the same on every token, rather than variance.
  double outlier_offset = 0.0;
  // Where drawn outlier channels sit in the RoPE spectrum, as fractions of the pair index:
  // 0 = the fastest-rotating pair, 1 = the slowest. [0, 1] = anywhere.
  double outlier_band_low = 0.0, outlier_band_high = 1.0;
  // Drawn outliers come as whole RoPE pairs (outlier_count / 2 pairs, both channels of each): a
  // feature that lives in one rotary plane rather than in one channel.
  bool outlier_pairs = false;
  double channel_offset = 0.0;  // std-dev of a constant per-channel bias (every channel)
};

struct ValueProfile {
  Distribution distribution = Distribution::normal;
  double scale = 1.0;
};

struct QueryProfile {
  Distribution distribution = Distribution::normal;
  double scale = 1.0;  // the inverse temperature: larger = sharper attention, smaller = flatter
  // Multiplier on the query channels that are the keys' outlier channels: queries that weight the
  // same channels as the keys' outliers make a key's error there count that much more.
  double outlier_scale = 1.0;
};

// Recency bias: recent tokens draw more attention, as in real decoders. Every query and every
// non-sink key gain a component along one shared direction, sized so that the logit of the token
// `age` steps before the newest rises by about strength * exp(-age / tokens) nats.
struct RecencyProfile {
  double strength = 0.0;  // nats on the newest token; 0 = off
  double tokens = 256.0;  // decay length in tokens
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

// Needles: query row i gets `per_query` needle keys at depths depths[(i * per_query + n) % size]
// (fractions of the context), made to hold `mass` of its reference attention together (equal
// shares). per_query = 1 is single-needle retrieval, more is multi-needle.
struct NeedleProfile {
  std::vector<double> depths;
  double mass = 0.5;
  int64_t per_query = 1;
};

// Calibration for schemes with static scales: a sample on which each scheme fits its scales before
// the full context is quantized. `same`: the case's own first `tokens` tokens (after the sinks when
// include_sinks is false); `fresh`: a calibration set of `samples` independent draws of `tokens`
// tokens each, with the same model structure (outlier channels, offsets) and each its own sinks at
// position 0, as calibration tools run a model over a dataset. `granularity` is what one scale is
// fitted over, as the tools do: `layer` = every KV head's draws of the case's layer together (a
// per-tensor checkpoint scale: vLLM/SGLang k_scale/v_scale, TensorRT-LLM's), `head` = the case's own
// head (llm-compressor strategy "attn_head"). A fitted scale is the maximum over the whole set
// (llm-compressor's default static_minmax observer).
enum class CalibrationSource { same, fresh };
enum class CalibrationGranularity { head, layer };
// The most rows a calibration set may hold (heads x samples x tokens): 2^22 rows of K and V at
// head_dim 128 are 4 GiB.
inline constexpr int64_t kMaxCalibrationRows = int64_t(1) << 22;
struct CalibrationProfile {
  int64_t tokens = 0;  // 0 = no calibration step
  bool include_sinks = true;
  CalibrationSource source = CalibrationSource::same;
  int64_t samples = 1;
  CalibrationGranularity granularity = CalibrationGranularity::head;
};

// Per-layer changes to the profiles (DESIGN §5): unset fields keep the workload's value.
struct LayerOverride {
  std::vector<int64_t> layers;
  std::optional<std::vector<int64_t>> outlier_channels;
  std::optional<int64_t> outlier_count;
  std::optional<double> outlier_scale, outlier_offset, channel_offset;
  std::optional<int64_t> sink_count;
  std::optional<double> sink_key_norm, sink_mass;
};

struct WorkloadConfig {
  int64_t tokens = 4096;
  int64_t head_dim = 128;
  int64_t queries = 1;   // per query head
  int64_t layers = 1;    // cases may come from layers 0..layers-1
  int64_t kv_heads = 1;  // ...and KV heads 0..kv_heads-1
  int64_t q_per_kv = 1;  // GQA: query heads sharing each KV head, each with its own queries
  KeyProfile keys;
  ValueProfile values;
  QueryProfile query;
  RopeConfig rope;
  SinkProfile sinks;
  NeedleProfile needles;
  RecencyProfile recency;
  CalibrationProfile calibration;
  std::vector<LayerOverride> overrides;  // applied in order; later entries win
  // Sliding-window attention (Gemma 2's local layers, Mistral v0.1): the decoding token of a layer
  // in `sliding_layers` attends to the last `sliding_window` tokens only, so a case of such a layer
  // keeps just those (positions T - W .. T - 1; the sinks at the sequence's start fall outside, and
  // needles are planted inside the window). 0 / empty: every layer attends to the whole context.
  int64_t sliding_window = 0;
  std::vector<int64_t> sliding_layers;
  // The sliding layers' own RoPE base (Gemma 3 turns them by rope_local_base_freq, without the
  // rope_scaling of its global layers); 0: every layer turns by `rope`.
  double sliding_rope_theta = 0.0;
  // Gemma 2's attn_logit_softcapping: every attention logit l becomes c · tanh(l / c) before the
  // softmax, in the reference and in every quantized configuration; sinks and needles are planted
  // to hold their mass of the capped attention. 0: none.
  double logit_softcap = 0.0;
};

// How many of a context's `tokens` a layer attends to: the last `window` when the layer is one of
// `sliding_layers` and the context is longer, else all of them (the one rule for generated cases,
// captured ones and the sweep's shape check).
int64_t attended_tokens(int64_t tokens, int64_t window, std::span<const int64_t> sliding_layers, int64_t layer);

// The RoPE that turns `layer`'s keys: `rope`, except on one of `sliding_layers` where the sliding
// layers have their own base (sliding_theta > 0: Gemma 3), which turns them plainly, without `rope`'s
// scaling. The one rule for generated cases and captured ones.
RopeConfig layer_rope(const RopeConfig& rope, double sliding_theta, std::span<const int64_t> sliding_layers,
                      int64_t layer);

// Whether a case of `layer` sees only the last cfg.sliding_window of its cfg.tokens tokens.
bool windowed(const WorkloadConfig& cfg, int64_t layer);

// A planted needle: query row `query` should retrieve token `token`, planted at depths[depth].
struct Needle {
  int64_t query = 0;
  int64_t token = 0;
  int64_t depth = 0;
};

// Tokens a scheme with static scales is calibrated on (empty when the workload has none).
struct CalibrationSample {
  Matrix keys, values;             // [N, D], keys as cached, the draws one after another
  std::vector<int64_t> positions;  // [N], each draw's own positions
  // The rows of the case's own head: all of them, except with granularity = layer, where the
  // sample holds every KV head of the layer (a scheme that fits one scale per head uses these).
  int64_t head_first = 0, head_rows = 0;
  bool empty() const { return keys.rows() == 0; }
};

struct Case {
  uint64_t seed = 0;
  int64_t layer = 0;
  int64_t kv_head = 0;
  Matrix keys_pre_rope;             // [T, D] before RoPE
  Matrix keys;                      // [T, D] as cached (after RoPE when enabled)
  Matrix values;                    // [T, D]
  Matrix queries;                   // [q_per_kv * Nq, D] as used in attention (after RoPE)
  int64_t q_per_kv = 1;             // query rows h*Nq..(h+1)*Nq-1 belong to query head h
  std::vector<int64_t> positions;   // [T] token positions 0..T-1
  int64_t query_position = 0;       // position of the decoding token (T)
  std::vector<Needle> needles;      // ordered by query row
  std::vector<double> needle_depths;       // the workload's depths (Needle::depth indexes them)
  std::vector<int64_t> outlier_channels;  // the channels that were scaled
  RopeConfig rope;                        // what turned keys_pre_rope into keys (disabled: none)
  double logit_softcap = 0.0;             // the model's attention logit cap (WorkloadConfig's); 0: none
  CalibrationSample calibration;
  // Static scales loaded for this case's layer and head (a k_scale / v_scale file, as a runtime
  // loads it): a scheme with static scales applies them instead of fitting on `calibration`.
  std::optional<double> k_static_scale, v_static_scale;
  // The .npy files a case_from_tensors case was read from (empty when generated), so errors about
  // the data can name the file.
  std::string keys_file, values_file;
};

// Throws InputError when the config cannot be generated (e.g. outlier channel >= head_dim).
void validate(const WorkloadConfig& config);

// The profile of one layer: the workload with the overrides naming `layer` applied, and a sliding
// layer's own RoPE base where the workload gives one.
WorkloadConfig layer_config(const WorkloadConfig& config, int64_t layer);

// Throws InputError when layer or kv_head is outside the workload's counts.
Case generate_case(const WorkloadConfig& config, uint64_t seed, int64_t layer = 0, int64_t kv_head = 0);

// Plants the needles of every query row of `c` (generate_case does it for a synthetic case; a
// capture's case gets them the same way): picks free tokens at the row's depths, never among the
// first `protected_leading` (the sinks), then moves each needle key along the part of the row's
// query orthogonal to the other rows until the row's needles hold `mass` of its reference
// attention in equal shares; keys_pre_rope follows through c.rope's inverse.
void plant_needles(Case& c, const NeedleProfile& needles, int64_t protected_leading);

// A case from given tensors (no RoPE, no needles): keys [T, D], values [T, D], queries [Nq, D].
Case case_from_tensors(Matrix keys, Matrix values, Matrix queries);

const char* distribution_name(Distribution d);

}  // namespace kvtune
