// The files runtimes load static FP8 KV scales from, written from fitted scales and read back
// (docs/real-caches.md, "Calibrated scales"). Every layout below was read in the runtimes' and
// tools' sources; the comments in kv_scale_files.cpp name them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/capture_scales.h"

namespace kvtune {

// Checkpoint tensors as llm-compressor writes them: model.layers.N.self_attn.k_scale / v_scale,
// float32, shape [1] (strategy tensor) or [kv_heads, 1, 1] (strategy attn_head). vLLM and SGLang
// load these names.
std::vector<std::byte> checkpoint_kv_scales(const CaptureScales& scales);

// The `quantization_config` a checkpoint's config.json needs for vLLM to create and load the
// scales (compressed-tensors with a kv_cache_scheme), as JSON text.
std::string checkpoint_quantization_config(const CaptureScales& scales);

// SGLang's --quantization-param-path JSON: {"model_type", "kv_cache": {"dtype": "float8_e4m3fn",
// "scaling_factor": {rank: {layer: scale}}}}, one scale per layer for K and V together (the
// larger), the same on every tensor-parallel rank. nullopt with `why` when SGLang cannot load one
// for these scales (not every layer fitted, per-head scales).
std::optional<std::string> sglang_quantization_params(const CaptureScales& scales, const std::string& model_type,
                                                      int64_t tp_size, std::string& why);

// Scales read back from a checkpoint_kv_scales file: per layer, K and V, per head when the file
// holds [kv_heads, 1, 1] tensors.
struct LoadedKvScales {
  struct Layer {
    std::vector<double> k, v;  // one entry (per tensor) or one per KV head
  };
  std::string path;
  std::vector<std::pair<int64_t, Layer>> layers;
  // The scale of (layer, head); InputError naming the file when the layer is absent.
  double k(int64_t layer, int64_t head) const;
  double v(int64_t layer, int64_t head) const;
};
LoadedKvScales read_checkpoint_kv_scales(const std::string& path);

}  // namespace kvtune
