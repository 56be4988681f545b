// Fake-quant throughput of each family at T = 32768, D = 128, as a fraction of a memcpy of the same
// bytes measured in the same process (counters `of_memcpy`, best against best, and
// `of_memcpy_paired`, the median of back-to-back pairs), and one K/V pair evaluated at the same
// context with 16 queries.
//
//   build/tests/bench/bench_schemes --benchmark_min_time=0.5
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <vector>

#include "best_seconds.h"
#include "builtin.h"
#include "fp8/fp8_kernels.h"
#include "kvtune/evaluator.h"
#include "kvtune/scenario.h"
#include "kvtune/workload.h"

namespace {

constexpr int64_t kTokens = 32768;
constexpr int64_t kHeadDim = 128;

kvtune::Matrix keys_like() {
  std::mt19937_64 engine(1);
  std::normal_distribution<float> normal;
  kvtune::Matrix m(kTokens, kHeadDim);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(engine);
  for (int64_t r = 0; r < kTokens; ++r) m(r, 7) *= 20.0f;
  return m;
}

// The median over `pairs` back-to-back pairs of (a memcpy of x into y) / (round_trip, x to y): the two
// halves of a pair see the same moment of the machine and the same buffers, so drift between them
// cancels, where the best memcpy and the best round trip may come from different moments (the
// `none` scheme, itself a copy, read 0.97-1.19 of memcpy best against best and 1.01-1.03 paired in
// three full runs, docs/performance.md). An untimed memcpy comes first in each pair: a memcpy into
// a y that the previous round trip wrote with streaming stores took 1.76 ms against 1.24 after
// normal stores (16 MiB), which had flattered the streaming codecs (int per channel) by 1.4x.
template <class F>
double paired_share(const kvtune::Matrix& x, kvtune::Matrix& y, F&& round_trip, int pairs) {
  const size_t bytes = static_cast<size_t>(x.size()) * sizeof(float);
  const auto copy_into_y = [&] {
    std::memcpy(y.data(), x.data(), bytes);
    benchmark::DoNotOptimize(y.data());
  };
  std::vector<double> ratios;
  for (int i = 0; i < pairs; ++i) {
    copy_into_y();  // y as a memcpy leaves it, whatever stores the last round trip used
    ratios.push_back(best_seconds(copy_into_y, 1) / best_seconds(round_trip, 1));
  }
  std::nth_element(ratios.begin(), ratios.begin() + pairs / 2, ratios.end());
  return ratios[size_t(pairs / 2)];
}

// Times `round_trip` (x to y) against a memcpy of the same bytes: the best of many memcpy runs
// before and after, in this process (the shared machine's bandwidth drifts; the best run is the
// stable one), over the best round trip (best against best: both see the least disturbed machine);
// and paired_share as `of_memcpy_paired`.
template <class F>
void time_against_memcpy(benchmark::State& state, const kvtune::Matrix& x, kvtune::Matrix& y, F&& round_trip) {
  kvtune::Matrix copy(kTokens, kHeadDim);
  const size_t bytes = static_cast<size_t>(x.size()) * sizeof(float);
  auto copy_once = [&] {
    std::memcpy(copy.data(), x.data(), bytes);
    benchmark::DoNotOptimize(copy.data());
  };
  double memcpy_s = best_seconds(copy_once, 50);
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    round_trip();
    benchmark::DoNotOptimize(y.data());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    best = std::min(best, s);
  }
  memcpy_s = std::min(memcpy_s, best_seconds(copy_once, 50));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
  state.counters["of_memcpy"] = memcpy_s / best;
  state.counters["of_memcpy_paired"] = paired_share(x, y, round_trip, 41);
  state.counters["best_ms"] = 1e3 * best;
  state.counters["memcpy_ms"] = 1e3 * memcpy_s;
}

void BM_FakeQuant(benchmark::State& state, const char* spec) {
  const kvtune::SchemePtr scheme = kvtune::builtin_registry().make(spec);
  const kvtune::Matrix x = keys_like();
  kvtune::Matrix y(kTokens, kHeadDim);
  time_against_memcpy(state, x, y, [&] { scheme->roundtrip(x, {}, y); });
  state.counters["bits"] = scheme->bits_per_element(kTokens, kHeadDim);
}

