// Making the synthetic cases: the bulk normal draws against libstdc++'s one-at-a-time draws of the
// same values (counter `speedup`, both timed in the same process, best against best), and one case
// per context of a workload with the knobs of sweeps/recommend.toml's [workload] on
// llama-3.1-8b's shape (outliers, offsets, sinks, needles, recency, RoPE at theta 500 000 with the
// preset's llama3 scaling), stated here: no model preset's generic profile or layer overrides, no
// calibration set.
//
//   build/tests/bench/bench_workload --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "best_seconds.h"
#include "kvtune/numeric/normal_draws.h"
#include "kvtune/workload.h"

namespace {

// A [4096, 128] matrix's worth of draws per iteration, as Sampler::fill makes a case's keys.
void BM_NormalDraws(benchmark::State& state) {
  const size_t n = 4096 * 128;
  std::vector<float> out(n);
  kvtune::NormalDraws bulk(1);
  std::mt19937_64 engine(1);
  std::normal_distribution<double> normal(0.0, 1.0);
  const auto one_at_a_time = [&] {
    for (float& v : out) v = static_cast<float>(0.5 * normal(engine));
    benchmark::DoNotOptimize(out.data());
  };
  const auto in_bulk = [&] {
    bulk.fill(out.data(), n, 0.5);
    benchmark::DoNotOptimize(out.data());
  };
  double best = 1e30;
  for (auto _ : state) {
    const double s = best_seconds(in_bulk, 1);
    state.SetIterationTime(s);
    best = std::min(best, s);
  }
  const double std_best = best_seconds(one_at_a_time, 20);
  state.counters["ns_per_draw"] = 1e9 * best / double(n);
  state.counters["std_ns_per_draw"] = 1e9 * std_best / double(n);
  state.counters["speedup"] = std_best / best;
}
BENCHMARK(BM_NormalDraws)->UseManualTime()->Unit(benchmark::kMillisecond);

kvtune::WorkloadConfig recommend_like(int64_t tokens) {
  kvtune::WorkloadConfig cfg;
  cfg.tokens = tokens;
  cfg.head_dim = 128;
  cfg.layers = 32;
  cfg.kv_heads = 8;
  cfg.q_per_kv = 4;
  cfg.queries = 5;
  cfg.rope.enabled = true;
  cfg.rope.theta = 500000.0;
  cfg.rope.scaling = {kvtune::RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192.0};  // configs/models/llama-3.1-8b.toml
  cfg.keys.outlier_count = 4;
  cfg.keys.outlier_scale = 10.0;
  cfg.keys.channel_offset = 1.0;
  cfg.sinks.count = 4;
  cfg.sinks.key_norm = 8.0;
  cfg.sinks.mass = 0.3;
  cfg.needles.depths = {0.1, 0.35, 0.6, 0.9};
  cfg.needles.mass = 0.5;
  cfg.recency.strength = 3.0;
  cfg.recency.tokens = 256;
  return cfg;
}

void BM_GenerateCase(benchmark::State& state) {
  const kvtune::WorkloadConfig cfg = recommend_like(state.range(0));
  for (auto _ : state) benchmark::DoNotOptimize(kvtune::generate_case(cfg, 0, 15, 0));
  // Seconds per token, printed with its unit (us, ns).
  state.counters["per_token"] = benchmark::Counter(
      double(state.range(0)), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_GenerateCase)->Arg(32768)->Arg(131072)->ArgName("T")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
