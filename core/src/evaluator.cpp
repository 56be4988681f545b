#include "kvtune/evaluator.h"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <numeric>

#include "attention_kernels.h"
#include "kvtune/attention.h"
#include "kvtune/error.h"

namespace kvtune {
namespace {

using Samples = std::array<std::vector<double>, kMetricCount>;

// One pair's (or one key configuration's) samples of one case.
struct CaseSamples {
  Samples metrics;
  std::vector<std::array<std::vector<double>, 2>> depths;  // per needle depth: hit, mass ratio
  std::vector<double> kernel_vs_sim;                       // kernel mode only
  std::string kernel_gap;  // kernel mode: why the backend declined the pair ("" when it ran it)
};

// |a - b| / |b| per row of two [rows, d] outputs (|a - b| when b is zero).
std::vector<double> relative_rows(const double* a, const double* b, int64_t rows, int64_t d) {
  std::vector<double> out;
  for (int64_t i = 0; i < rows; ++i) {
    double num = 0.0, den = 0.0;
    for (int64_t e = 0; e < d; ++e) {
      const double diff = a[i * d + e] - b[i * d + e];
      num += diff * diff;
      den += b[i * d + e] * b[i * d + e];
    }
    out.push_back(den > 0.0 ? std::sqrt(num / den) : std::sqrt(num));
  }
  return out;
}

// A branch-free scan (it vectorizes): a float is finite unless its exponent bits are all ones.
bool all_finite(std::span<const float> x) {
  uint32_t special = 0;
  for (float f : x) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    special |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return special == 0;
}

void push(Samples& s, Metric m, double v) { s[static_cast<size_t>(m)].push_back(v); }

// The k largest entries of p (ties: the lower index first), sorted by index, and the arg-max (the
// first largest). One pass that keeps the best k so far: most entries cost one comparison.
struct Top {
  std::vector<int64_t> indices;
  int64_t first = 0;
};

Top top_indices(const double* p, int64_t n, int64_t k) {
  std::vector<int64_t> best;  // by p descending, then index ascending
  best.reserve(static_cast<size_t>(k) + 1);
  auto insert = [&](int64_t j) {
    auto at = std::upper_bound(best.begin(), best.end(), j, [&](int64_t a, int64_t b) { return p[a] > p[b]; });
    best.insert(at, j);
    if (int64_t(best.size()) > k) best.pop_back();
  };
  int64_t j = 0;
  for (; j < n && int64_t(best.size()) < k; ++j) insert(j);
  // A later index loses every tie, so only a strictly larger value displaces the k-th: the scan
  // skips to the next such entry (32 probabilities per vector reduction).
  while (k > 0 && (j = kernels::first_above(p, j, n, p[best.back()])) < n) insert(j++);
  Top top{best, best.empty() ? 0 : best.front()};
  std::sort(top.indices.begin(), top.indices.end());
  return top;
}

// The reference's ranking per query (top-k and arg-max), computed once per case for every K
// configuration.
using ReferenceRanks = std::vector<Top>;

// How many tokens rank above `token` in p (ties broken by index, as the arg-max does).
int64_t rank_of(const double* p, int64_t n, int64_t token) {
  int64_t above = 0;
  for (int64_t j = 0; j < n; ++j) above += (p[j] > p[token] || (p[j] == p[token] && j < token)) ? 1 : 0;
  return above;
}

// Key-side metrics of one key configuration against the reference, per query; needle metrics per
// planted needle, overall and by depth.
void key_metrics(const Case& c, const AttentionScores& ref, const AttentionScores& q, int64_t topk,
                 const ReferenceRanks& ranks, CaseSamples& samples) {
  Samples& out = samples.metrics;
  samples.depths.assign(c.needle_depths.size(), {});
  const int64_t t = ref.tokens;
  const int64_t k = std::min(topk, t);
  auto needle = c.needles.begin();
  for (int64_t i = 0; i < ref.queries; ++i) {
    const double* pr = ref.prob_row(i);
    const double* pq = q.prob_row(i);
    const kernels::LogitErrors err = kernels::logit_errors(ref.logit_row(i), q.logit_row(i), pr,
                                                           ref.log_norm[size_t(i)], q.log_norm[size_t(i)], t);
    const Top top = top_indices(pq, t, k);
    std::vector<int64_t> common;
    std::set_intersection(top.indices.begin(), top.indices.end(), ranks[size_t(i)].indices.begin(),
                          ranks[size_t(i)].indices.end(), std::back_inserter(common));
    push(out, Metric::max_logit_err, err.max_err);
    push(out, Metric::shift_logit_err, err.shift_err);
    push(out, Metric::attn_kl, std::max(err.kl, 0.0));
    push(out, Metric::top1_agree, top.first == ranks[size_t(i)].first ? 1.0 : 0.0);
    push(out, Metric::topk_overlap, double(common.size()) / double(k));
    const auto first = needle;
    while (needle != c.needles.end() && needle->query == i) ++needle;
    const int64_t planted = needle - first;
    for (auto n = first; n != needle; ++n) {
      const double hit = rank_of(pq, t, n->token) < planted ? 1.0 : 0.0;
      const double ratio = pq[n->token] / pr[n->token];
      push(out, Metric::needle_hit, hit);
      push(out, Metric::needle_mass_ratio, ratio);
      samples.depths[static_cast<size_t>(n->depth)][0].push_back(hit);
      samples.depths[static_cast<size_t>(n->depth)][1].push_back(ratio);
    }
  }
}

// Estimated logits (schemes that never round-trip keys) must be finite too; there is no single
// input value to name, so the position is [query, token].
void require_finite_logits(ConstMatrixView raw, const Scheme& scheme, const std::string& source) {
  for (int64_t i = 0; i < raw.size(); ++i) {
    if (!std::isfinite(raw.data[i])) {
      throw InputError((source.empty() ? "" : source + ": ") + "logits of keys through '" + scheme.spec() +
                       "' are not finite at [" + std::to_string(i / raw.cols) + ", " +
                       std::to_string(i % raw.cols) + "]: the input exceeds the scheme's range");
    }
  }
}

// Storage one thread reuses across key configurations, cases and evaluate() calls: a round trip's
// output and every score set (fresh buffers of [T, D] would page-fault on every call). The cache is
// on cache-line boundaries, as a Matrix is, so the codecs' 64-byte vectors never straddle two lines
// (0.28-0.32 -> 0.25-0.27 µs per pair and token at T = 32 768, bench_evaluator).
struct Workspace {
  std::vector<float, CacheLineAllocator<float>> cache;  // one round-tripped K or V cache at a time
  std::vector<float, CacheLineAllocator<float>> slice;  // one round-tripped slice of K or V rows
  AttentionScores ref;
  std::vector<AttentionScores> k_scores;
  std::vector<double> ref_out, outs;

