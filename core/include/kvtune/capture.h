// A capture directory (docs/real-caches.md, "The capture directory"): the K/V cache and queries a
// real model computed, as python/kvtune_capture.py writes them. Opening reads and checks the
// manifest and every layer file's header against it; a case reads one (sample, layer, KV head)
// slice, so memory stays bounded by one case whatever the capture's size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvtune/model_preset.h"
#include "kvtune/rope.h"
#include "kvtune/workload.h"

namespace kvtune {

// Needles planted into a capture's keys avoid its first token: the attention sink nearly every
// decoder keeps at position 0 (Xiao et al. 2023, "Efficient Streaming Language Models with
// Attention Sinks", arXiv 2309.17453, fig. 2), whose key a needle must not replace.
inline constexpr int64_t kCaptureSinkTokens = 1;

struct CaptureSample {
  std::string name;
  int64_t tokens = 0;
  int64_t first = 0;  // its first token's index along the layer files' token axis
};

struct Capture {
  std::string dir;
  std::string model;
  std::string dtype;     // "float16", "bfloat16", "float32"
  int64_t model_layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  RopeConfig rope;       // theta, convention and scaling from the manifest (the capture's keys are already rotated)
  // RoPE kvtune cannot reproduce: a rope_theta with the convention "unknown", or a rope_scaling it
  // does not model (rope_unmodelled: its type, "yarn", "dynamic", ..., or "per layer type" for
  // transformers 5's rope_parameters per layer type beyond full and plain sliding layers).
  // rope.enabled is then false and the keys are only ever used as cached.
  bool rope_unknown = false;
  std::string rope_unmodelled;
  // The manifest names the keys' RoPE pair order (rope_convention not "unknown"): a runtime's key
  // layout can then be applied (runtime_table.h, KeyLayout) even where the RoPE itself is unknown.
  bool rope_convention_known = true;
  std::vector<int64_t> layers;           // captured layer indices, ascending
  std::vector<std::string> layer_files;  // paths, one per captured layer
  std::vector<CaptureSample> samples;
  int64_t queries_per_sample = 0;
  bool k_pre_rope = false;
  // Sliding-window layers from the model's config (0 and empty: none); optional in the manifest.
  int64_t sliding_window = 0;
  std::vector<int64_t> sliding_layers;
  // The config's query_pre_attn_scalar (Gemma 2 and 3 scale logits by its inverse square root, not
  // head_dim's; 0: head_dim) and attn_logit_softcapping (Gemma 2; 0: none); optional in the manifest.
  double query_pre_attn_scalar = 0.0;
  double logit_softcap = 0.0;
  // The sliding layers' own RoPE base (Gemma 3: rope_parameters per layer type, or the capture tool's
  // transformers 4.x equivalent), plain RoPE without `rope`'s scaling; 0: they turn as the others do.
  double sliding_rope_theta = 0.0;
  // The config's architectures[0] ("Gemma3ForConditionalGeneration"; "" when the manifest has none),
  // which the capture's model carries for the runtime tables' rules (ModelPreset::architecture).
  std::string architecture;
  int64_t q_per_kv() const { return q_heads / kv_heads; }
};

// The RoPE that turned `layer`'s keys: the sliding layers' own base where there is one, else `rope`.
RopeConfig capture_layer_rope(const Capture& capture, int64_t layer);

// What the capture's queries are multiplied by so that q · k / sqrt(head_dim) is the model's logit:
// sqrt(head_dim / query_pre_attn_scalar), or 1 without one.
double capture_query_factor(const Capture& capture);
// Multiplies captured queries by capture_query_factor, in place.
void scale_queries_to_model(const Capture& capture, MatrixView queries);

// Reads DIR/manifest.json and checks each layer file's header against it (the tensors' names,
// shapes and dtype, the token count). Throws InputError naming the file and what disagrees.
Capture open_capture(const std::string& dir);

// The captured model as a preset: its shape for the memory model (layers, KV heads, head_dim, the
// sliding-window layers), its query heads and RoPE. The parameter count is unknown (0).
ModelPreset capture_model(const Capture& capture);

// A workload of the capture's shape (head_dim, layers, KV heads, GQA group, RoPE); its statistics
// are the defaults.
WorkloadConfig capture_shape(const Capture& capture);

// The case of (sample, layer, KV head): the sample's first `tokens` keys and values (0: all of
// them) and, for each of the q_per_kv query heads of the KV head, the captured query at position
// tokens - 1 when one was captured there (the attention the model computed), else the sample's
// earliest captured query (a later query over an earlier prefix: real tensors, but not an
// attention the model computed; docs/real-caches.md). With a query_pre_attn_scalar S the queries are
// multiplied by capture_query_factor; the case carries the capture's softcap. On one of the manifest's sliding layers a
// prefix longer than the window keeps its last sliding_window tokens, all the query attends to.
// `layer` is a model layer index that was captured. Values are checked finite; InputError names
// the file and the tensor.
Case capture_case(const Capture& capture, int64_t sample, int64_t layer, int64_t kv_head, int64_t tokens = 0);

// The samples a fit reads: `chosen` (indices into capture.samples), or every sample when empty.
// InputError for an index outside the capture or given twice (it would count twice).
std::vector<int64_t> capture_samples(const Capture& capture, const std::vector<int64_t>& chosen);

}  // namespace kvtune
