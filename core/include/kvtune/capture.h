// A capture directory (docs/real-caches.md, "The capture directory"): the K/V cache and queries a
// real model computed, as python/kvtune_capture.py writes them. Opening reads and checks the
// manifest and every layer file's header against it; a case reads one (sample, layer, KV head)
// slice, so memory stays bounded by one case whatever the capture's size.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvtune/rope.h"
#include "kvtune/workload.h"

namespace kvtune {

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
  RopeConfig rope;       // theta and convention from the manifest (the capture's keys are already rotated)
  std::vector<int64_t> layers;           // captured layer indices, ascending
  std::vector<std::string> layer_files;  // paths, one per captured layer
  std::vector<CaptureSample> samples;
  int64_t queries_per_sample = 0;
  bool k_pre_rope = false;
  int64_t q_per_kv() const { return q_heads / kv_heads; }
};

// Reads DIR/manifest.json and checks each layer file's header against it (the tensors' names,
// shapes and dtype, the token count). Throws InputError naming the file and what disagrees.
Capture open_capture(const std::string& dir);

// The case of (sample, layer, KV head): the sample's first `tokens` keys and values (0: all of
// them) and, for each of the q_per_kv query heads of the KV head, the captured query at position
// tokens - 1 when one was captured there (the attention the model computed), else the sample's
// earliest captured query (a later query over an earlier prefix: real tensors, but not an
// attention the model computed; docs/real-caches.md). `layer` is a model layer index that was
// captured. Values are checked finite; InputError names the file and the tensor.
Case capture_case(const Capture& capture, int64_t sample, int64_t layer, int64_t kv_head, int64_t tokens = 0);

}  // namespace kvtune