  MatrixView cache_like(ConstMatrixView x) {
    cache.resize(static_cast<size_t>(x.size()));
    return {cache.data(), x.rows, x.cols};
  }
  MatrixView slice_of(int64_t rows, int64_t cols) {
    slice.resize(static_cast<size_t>(rows * cols));
    return {slice.data(), rows, cols};
  }
};

// How a cache is round-tripped: a slice of `rows` at a time through `scheme`, or the whole cache at
// once (rows 0). Each slice's round trip and its products (logits of keys, outputs of values) then
// meet in L2, where the whole cache's round trip went out to memory and was read back
// (bench_evaluator at T = 131 072: see docs/performance.md).
struct Slicing {
  SchemePtr scheme;  // the scheme itself when its rows (or row blocks) are independent, else its
                     // scales fixed on x
  int64_t rows = 0;
};

// Slices of about 256 KiB, a multiple of kSliceAlignment tokens and of the scheme's row_block; the
// whole cache for a backend whose every call costs a transfer, a cache of one slice or less, a
// scheme whose rows depend on each other that does not fix its scales on x, or a slice shape the
// scheme refuses.
Slicing slicing_for(const SchemePtr& scheme, ConstMatrixView x, const EvalBackend& backend) {
  if (!backend.roundtrips_slices_cheaply() || scheme->estimates_logits()) return {};
  const SchemeTraits traits = scheme->traits();
  const int64_t block = traits.rows_independent ? 1 : traits.row_block;  // 0: neither
  const int64_t unit = std::lcm(kSliceAlignment, std::max<int64_t>(block, 1));
  constexpr int64_t kSliceBytes = 256 * 1024;
  const int64_t rows = std::max<int64_t>(1, kSliceBytes / (x.cols * int64_t(sizeof(float))) / unit) * unit;
  if (rows >= x.rows) return {};
  const SchemePtr sliced = block > 0 ? scheme : scheme->with_scales_fixed_on(x);
  if (!sliced || (block == 0 && !sliced->traits().rows_independent)) return {};
  const int64_t last = x.rows % rows == 0 ? rows : x.rows % rows;
  if (!sliced->check_shape(rows, x.cols).empty() || !sliced->check_shape(last, x.cols).empty()) return {};
  return {sliced, rows};
}

Workspace& thread_workspace() {
  thread_local Workspace w;
  return w;
}

// Round-trips x through `scheme` and hands `use` the exact rows and their round trip (first row,
// exact, round trip): a slice at a time, while both are in cache, when the scheme allows it
// (slicing_for), else the whole cache at once.
template <typename Use>
void round_trip_then(const SchemePtr& scheme, ConstMatrixView x, const QuantContext& ctx, const EvalBackend& backend,
                     Workspace& ws, Use use) {
  const Slicing slicing = slicing_for(scheme, x, backend);
  if (slicing.rows == 0) {
    const MatrixView whole = ws.cache_like(x);
    backend.roundtrip(*scheme, x, ctx, whole);
    return use(0, x, whole);
  }
  for (int64_t first = 0; first < x.rows; first += slicing.rows) {
    const MatrixView part = ws.slice_of(std::min(slicing.rows, x.rows - first), x.cols);
    const ConstMatrixView exact = x.row_range(first, part.rows);
    backend.roundtrip(*slicing.scheme, exact, rows_context(ctx, first, part.rows), part);
    use(first, exact, part);
  }
}

// The scores of keys through `scheme`, and when `reference` is given the exact keys' scores too,
// from the same slices.
void key_scores(const SchemePtr& scheme, const Case& c, const QuantContext& ctx, const EvalBackend& backend,
                Precision precision, Workspace& ws, AttentionScores& out, AttentionScores* reference) {
  if (scheme->estimates_logits()) {
    if (reference) attention_scores(c.queries, c.keys, *reference, precision, c.logit_softcap);
    const auto packed = scheme->quantize(c.keys, ctx);
    Matrix raw(c.queries.rows(), c.keys.rows());
    scheme->logits(c.queries, packed, c.keys.rows(), ctx, raw);
    require_finite_logits(raw, *scheme, c.keys_file);
    out = scores_from_raw_logits(raw, c.keys.cols(), precision, c.logit_softcap);
    return;
  }
  begin_scores(c.queries.rows(), c.keys.rows(), out, c.logit_softcap);
  if (reference) begin_scores(c.queries.rows(), c.keys.rows(), *reference, c.logit_softcap);
  round_trip_then(scheme, c.keys, ctx, backend, ws, [&](int64_t first, ConstMatrixView exact, ConstMatrixView part) {
    if (reference) add_logits(c.queries, first, exact, *reference, precision);
    add_logits(c.queries, first, part, out, precision);
  });
  if (reference) finish_scores(*reference, precision);
  finish_scores(out, precision);
  // A non-finite key makes its logits non-finite, so the whole round trip runs again only to name it.
  if (!kernels::all_finite(out.logits.data(), int64_t(out.logits.size()))) {
    const MatrixView keys = ws.cache_like(c.keys);
    backend.roundtrip(*scheme, c.keys, ctx, keys);
    require_finite_roundtrip(c.keys, keys, *scheme, Role::key, c.keys_file);
  }
}

// The scheme to run on this case: calibrated on the case's sample when it has one.
SchemePtr calibrated(const SchemePtr& scheme, const Case& c, Role role) {
  const std::optional<double>& loaded = role == Role::key ? c.k_static_scale : c.v_static_scale;
  if (loaded && scheme->traits().static_scales) {
    if (SchemePtr fixed = scheme->with_static_scale(*loaded)) return fixed;
  }
  if (c.calibration.empty()) return scheme;
  const CalibrationSample& s = c.calibration;
  // A per-head scale sees its own head's draws; any other the whole set (a layer-wide one with
  // granularity = layer).
  const bool own_head = scheme->traits().calibrates_per_head;
  const int64_t first = own_head ? s.head_first : 0, rows = own_head ? s.head_rows : s.keys.rows();
  const ConstMatrixView sample = (role == Role::key ? s.keys : s.values).view().row_range(first, rows);
  const QuantContext ctx{role, std::span<const int64_t>(s.positions).subspan(size_t(first), size_t(rows)), c.seed,
                         &c.rope};
  return scheme->calibrate(sample, ctx);
}

// Per-pair samples of one case.
std::vector<CaseSamples> evaluate_case(const EvalPlan& plan, const Case& c) {
  const EvalBackend& backend = plan.backend ? *plan.backend : *cpu_backend();
  Workspace& ws = thread_workspace();
  const AttentionScores& ref = ws.ref;
  const int64_t d = c.values.cols(), nq = c.queries.rows();
  const int64_t k = std::min(plan.topk, c.keys.rows());
  ReferenceRanks ranks;
  // The reference scores come with the first K configuration's pass (from its slices when it takes
  // them), else on their own; the ranking once they are in.
  if (plan.k_schemes.empty()) attention_scores(c.queries, c.keys, ws.ref, plan.precision, c.logit_softcap);
  const auto rank_reference = [&] {
    for (int64_t i = 0; i < nq; ++i) ranks.push_back(top_indices(ref.prob_row(i), ref.tokens, k));
  };

  QuantContext kctx{Role::key, c.positions, c.seed, &c.rope};
  QuantContext vctx{Role::value, c.positions, c.seed, &c.rope};
  std::vector<SchemePtr> k_run;  // the schemes as run on this case (calibrated)
  // Grown, never shrunk: a later batch with more K configurations would page-fault fresh buffers.
  if (ws.k_scores.size() < plan.k_schemes.size()) ws.k_scores.resize(plan.k_schemes.size());
  std::vector<CaseSamples> k_samples(plan.k_schemes.size());
  for (size_t i = 0; i < plan.k_schemes.size(); ++i) {
    k_run.push_back(calibrated(plan.k_schemes[i], c, Role::key));
    key_scores(k_run.back(), c, kctx, backend, plan.precision, ws, ws.k_scores[i], i == 0 ? &ws.ref : nullptr);
    if (i == 0) rank_reference();
    key_metrics(c, ref, ws.k_scores[i], plan.topk, ranks, k_samples[i]);
    if (plan.on_step) plan.on_step();
  }

  // Per V configuration one pass over its round-tripped values serves the stacked probabilities of
  // every K configuration paired with it.
  std::vector<CaseSamples> out(plan.pairs.size());
  bool reference_done = false;
  for (size_t v = 0; v < plan.v_schemes.size(); ++v) {
    std::vector<size_t> ks;  // K configurations paired with v, each once, in plan order
    for (const EvalPair& pair : plan.pairs) {
      if (pair.v == v && std::find(ks.begin(), ks.end(), pair.k) == ks.end()) ks.push_back(pair.k);
    }
    if (ks.empty()) {
      if (plan.on_step) plan.on_step();
      continue;
    }
    const SchemePtr v_run = calibrated(plan.v_schemes[v], c, Role::value);
    // The probability rows of every K configuration paired with v, stacked: float32 ones (rounded
    // once per K configuration, probs32) for float32 products.
    const bool f32 = plan.precision == Precision::float32;
    std::vector<const float*> rows32, ref32;
    std::vector<const double*> rows64, ref64;
    for (int64_t i = 0; i < nq; ++i) f32 ? ref32.push_back(ref.prob32_row(i)) : ref64.push_back(ref.prob_row(i));
    for (size_t kk : ks) {
      for (int64_t i = 0; i < nq; ++i) {
        f32 ? rows32.push_back(ws.k_scores[kk].prob32_row(i)) : rows64.push_back(ws.k_scores[kk].prob_row(i));
      }
    }
    ws.outs.assign(ks.size() * size_t(nq * d), 0.0);
    // The reference output (exact values, reference probabilities) comes with the first V
    // configuration's pass, from each slice of values while the round trip has it in cache.
    const bool with_reference = !reference_done;
    if (with_reference) ws.ref_out.assign(size_t(nq * d), 0.0);
    const auto add_products = [&](int64_t first, ConstMatrixView exact, ConstMatrixView part) {
      if (with_reference) {
        f32 ? add_attention_outputs(ref32, first, exact, ws.ref_out.data())
            : add_attention_outputs(ref64, first, exact, ws.ref_out.data());
      }
      f32 ? add_attention_outputs(rows32, first, part, ws.outs.data())
          : add_attention_outputs(rows64, first, part, ws.outs.data());
    };
    round_trip_then(v_run, c.values, vctx, backend, ws, add_products);
    reference_done = true;
    // p · inf and 0 · inf are both non-finite: a non-finite value always reaches the outputs. The
    // whole round trip again names it (a slice's first row is not the cache's).
    if (!kernels::all_finite(ws.outs.data(), int64_t(ws.outs.size()))) {
      const MatrixView values = ws.cache_like(c.values);
      backend.roundtrip(*v_run, c.values, vctx, values);
      require_finite_roundtrip(c.values, values, *v_run, Role::value, c.values_file);
    }

    for (size_t p = 0; p < plan.pairs.size(); ++p) {
      const EvalPair& pair = plan.pairs[p];
      if (pair.v != v) continue;
      out[p] = k_samples[pair.k];
      const size_t block = size_t(std::find(ks.begin(), ks.end(), pair.k) - ks.begin());
      const double* o = ws.outs.data() + block * size_t(nq * d);
      std::vector<double> kernel_out;
      const bool capped = c.logit_softcap > 0.0 && !backend.fused_attention_caps_logits();
      if (auto kernel = capped ? std::nullopt : backend.fused_attention(*k_run[pair.k], *v_run, c)) {
        out[p].kernel_vs_sim = relative_rows(kernel->data(), o, nq, d);
        kernel_out = std::move(*kernel);
        o = kernel_out.data();
      } else if (backend.fuses_attention()) {
        // The simulator's product stands in for the kernel: say so, and why, instead of reporting it
        // under the kernel's name.
        out[p].kernel_gap = capped ? "the fused kernel applies no logit softcap (the workload's logit_softcap)"
                                   : backend.fused_attention_gap(*k_run[pair.k], *v_run, d);
        if (out[p].kernel_gap.empty()) out[p].kernel_gap = "the " + backend.name() + " backend returned no output";
      }
      out[p].metrics[static_cast<size_t>(Metric::rel_out_err)] = relative_rows(o, ws.ref_out.data(), nq, d);
    }
    if (plan.on_step) plan.on_step();
  }
  return out;
}

}  // namespace

void require_finite_roundtrip(ConstMatrixView input, ConstMatrixView output, const Scheme& scheme, Role role,
                              const std::string& source) {
  if (all_finite(output.span())) return;
  for (int64_t i = 0; i < output.size(); ++i) {
    if (std::isfinite(output.data[i])) continue;
    // A block scheme (q8_0) overflows a whole group through its scale, so the culprit is the row's
    // largest input, not necessarily the element at the first non-finite output.
    const int64_t row = i / output.cols;
    const float* in = input.row(row);
    const int64_t col = std::max_element(in, in + input.cols, [](float a, float b) { return std::abs(a) < std::abs(b); }) - in;
    char value[32];  // the float's shortest round-trip spelling: 1e+38, not 9.99999968e+37
    const std::string v(value, std::to_chars(value, value + sizeof value, in[col]).ptr);
    throw InputError((source.empty() ? "" : source + ": ") + (role == Role::key ? "keys" : "values") + " through '" +
                     scheme.spec() + "' are not finite at [" + std::to_string(row) + ", " +
                     std::to_string(i % output.cols) + "]: the input value " + v + " at [" +
                     std::to_string(row) + ", " + std::to_string(col) + "] exceeds the scheme's range");
  }
}

void check_plan_shape(const EvalPlan& plan, int64_t tokens, int64_t head_dim) {
  for (const auto* list : {&plan.k_schemes, &plan.v_schemes}) {
    for (const SchemePtr& s : *list) {
      const std::string why = s->check_shape(tokens, head_dim);
      if (!why.empty()) throw InputError(why);
    }
  }
}

EvalResult evaluate(const EvalPlan& plan, size_t case_count, const CaseSource& source, int threads) {
  const SharedCaseSource shared = [&](size_t i) { return std::make_shared<const Case>(source(i)); };
  return evaluate(plan, case_count, shared, threads);
}

EvalResult evaluate(const EvalPlan& plan, size_t case_count, const SharedCaseSource& source, int threads) {
  std::vector<std::vector<CaseSamples>> per_case(case_count);
  std::vector<double> depths;  // the needle depths of case 0 (every case of one workload shares them)
  std::vector<std::exception_ptr> errors(case_count);
  std::vector<std::array<int64_t, 3>> shapes(case_count);  // tokens, head_dim, queries
  const int n = static_cast<int>(std::max<size_t>(1, std::min<size_t>(case_count, threads > 0 ? threads : omp_get_max_threads())));
#pragma omp parallel for schedule(dynamic, 1) num_threads(n)
  for (size_t i = 0; i < case_count; ++i) {
    try {
      const std::shared_ptr<const Case> held = source(i);
      const Case& c = *held;
      check_plan_shape(plan, c.keys.rows(), c.keys.cols());
      shapes[i] = {c.keys.rows(), c.keys.cols(), c.queries.rows()};
      if (i == 0) depths = c.needle_depths;
      per_case[i] = evaluate_case(plan, c);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }

  EvalResult result;
  result.backend = plan.backend ? plan.backend->name() : "cpu";
  result.precision = plan.precision;
  result.cases = static_cast<int64_t>(case_count);
  if (case_count > 0) {
    // The longest case: a sliding-window layer's cases hold only their window.
    for (const auto& shape : shapes) result.tokens = std::max(result.tokens, shape[0]);
    result.head_dim = shapes[0][1];
    result.queries_per_case = shapes[0][2];
  }
  for (size_t p = 0; p < plan.pairs.size(); ++p) {
    PairResult r;
    r.name = plan.pairs[p].name;
    r.k = plan.k_schemes[plan.pairs[p].k];
    r.v = plan.v_schemes[plan.pairs[p].v];
    r.k_bits = r.k->bits_per_element(result.tokens, result.head_dim);
    r.v_bits = r.v->bits_per_element(result.tokens, result.head_dim);
    for (double depth : depths) r.needle_depths.push_back({depth, {}, {}});
    std::string gap;  // the first case the kernel declined decides the label
    for (size_t i = 0; i < case_count; ++i) {
      const CaseSamples& cs = per_case[i][p];
      for (size_t m = 0; m < kMetricCount; ++m) {
        r.samples[m].insert(r.samples[m].end(), cs.metrics[m].begin(), cs.metrics[m].end());
        r.case_sizes[m].push_back(cs.metrics[m].size());
      }
      r.kernel_vs_sim.insert(r.kernel_vs_sim.end(), cs.kernel_vs_sim.begin(), cs.kernel_vs_sim.end());
      r.kernel_case_sizes.push_back(cs.kernel_vs_sim.size());
      if (gap.empty()) gap = cs.kernel_gap;
      for (size_t k = 0; k < std::min(cs.depths.size(), r.needle_depths.size()); ++k) {
        DepthSamples& dst = r.needle_depths[k];
        dst.hit.insert(dst.hit.end(), cs.depths[k][0].begin(), cs.depths[k][0].end());
        dst.mass_ratio.insert(dst.mass_ratio.end(), cs.depths[k][1].begin(), cs.depths[k][1].end());
        dst.case_sizes.push_back(cs.depths[k][0].size());
      }
    }
    r.backend_used = gap.empty() ? result.backend : "cpu (no fused kernel for this pair: " + gap + ")";
    result.pairs.push_back(std::move(r));
  }
  return result;
}

}  // namespace kvtune
