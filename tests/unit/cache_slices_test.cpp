// The evaluator round-trips keys and values whose rows are independent
// (SchemeTraits::rows_independent) a slice of rows at a time and forms the products from each slice
// while it is in cache: the reference scores within the first K configuration's pass, the reference
// output within the first V configuration's (evaluator.cpp, slice_rows). Every metric must keep the
// bits of the whole-cache path, which a backend that declines slices takes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>

#include "builtin.h"
#include "kvtune/attention.h"
#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/scenario.h"
#include "kvtune/workload.h"
#include "test_support.h"

namespace kvtune {
namespace {

// The CPU backend's round trips, counted, with or without slices.
class CountingBackend final : public EvalBackend {
 public:
  explicit CountingBackend(bool slices) : slices_(slices) {}
  std::string name() const override { return "cpu"; }
  void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    ++calls;
    scheme.roundtrip(x, ctx, out);
  }
  bool roundtrips_slices_cheaply() const override { return slices_; }
  mutable std::atomic<int> calls{0};

 private:
  bool slices_;
};

// 1 300 tokens at head_dim 128: slices of 512, 512 and 276 rows (256 KiB each).
WorkloadConfig sliced_workload() {
  WorkloadConfig cfg;
  cfg.tokens = 1300;
  cfg.head_dim = 128;
  cfg.queries = 4;
  cfg.keys.outlier_count = 3;
  cfg.keys.outlier_scale = 15;
  cfg.rope.enabled = true;
  cfg.needles.depths = {0.25, 0.75};
  return cfg;
}

struct Paths {
  EvalResult whole, sliced;
  int whole_calls = 0, sliced_calls = 0;
};

Paths whole_and_sliced(const std::vector<PairRequest>& pairs, Precision precision) {
  const WorkloadConfig cfg = sliced_workload();
  Paths p;
  for (bool slices : {false, true}) {
    EvalPlan plan = build_plan(pairs, builtin_registry(), 8);
    plan.precision = precision;
    const auto backend = std::make_shared<CountingBackend>(slices);
    plan.backend = backend;
    EvalResult r = evaluate(plan, 2, [&](size_t i) { return generate_case(cfg, 40 + i); }, 1);
    (slices ? p.sliced : p.whole) = std::move(r);
    (slices ? p.sliced_calls : p.whole_calls) = backend->calls.load();
  }
  return p;
}

void expect_equal_samples(const EvalResult& a, const EvalResult& b) {
  ASSERT_EQ(a.pairs.size(), b.pairs.size());
  for (size_t p = 0; p < a.pairs.size(); ++p) {
    for (size_t m = 0; m < kMetricCount; ++m) {
      const auto& x = a.pairs[p].samples[m];
      const auto& y = b.pairs[p].samples[m];
      ASSERT_EQ(x.size(), y.size()) << a.pairs[p].name << " " << metric_name(Metric(m));
      for (size_t i = 0; i < x.size(); ++i) {
        EXPECT_EQ(std::bit_cast<uint64_t>(x[i]), std::bit_cast<uint64_t>(y[i]))
            << a.pairs[p].name << " " << metric_name(Metric(m)) << " sample " << i << ": " << x[i] << " whole, " << y[i]
            << " sliced";
      }
    }
  }
}

// rel_out_err of query 0 of case 40 through k and v, from the public products over whole caches, as
// the evaluator forms it: the anchor that both paths are right, not merely alike.
double rel_out_err_by_hand(const std::string& k, const std::string& v, Precision precision) {
  const Case c = generate_case(sliced_workload(), 40);
  Matrix kq(c.keys.rows(), c.keys.cols()), vq(c.values.rows(), c.values.cols());
  testing::make_scheme(k)->roundtrip(c.keys, {Role::key, c.positions, c.seed, &c.rope}, kq);
  testing::make_scheme(v)->roundtrip(c.values, {Role::value, c.positions, c.seed, &c.rope}, vq);
  AttentionScores ref, got;
  attention_scores(c.queries, c.keys, ref, precision);
  attention_scores(c.queries, kq, got, precision);
  const std::vector<double> o_ref = attention_output(ref, c.values, precision), o = attention_output(got, vq, precision);
  double num = 0.0, den = 0.0;
  for (int64_t e = 0; e < c.values.cols(); ++e) {
    num += (o[size_t(e)] - o_ref[size_t(e)]) * (o[size_t(e)] - o_ref[size_t(e)]);
    den += o_ref[size_t(e)] * o_ref[size_t(e)];
  }
  return std::sqrt(num / den);
}

// Formats whose rows are independent (int per token, with and without groups, q8_0, q4_0, fp8 per
// token), int per channel in groups of 32 tokens (row_block: slices of whole groups), int per
// channel and fp8 per tensor, whose scales are fixed on the whole cache first, beside int per
// channel in groups of 32 with the first 4 tokens kept exact (a token policy: the whole cache at
// once). The first K and the first V configuration take the reference scores and output: sliced in
// one plan, whole in the other.
TEST(CacheSlices, EveryMetricKeepsTheWholeCachesBits) {
  const Matrix sample = generate_case(sliced_workload(), 40).keys;
  const std::string whole = "int:bits=4,axis=channel,group=32,sink_tokens=4";
  const std::vector<std::string> sliced_keys = {"q4_0", "int:bits=4,axis=channel",
                                                "int:bits=4,axis=channel,group=32,asym"};
  const std::vector<std::string> sliced_values = {"int:bits=4,axis=token", "q8_0",
                                                  "int:bits=4,axis=token,group=32,scale=f16",
                                                  "fp8:format=e4m3,scale=dynamic,granularity=token",
                                                  "int:bits=4,axis=channel", "fp8:format=e4m3,scale=dynamic"};
  const auto slices = [&](const std::string& spec) {
    const SchemePtr s = testing::make_scheme(spec);
    return s->traits().rows_independent || s->traits().row_block > 0 || s->with_scales_fixed_on(sample) != nullptr;
  };
  ASSERT_FALSE(slices(whole));
  for (const auto* list : {&sliced_keys, &sliced_values}) {
    for (const std::string& spec : *list) ASSERT_TRUE(slices(spec)) << spec;
  }
  for (bool reference_sliced : {true, false}) {
    std::vector<std::string> keys = sliced_keys, values = sliced_values;
    keys.insert(reference_sliced ? keys.end() : keys.begin(), whole);
    values.insert(reference_sliced ? values.end() : values.begin(), whole);
    std::vector<PairRequest> pairs;
    for (const std::string& k : keys) {
      for (const std::string& v : values) pairs.push_back({k + " / " + v, k, v, ""});
    }
    for (Precision precision : {Precision::float64, Precision::float32}) {
      SCOPED_TRACE(std::string(precision_name(precision)) + (reference_sliced ? ", reference sliced" : ", reference whole"));
      const Paths p = whole_and_sliced(pairs, precision);
      // Per case and configuration one round trip whole, three sliced (512 + 512 + 276 rows).
      EXPECT_EQ(p.whole_calls, 2 * (4 + 7));
      EXPECT_EQ(p.sliced_calls, 2 * (1 + 3 * 3 + 1 + 6 * 3));
      expect_equal_samples(p.whole, p.sliced);
      for (size_t i : {size_t(0), values.size() - 1, pairs.size() - values.size(), pairs.size() - 1}) {
        EXPECT_EQ(p.sliced.pairs[i].samples[size_t(Metric::rel_out_err)][0],
                  rel_out_err_by_hand(pairs[i].k, pairs[i].v, precision))
            << pairs[i].name;
      }
    }
  }
}

// Each thread slices into its own buffer: one thread or two give the same samples.
TEST(CacheSlices, ResultsDoNotDependOnTheThreadCount) {
  const WorkloadConfig cfg = sliced_workload();
  EvalPlan plan = build_plan({{"", "int:bits=4,axis=channel", "q8_0", ""}, {"", "q4_0", "int:bits=4,axis=token", ""}},
                             builtin_registry(), 8);
  plan.precision = Precision::float32;
  const auto source = [&](size_t i) { return generate_case(cfg, 60 + i); };
  expect_equal_samples(evaluate(plan, 4, source, 1), evaluate(plan, 4, source, 2));
}

// A key or value beyond the scheme's range in the second slice is named at its place in the whole
// cache.
TEST(CacheSlices, OutOfRangeErrorNamesTheRowInTheWholeCache) {
  for (Role role : {Role::key, Role::value}) {
    Case c = generate_case(sliced_workload(), 3);
    (role == Role::key ? c.keys : c.values)(700, 9) = 1e38f;
    c.keys_file = "k.npy";
    c.values_file = "v.npy";
    const bool key = role == Role::key;
    EvalPlan plan = build_plan({{"", key ? "q8_0" : "none", key ? "none" : "q8_0", ""}}, builtin_registry(), 8);
    const auto backend = std::make_shared<CountingBackend>(true);
    plan.backend = backend;
    try {
      evaluate(plan, 1, [&](size_t) { return c; });
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(key ? "k.npy: keys" : "v.npy: values") +
                                           " through 'q8_0' are not finite at [700, 0]: the input value 1e+38 at "
                                           "[700, 9] exceeds the scheme's range");
    }
    // The keys' three slices, the values' three if the keys passed, the whole cache to name the value.
    EXPECT_EQ(backend->calls.load(), key ? 3 + 1 : 3 + 3 + 1);
  }
}

}  // namespace
}  // namespace kvtune
