// The memory model (DESIGN §6): what a KV cache costs for a model shape, a context length and a K and
// a V scheme, and how many sequences fit on a GPU. Bits per element are measured from the schemes'
// footprints, never assumed, so scales, minima and block metadata are counted exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "kvtune/scheme.h"

namespace kvtune {

// The parts of a model that size its KV cache.
struct ModelShape {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
  // Sliding-window attention: `sliding_layers` of the `layers` attend to (and so keep) at most the
  // last `sliding_window` tokens. Both 0 for a model whose every layer attends to the whole context.
  int64_t sliding_window = 0;
  int64_t sliding_layers = 0;
};

// Empty when the shape is usable, else what is wrong with it (a zero count, more sliding layers
// than layers, sliding layers without a window).
std::string check_model_shape(const ModelShape& shape);

// Bytes that one role (K or V) of one KV head of one layer takes to hold `tokens` tokens of
// `head_dim` channels. The memory model sees storage only through this, so the cache policy can
// add what it keeps beside the scheme (sink tokens and a residual window stored as f16, DESIGN §4)
// by wrapping the scheme's storage, without the memory model changing.
using RoleStorage = std::function<uint64_t(int64_t tokens, int64_t head_dim)>;

// The plain scheme: its footprint. Throws InputError naming the scheme when it cannot store a
// [tokens, head_dim] block (e.g. a group size that does not divide head_dim).
RoleStorage scheme_storage(SchemePtr scheme);

struct MemoryEstimate {
  // Bits per element of one full-context block, 8 * storage(ctx, D) / (ctx * D).
  double k_bits = 0.0, v_bits = 0.0;
  // The whole cache of one sequence at `context` tokens, every layer and KV head, K and V.
  uint64_t total_bytes = 0;
  // total_bytes / context: the average over the context. It equals
  // layers * kv_heads * head_dim * (k_bits + v_bits) / 8 when no layer slides.
  double bytes_per_token = 0.0;
  // Tokens a sliding layer holds at this context: min(context, sliding_window); 0 without any.
  int64_t sliding_tokens = 0;
};

// Throws InputError when the shape or the context is unusable or the total overflows 64 bits.
MemoryEstimate estimate_memory(const ModelShape& shape, int64_t context, const RoleStorage& k, const RoleStorage& v);

// How many sequences of `sequence_bytes` fit in what `weight_bytes` leave of `gpu_bytes`:
// floor((gpu - weights) / sequence), 0 when the weights alone do not fit.
uint64_t max_sequences(uint64_t gpu_bytes, uint64_t weight_bytes, uint64_t sequence_bytes);

// Parses "80GiB", "141GB", "512MiB", "1.5TiB", "64 KB" or a plain byte count "1000". KB/MB/GB/TB
// are powers of 1000, KiB/MiB/GiB/TiB powers of 1024 (units are case-insensitive); a fractional
// size is rounded to the nearest byte. Throws InputError naming `what` (e.g. "--gpu-mem"), the
// value and the accepted forms.
uint64_t parse_size(std::string_view text, std::string_view what);

// "512 B", "320.0 KiB", "40.00 GiB": the largest binary unit that keeps the value at least 1, with
// `decimals` digits after the point (bytes are printed whole).
std::string format_bytes(double bytes, int decimals);

}  // namespace kvtune
