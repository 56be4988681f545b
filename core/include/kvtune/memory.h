// The memory model (DESIGN §6): what a KV cache costs for a model shape, a context length and a K and
// a V scheme, and how many sequences fit on a GPU. Bits per element are measured from the schemes'
// footprints, never assumed, so scales, minima and block metadata are counted exactly.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

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

// ---- What a runtime allocates, where it rounds ----

// How a runtime sizes each sequence's cells where it differs from the model above (llama.cpp's
// llama-server, and Ollama, which runs it): every full layer holds a slot of pad(context, slot_pad)
// cells, and a sliding layer pad(min(slot, window + extra), sliding_pad), `extra` being what the
// runtime keeps beyond the window for the batch it writes (llama.cpp: n_ubatch). Where the
// sequences' tokens together exceed the first of a `sliding_extra_above` step, its extra replaces
// sliding_extra (the last such step wins; Ollama picks its batch by the whole context). With
// `sliding_full` a sliding layer holds the whole slot, as a full one does: the runtime keeps every
// token although the layer attends to its window only (SGLang for Gemma 2 and 3). With
// `pad_layer_groups` the runtime allocates the layers of each kind in groups of one size, the
// smaller kind's count (the larger's when it is under 1.5 times the smaller), padding the last group
// of each kind (vLLM's hybrid KV cache manager). A runtime whose rule holds for some model classes
// only scopes it with `for_architectures` (these classes) or `except_architectures` (every other
// class, and a model that declares none); where it does not hold the runtime's table says nothing of
// the cells and kvtune's own count stands (cell_rule_applies).
struct CellAllocation {
  int64_t slot_pad = 1;
  int64_t sliding_extra = 0;
  std::vector<std::pair<int64_t, int64_t>> sliding_extra_above;  // (tokens, extra), tokens ascending
  int64_t sliding_pad = 1;
  bool sliding_full = false;
  bool pad_layer_groups = false;
  std::vector<std::string> for_architectures, except_architectures;  // at most one non-empty
  bool operator==(const CellAllocation&) const = default;
};

// One sequence's cells per layer under an allocation: `slot` on a full layer, `sliding` on a sliding
// one (0 for a shape without sliding layers), the extra that was applied, whether the sliding
// layers were sized as full ones, and the layers of each kind the runtime allocates (the shape's,
// or more where it pads them into groups of `layer_group`; 0 without padding).
struct AllocatedCells {
  int64_t slot = 0, sliding = 0, sliding_extra = 0;
  bool sliding_full = false;
  int64_t full_layers = 0, sliding_layers = 0, layer_group = 0;
};
// Whether a runtime's rule scoped to `only` (these classes) or `except` (every other class, and a
// model that declares none) holds for a model of `architecture` (ModelPreset::architecture, "" when
// unknown); with neither list it holds for every model.
bool architecture_in_scope(const std::vector<std::string>& only, const std::vector<std::string>& except,
                           std::string_view architecture);
// Whether the rule holds for a model of `architecture`.
bool cell_rule_applies(const CellAllocation& a, std::string_view architecture);
AllocatedCells allocated_cells(const ModelShape& shape, int64_t context, int64_t sequences, const CellAllocation& a);
// The shape whose estimate at `cells.slot` tokens is that allocation: the sliding layers' window
// replaced by their cells, the layer counts by those allocated.
ModelShape allocated_shape(const ModelShape& shape, const AllocatedCells& cells);
// "; 60 sliding layers for 52 (groups of 10)": the layers a runtime pads on, or "" where it pads none.
std::string padded_layers_text(const ModelShape& shape, const AllocatedCells& cells);

// How many sequences of `sequence_bytes` fit in what `weight_bytes` leave of `gpu_bytes`:
// floor((gpu - weights) / sequence), 0 when the weights alone do not fit.
uint64_t max_sequences(uint64_t gpu_bytes, uint64_t weight_bytes, uint64_t sequence_bytes);

// ---- Tensor parallelism: the cache and the weights split across N GPUs ----

// The most GPUs one tensor-parallel group may have: a bound on input, not a runtime's limit.
inline constexpr int64_t kMaxGpus = 4096;