// What memory alone allows a codec, on the same bytes: one pass that reads x and writes y = x / 2,
// and two passes, the largest |x| first (read only) and then that write pass, the shape of every
// codec whose scales need all of x before its first output (int per channel, dynamic nvfp4).
void BM_MemoryBound(benchmark::State& state, bool two_passes) {
  const kvtune::Matrix x = keys_like();
  kvtune::Matrix y(kTokens, kHeadDim);
  time_against_memcpy(state, x, y, [&] {
    float half = 0.5f;
    if (two_passes) half = kvtune::builtin::fp8_kernels::abs_max(x.data(), x.size()) > 0.0f ? 0.5f : 1.0f;
    for (int64_t i = 0; i < x.size(); ++i) y.data()[i] = x.data()[i] * half;
  });
}
BENCHMARK_CAPTURE(BM_MemoryBound, one_pass, false)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_MemoryBound, two_passes, true)->UseManualTime()->Unit(benchmark::kMillisecond);

#define KVTUNE_FAKE_QUANT(name, spec) \
  BENCHMARK_CAPTURE(BM_FakeQuant, name, spec)->UseManualTime()->Unit(benchmark::kMillisecond)

KVTUNE_FAKE_QUANT(none, "none");
KVTUNE_FAKE_QUANT(f16, "f16");
KVTUNE_FAKE_QUANT(bf16, "bf16");
KVTUNE_FAKE_QUANT(int8_tensor, "int:bits=8,axis=tensor");
KVTUNE_FAKE_QUANT(int8_channel, "int:bits=8,axis=channel");
KVTUNE_FAKE_QUANT(int8_token, "int:bits=8,axis=token");
KVTUNE_FAKE_QUANT(int4_channel, "int:bits=4,axis=channel");
KVTUNE_FAKE_QUANT(int4_token, "int:bits=4,axis=token");
KVTUNE_FAKE_QUANT(int4_channel_g32_asym, "int:bits=4,axis=channel,group=32,asym");
KVTUNE_FAKE_QUANT(int4_token_g32_f16, "int:bits=4,axis=token,group=32,scale=f16");
KVTUNE_FAKE_QUANT(int2_channel_g32_asym, "int:bits=2,axis=channel,group=32,asym");
KVTUNE_FAKE_QUANT(int3_token_asym, "int:bits=3,axis=token,asym");
KVTUNE_FAKE_QUANT(fp8_e4m3_unit, "fp8:format=e4m3,scale=unit");
KVTUNE_FAKE_QUANT(fp8_e4m3_static, "fp8:format=e4m3,scale=static,value=0.05");
KVTUNE_FAKE_QUANT(fp8_e4m3_dynamic_token, "fp8:format=e4m3,scale=dynamic,granularity=token");
KVTUNE_FAKE_QUANT(fp8_e5m2_unit, "fp8:format=e5m2,scale=unit");
KVTUNE_FAKE_QUANT(fp8_e5m2_dynamic_token, "fp8:format=e5m2,scale=dynamic,granularity=token");
KVTUNE_FAKE_QUANT(q8_0, "q8_0");
KVTUNE_FAKE_QUANT(q8_0_x86, "q8_0:variant=x86");
KVTUNE_FAKE_QUANT(q4_0, "q4_0");
KVTUNE_FAKE_QUANT(q4_1, "q4_1");
KVTUNE_FAKE_QUANT(q5_0, "q5_0");
KVTUNE_FAKE_QUANT(q5_1, "q5_1");
KVTUNE_FAKE_QUANT(iq4_nl, "iq4_nl");
KVTUNE_FAKE_QUANT(q4_0_hadamard, "q4_0:rotation=hadamard");
KVTUNE_FAKE_QUANT(q4_0_random, "q4_0:rotation=random");
KVTUNE_FAKE_QUANT(mxfp4, "mxfp4");
KVTUNE_FAKE_QUANT(mxfp8, "mxfp8");
KVTUNE_FAKE_QUANT(nvfp4, "nvfp4");
// The other formats the runtime tables emit (configs/runtimes/*.toml): nvfp4 with a fixed tensor
// scale (vLLM's and SGLang's without checkpoint scales; a calibrated scale runs the same path),
// SGLang's fp4_mx_block16, transformers' quantized cache (per-token groups of 64, asymmetric, the
// last 128 tokens kept).
KVTUNE_FAKE_QUANT(nvfp4_static, "nvfp4:scale=static,value=1");
KVTUNE_FAKE_QUANT(mxfp4_b16_away, "mxfp4:block=16,round=away");
KVTUNE_FAKE_QUANT(int8_token_g64_hf, "int:bits=8,axis=token,group=64,asym,residual_window=128");
KVTUNE_FAKE_QUANT(int4_token_g64_hf, "int:bits=4,axis=token,group=64,asym,residual_window=128");
KVTUNE_FAKE_QUANT(int2_token_g64_hf, "int:bits=2,axis=token,group=64,asym,residual_window=128");
// The tokenint conventions the runtime tables name (configs/runtimes/*.toml): vLLM's int8
// per_token_head and int4_per_token_head (its randomized Hadamard transform), LMDeploy TurboMind's
// and PyTorch engine's (4 and 8 bits), SGLang's.
KVTUNE_FAKE_QUANT(tokenint8_vllm, "tokenint:bits=8,round=away,min_scale=1e-6,reciprocal");
KVTUNE_FAKE_QUANT(tokenint4_vllm_rht, "tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale,rotation=rht");
KVTUNE_FAKE_QUANT(tokenint8_turbomind, "tokenint:bits=8,zero=min,round=even,scale=f16,reciprocal");
KVTUNE_FAKE_QUANT(tokenint4_lmdeploy_pt, "tokenint:bits=4,zero=float,round=up,scale=f16");
KVTUNE_FAKE_QUANT(tokenint8_lmdeploy_pt, "tokenint:bits=8,zero=float,round=up,scale=f16");
KVTUNE_FAKE_QUANT(tokenint8_sglang, "tokenint:bits=8,zero=mid,scale=f16");

