// Where the evaluator runs the quantizers, and optionally attention itself. The CPU backend is the
// default; the CUDA backend (cuda/include/kvtune/cuda/cuda_backend.h) runs schemes that have a
// device format through the GPU kernels, so the simulator's numbers can be checked against what a
// kernel computes. The core knows only this interface, never CUDA.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/matrix.h"
#include "kvtune/scheme.h"
#include "kvtune/workload.h"

namespace kvtune {

class EvalBackend {
 public:
  virtual ~EvalBackend() = default;

  // "cpu", "cuda", "cuda-kernel": what rows and summaries print.
  virtual std::string name() const = 0;

  // out = dequantize(quantize(x)) through `scheme`; must equal scheme.roundtrip bit for bit.
  // Called concurrently from the evaluator's threads.
  virtual void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const = 0;
  // True when round-tripping a block a few rows at a time costs no more than the whole block at once
  // (host code): the evaluator then round-trips the keys and values of schemes that allow it
  // (rows_independent, row_block, with_scales_fixed_on) in slices and uses each slice while it is in
  // cache. False where every call pays a transfer or a launch.
  virtual bool roundtrips_slices_cheaply() const { return false; }

  // Kernel mode: the attention output [queries, head_dim] of the case's queries over keys and values
  // quantized by `k` and `v`, computed by a fused kernel from packed data (float64 for the
  // metrics). nullopt when this backend has no fused kernel for the pair; the evaluator then
  // forms the output from its own round trips.
  virtual std::optional<std::vector<double>> fused_attention(const Scheme& k, const Scheme& v, const Case& c) const {
    (void)k, (void)v, (void)c;
    return std::nullopt;
  }

  // True when this backend computes attention itself (kernel mode): a pair it declines is then
  // labelled as the simulator's result (PairResult::backend_used), never under the kernel's name.
  virtual bool fuses_attention() const { return false; }

  // Kernel mode: whether the fused kernel applies a case's logit softcap (Case::logit_softcap). One
  // that does not is never asked for a capped case, which keeps the simulator's product.
  virtual bool fused_attention_caps_logits() const { return false; }

  // Kernel mode: "" when fused_attention computes the pair at this head_dim, otherwise why not
  // (e.g. "no device format for 'turboquant:bits=4'"), in words for the user.
  virtual std::string fused_attention_gap(const Scheme& k, const Scheme& v, int64_t head_dim) const {
    (void)k, (void)v, (void)head_dim;
    return "this backend has no fused kernel";
  }
};

using EvalBackendPtr = std::shared_ptr<const EvalBackend>;

// The CPU backend: every scheme's own roundtrip.
EvalBackendPtr cpu_backend();

}  // namespace kvtune
