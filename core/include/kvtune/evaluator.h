// The evaluator: attention over quantized K/V caches against the float64 reference, separable by
// construction (DESIGN §5). Softmax depends only on K and the output is linear in V, so each K
// configuration is quantized once per case (scores and all key metrics), each V configuration once,
// and every requested pair costs one probs · values product.
#pragma once

#include <array>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/attention.h"
#include "kvtune/eval_backend.h"
#include "kvtune/isolation.h"
#include "kvtune/metrics.h"
#include "kvtune/scheme.h"
#include "kvtune/workload.h"

namespace kvtune {

struct EvalPair {
  std::string name;
  size_t k = 0;  // index into EvalPlan::k_schemes
  size_t v = 0;  // index into EvalPlan::v_schemes
};

struct EvalPlan {
  std::vector<SchemePtr> k_schemes;
  std::vector<SchemePtr> v_schemes;
  std::vector<EvalPair> pairs;
  int64_t topk = 8;  // k of topk_overlap
  // The products' arithmetic (kvtune/attention.h): float64, the reference, or float32 with its
  // stated bounds on every metric.
  Precision precision = Precision::float64;
  EvalBackendPtr backend;  // where the quantizers (and in kernel mode attention) run; null = the CPU
  // Called after each case's K configuration and each V configuration is evaluated, i.e.
  // cases · (K configurations + V configurations) times per evaluate(), from the evaluation threads
  // (concurrently); may be empty. evaluate_isolated's child does not call it.
  std::function<void()> on_step;
};

// The needle metrics of the needles planted at one depth (fraction of the context).
struct DepthSamples {
  double depth = 0.0;
  std::vector<double> hit, mass_ratio;
  std::vector<size_t> case_sizes;  // needles at this depth in each case, in case order
};

struct PairResult {
  std::string name;
  SchemePtr k, v;
  double k_bits = 0.0, v_bits = 0.0;  // measured from footprints at the evaluated context
  // One sample per query in case order; needle metrics one per planted needle.
  std::array<std::vector<double>, kMetricCount> samples;
  // How many of each metric's samples each case gave, in case order: needles per case differ where
  // a case has fewer free tokens (a sliding window) or fewer query rows.
  std::array<std::vector<size_t>, kMetricCount> case_sizes;
  std::vector<DepthSamples> needle_depths;  // one entry per workload depth, in the workload's order
  // Kernel mode only, one per query: |o_kernel - o_sim| / |o_sim|, the fused kernel's output against
  // the simulator's product over the same round trips (rel_out_err then comes from the kernel).
  std::vector<double> kernel_vs_sim;
  std::vector<size_t> kernel_case_sizes;
  // What computed this pair's attention output: the backend's name, or, when a kernel-mode backend
  // has no fused kernel for the pair, "cpu (no fused kernel for this pair: WHY)".
  std::string backend_used = "cpu";

  Summary summary(Metric m) const { return summarize(samples[static_cast<size_t>(m)]); }
  // With confidence intervals at `level` over the cases.
  Summary summary_with_intervals(Metric m, double level = kDefaultConfidence) const {
    return summarize_metric(samples[static_cast<size_t>(m)], case_sizes[static_cast<size_t>(m)], m, level);
  }
};

struct EvalResult {
  std::vector<PairResult> pairs;
  int64_t cases = 0;
  int64_t queries_per_case = 0;
  int64_t tokens = 0, head_dim = 0;
  std::string backend = "cpu";  // EvalBackend::name() of the backend that ran
  Precision precision = Precision::float64;  // the plan's products
};

// Produces case `index` (generated or loaded); called concurrently from several threads.
using CaseSource = std::function<Case(size_t index)>;
// The same for cases the caller keeps (a sweep's cases across its batches): no copy is made.
using SharedCaseSource = std::function<std::shared_ptr<const Case>(size_t index)>;

// Evaluates every pair of `plan` over cases 0..case_count-1 in parallel (OpenMP, `threads` = 0 for
// the default). A case with a calibration sample first calibrates every scheme on it (schemes
// without static scales return themselves). The result is identical whatever the thread count.
// Each evaluation thread keeps its buffers for the next call (one [T, D] float cache and two
// [Nq, T] doubles per K configuration of the largest plan it ran), so repeated calls do not
// page-fault fresh memory.
// Throws InputError when a scheme cannot take the cases' shape.
EvalResult evaluate(const EvalPlan& plan, size_t case_count, const CaseSource& source, int threads = 0);
EvalResult evaluate(const EvalPlan& plan, size_t case_count, const SharedCaseSource& source, int threads = 0);

// The one rule for a round trip's output, shared by `simulate` and `quantize`: every element must be
// finite. A finite input can still leave a scheme's range (f16 overflows above 65504, a ggml scale
// beyond f16 becomes infinite); that is bad input for the scheme, not a result. Throws InputError
// "[SOURCE: ]keys through 'SPEC' are not finite at [r, c]: the input value V at [r, c'] exceeds the
// scheme's range" (V: the row's largest magnitude; "values" for Role::value); `source` names the
// file the input came from, "" when generated.
void require_finite_roundtrip(ConstMatrixView input, ConstMatrixView output, const Scheme& scheme, Role role,
                              const std::string& source = "");

// Throws InputError naming the scheme when it cannot store a [tokens, head_dim] block.
void check_plan_shape(const EvalPlan& plan, int64_t tokens, int64_t head_dim);

// True when a K or V scheme of `plan` runs a plugin's code (traits().from_plugin, wrappers included).
bool plan_uses_plugins(const EvalPlan& plan);

// evaluate() in a forked child process (isolation.h), so that a plugin scheme that crashes, calls
// exit() or loops forever fails this evaluation instead of the whole process. The result is the
// same as evaluate()'s (every PairResult field; k and v are the plan's schemes). The child runs
// with one thread whatever `threads` says (libgomp is not fork-safe once the parent has used its
// pool); `threads` is kept so callers can swap one call for the other. An InputError in the child
// comes back as an InputError with the same message, any other exception as std::runtime_error,
// and a crash, exit or timeout as a PluginFault naming the plan's plugin schemes, where their
// plugins came from and the signal, e.g. "plugin scheme 'nf4:group=64' (from --plugin
// /x/libnf4.so) crashed: SIGSEGV (Segmentation fault)". Only the CPU evaluates in the child: a
// plan with another backend is an InputError (a GPU context does not survive fork).
EvalResult evaluate_isolated(const EvalPlan& plan, size_t case_count, const CaseSource& source, int threads = 0,
                             const IsolationOptions& options = {});
EvalResult evaluate_isolated(const EvalPlan& plan, size_t case_count, const SharedCaseSource& source,
                             int threads = 0, const IsolationOptions& options = {});

// Serialization of an EvalResult without its schemes (the bytes evaluate_isolated's child sends);
// decode_eval_result re-fills PairResult::k and ::v from `plan`. Throws std::runtime_error on bytes
// it did not write.
std::string encode_eval_result(const EvalResult& result);
EvalResult decode_eval_result(std::string_view bytes, const EvalPlan& plan);

}  // namespace kvtune