// The token policy's formats at the short contexts a sweep often evaluates, where the kept rows (a
// residual window of 128 tokens, sinks) are a large share of the block: one round trip of [T, 128]
// per iteration, counter `best_ns_per_element` (the best iteration's).
void BM_PolicyShortContext(benchmark::State& state, const char* spec) {
  const int64_t tokens = state.range(0);
  const kvtune::SchemePtr scheme = kvtune::builtin_registry().make(spec);
  const kvtune::Matrix all = keys_like();
  const kvtune::Matrix x = kvtune::copy_of(all.view().row_range(0, tokens));
  kvtune::Matrix y(tokens, kHeadDim);
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    scheme->roundtrip(x, {}, y);
    benchmark::DoNotOptimize(y.data());
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.counters["best_ns_per_element"] = 1e9 * best / double(x.size());
}
BENCHMARK_CAPTURE(BM_PolicyShortContext, transformers_int4_g64,
                  "int:bits=4,axis=token,group=64,asym,residual_window=128")
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_PolicyShortContext, kivi_int2,
                  "int:bits=2,axis=channel,group=32,asym,sink_tokens=4,residual_window=128,block_tokens=32")
    ->Arg(1024)
    ->Arg(4096)
    ->Unit(benchmark::kMicrosecond);

// One K/V pair over one case at T = 32768 with 16 queries: generation excluded, reference attention,
// both quantizations, all metrics included.
void BM_EvaluatePair(benchmark::State& state) {
  kvtune::WorkloadConfig cfg;
  cfg.tokens = kTokens;
  cfg.head_dim = kHeadDim;
  cfg.queries = 16;
  cfg.keys.outlier_channels = {7, 23, 88};
  cfg.keys.outlier_scale = 20.0;
  const kvtune::Case c = kvtune::generate_case(cfg, 0);
  const kvtune::EvalPlan plan = kvtune::build_plan(
      {{"", "int:bits=8,axis=channel", "int:bits=4,axis=token", ""}}, kvtune::builtin_registry(), 8);
  for (auto _ : state) {
    const kvtune::EvalResult r = kvtune::evaluate(plan, 1, [&](size_t) { return c; }, 1);
    benchmark::DoNotOptimize(r.pairs.data());
  }
}
BENCHMARK(BM_EvaluatePair)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