// KV heads one GPU of an N-way tensor-parallel group holds: ceil(kv_heads / N), so 1 when N >= kv_heads
// (the heads are then replicated). This is the runtimes' rule:
// - vLLM, vllm/model_executor/layers/linear.py, QKVParallelLinear.__init__: if tp_size >=
//   total_num_kv_heads, num_kv_heads = 1 and num_kv_head_replicas = divide(tp_size, total_num_kv_heads);
//   else num_kv_heads = divide(total_num_kv_heads, tp_size). `divide` asserts divisibility, so vLLM
//   refuses an N that neither divides kv_heads nor is a multiple of it; for every N it accepts,
//   kv_heads / N (or 1) equals the ceiling. SGLang's QKVParallelLinear (python/sglang/srt/layers/linear.py)
//   is the same code.
// - TensorRT-LLM, tensorrt_llm/_torch/pyexecutor/resource_manager.py, KVCacheManager.__init__:
//   num_kv_heads_per_layer = (num_kv_heads + tp_size - 1) // tp_size, the ceiling for every N.
// Throws InputError when kv_heads or gpus is below 1.
int64_t kv_heads_per_gpu(int64_t kv_heads, int64_t gpus);

// One GPU of an N-way tensor-parallel group: what a sequence's cache costs there and how many fit.
struct GpuFit {
  int64_t gpus = 1;             // N
  int64_t kv_heads = 0;         // per GPU, kv_heads_per_gpu
  uint64_t sequence_bytes = 0;  // one sequence's cache on one GPU: every layer, kv_heads of them
  uint64_t gpu_bytes = 0;       // memory of one GPU
  uint64_t weight_bytes = 0;    // on one GPU: ceil(weights / N), the weights split evenly
  uint64_t free_bytes = 0;      // gpu_bytes - weight_bytes, 0 when the weights alone do not fit
  uint64_t sequences = 0;       // floor(free_bytes / sequence_bytes)
};

// One GPU's share of `weight_bytes` split evenly over `gpus`: ceil(weight_bytes / gpus), the largest share.
uint64_t weights_per_gpu(uint64_t weight_bytes, int64_t gpus);

// `estimate` is the whole model's (estimate_memory over `shape`); `weight_bytes` the whole model's
// weights, split evenly over the N GPUs: this ignores what a runtime replicates on every GPU
// (embeddings, norms, replicated KV projections). Throws InputError when gpus is not in 1..kMaxGpus.
GpuFit fit_per_gpu(const ModelShape& shape, const MemoryEstimate& estimate, uint64_t gpu_bytes,
                   uint64_t weight_bytes, int64_t gpus);

// GPU memory as "80GiB" (one GPU's size, no count) or "NxSIZE" ("2x80GiB": N GPUs of SIZE each).
struct GpuMemory {
  std::optional<int64_t> gpus;  // N of "NxSIZE"
  uint64_t bytes = 0;           // one GPU's
};
// Throws InputError naming `what`, the value and the forms when the count is not an integer in
// 1..kMaxGpus or the size does not parse (parse_size).
GpuMemory parse_gpu_memory(std::string_view text, std::string_view what);

// The GPU count from an "NxSIZE" count and a separate count (--gpus, tensor_parallel), either
// optional: 1 when neither is given. Throws InputError naming both when they disagree.
int64_t gpu_count(std::optional<int64_t> from_size, std::string_view size_what, std::optional<int64_t> given,
                  std::string_view given_what);

// Parses "80GiB", "141GB", "512MiB", "1.5TiB", "64 KB" or a plain byte count "1000". KB/MB/GB/TB
// are powers of 1000, KiB/MiB/GiB/TiB powers of 1024 (units are case-insensitive); a fractional
// size is rounded to the nearest byte. Throws InputError naming `what` (e.g. "--gpu-mem"), the
// value and the accepted forms.
uint64_t parse_size(std::string_view text, std::string_view what);

// "512 B", "320.0 KiB", "40.00 GiB": the largest binary unit that keeps the value at least 1, with
// `decimals` digits after the point (bytes are printed whole).
std::string format_bytes(double bytes, int decimals);

}  // namespace kvtune
