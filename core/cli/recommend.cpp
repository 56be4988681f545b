// kvtune recommend (--model NAME [--profile NAME] | --cache DIR) --ctx N [--max-rel-err E] [--min-needle-hit H] [--gpu-mem SIZE|NxSIZE]
//                  [--weights SIZE] [--sequences S] [--gpus N] [--runtime R[@VERSION]...] [--eval-ctx N]
//                  [--out DIR] [--resume] [--jobs N] [--json]
// The common question as a sweep: the embedded template (sweeps/recommend.toml) read with the
// model, the context, the budget and the runtimes as typed overrides, then run like `kvtune sweep`.
// With --cache the cases are a capture's (docs/real-caches.md) and the model shape its manifest's.

#include <climits>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>

#include "commands.h"
#include "embedded_scenarios.h"
#include "kvtune/capture.h"
#include "kvtune/error.h"
#include "kvtune/memory.h"
#include "kvtune/metrics.h"
#include "plugins.h"
#include "presets.h"
#include "report_page.h"
#include "sweep_support.h"

namespace kvtune::cli {
namespace {

struct RecommendOptions {
  std::string model;
  std::string profile;
  std::string cache;
  int64_t ctx = 0;
  std::optional<double> max_rel_err, min_needle_hit;
  std::string gpu_mem, weights;
  std::optional<int64_t> sequences;  // with --gpu-mem; 1 when not given
  std::optional<int64_t> gpus;
  std::vector<std::string> runtimes;
  std::optional<int64_t> eval_ctx;
  std::string confidence;  // "" (the template's 0.95), a level, or "off"
  std::string out = "kvtune-recommend";
  bool resume = false;
  int jobs = 0;
  bool json = false;
  bool html = false;
};

// The longest context the simulation runs at by default: the user's --ctx up to 131072 tokens
// (llama-3.1-70b at 131072 takes about a minute on two cores, docs/performance.md); beyond it the
// cost keeps growing linearly and --eval-ctx says how far to go.
constexpr int64_t kDefaultEvalContext = 131072;
// Needles (one per query) a recommendation samples at least, so that needle_hit moves in steps
// below 1 %, over sweeps/recommend.toml's seeds (its `seeds = 2`; SweepCli tests check the count).
constexpr int64_t kNeedleSamples = 100;
constexpr int64_t kTemplateSeeds = 2;
// The most needles a --min-needle-hit bound may ask for (see needles_for).
constexpr int64_t kMaxNeedleSamples = 20000;

// --confidence: a level in 0.5..0.999, or "off" (0: judge the estimates).
double confidence_level(const std::string& text) {
  if (text == "off") return 0.0;
  size_t used = 0;
  double level = 0.0;
  try {
    level = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(level >= 0.5 && level <= 0.999)) {
    throw InputError("--confidence '" + text + "': expected a confidence level in 0.5..0.999 (e.g. 0.95) or 'off'");
  }
  return level;
}

// Needles that let needle_hit >= `bound` be certified at `level`: Wilson's interval of n hits of n
// starts at n / (n + z^2), so a perfect score holds from n = bound z^2 / (1 - bound) on; twice that,
// so a point may miss a few needles and still hold. At 95 %: 146 for 0.95, 250 for 0.97.
int64_t needles_for(double bound, double level) {
  if (level == 0.0) return kNeedleSamples;  // the estimate is judged: no interval to fit
  if (bound >= 1.0) {
    throw InputError("--min-needle-hit 1 can never be certified on a confidence interval (even a perfect score's "
                     "starts below 1): give a bound below 1, or --confidence off to judge the estimate");
  }
  const double z = normal_quantile((1.0 + level) / 2.0);
  const double needed = 2.0 * std::ceil(bound * z * z / (1.0 - bound));
  if (needed > double(kMaxNeedleSamples)) {
    throw InputError("--min-needle-hit " + std::to_string(bound) + ": certifying it at " + std::to_string(level) +
                     " confidence takes " + std::to_string(int64_t(needed)) + " needles, more than the " +
                     std::to_string(kMaxNeedleSamples) + " a recommendation samples; lower the bound or --confidence");
  }
  return std::max<int64_t>(kNeedleSamples, int64_t(needed));
}

// The same command with --resume, for the user to paste after an interrupt.
std::string resume_command(const RecommendOptions& o) {
  std::string cmd = "kvtune recommend " + (o.cache.empty() ? "--model " + o.model : "--cache " + o.cache) +
                    " --ctx " + std::to_string(o.ctx);
  if (!o.profile.empty()) cmd += " --profile " + o.profile;
  if (o.max_rel_err) cmd += " --max-rel-err " + std::to_string(*o.max_rel_err);
  if (o.min_needle_hit) cmd += " --min-needle-hit " + std::to_string(*o.min_needle_hit);
  if (!o.gpu_mem.empty()) cmd += " --gpu-mem " + o.gpu_mem;
  if (!o.weights.empty()) cmd += " --weights " + o.weights;
  if (o.sequences) cmd += " --sequences " + std::to_string(*o.sequences);
  if (o.gpus) cmd += " --gpus " + std::to_string(*o.gpus);
  for (const std::string& r : o.runtimes) cmd += " --runtime " + r;
  if (o.eval_ctx) cmd += " --eval-ctx " + std::to_string(*o.eval_ctx);
  if (!o.confidence.empty()) cmd += " --confidence " + o.confidence;
  return cmd + " --out " + o.out + " --resume";
}

// The template's values replaced by the command's, as typed overrides (no TOML text is written).
SweepOverrides overrides_for(const RecommendOptions& o, const ModelPreset& preset, const Capture* capture,
                             const std::vector<RuntimeTable>& tables) {
  SweepOverrides ov;
  ov.name = "recommend: " + (preset.title.empty() ? preset.name : preset.title) + " at " + std::to_string(o.ctx) +
            " tokens";
  // The first, middle and last layer: outliers and sinks differ most across depth.
  std::vector<int64_t> candidates(size_t(preset.shape.layers));
  std::iota(candidates.begin(), candidates.end(), int64_t(0));
  if (capture) {
    ov.cache = std::filesystem::absolute(o.cache).string();
    candidates = capture->layers;
    // Each sample whole, or its first --eval-ctx (else --ctx) tokens where the samples are longer.
    int64_t shortest = INT64_MAX;
    for (const CaptureSample& s : capture->samples) shortest = std::min(shortest, s.tokens);
    if (o.eval_ctx) {
      ov.tokens = *o.eval_ctx;
    } else if (o.ctx < shortest) {
      ov.tokens = o.ctx;
    }
  } else {
    // A preset name, or a preset file made absolute: sweep.toml in --out must find it from elsewhere too.
    const bool is_file = o.model.find('/') != std::string::npos || o.model.ends_with(".toml");
    ov.model = is_file ? std::filesystem::absolute(o.model).string() : o.model;
    if (!o.profile.empty()) ov.profile = o.profile;
    ov.tokens = o.eval_ctx.value_or(std::min(o.ctx, kDefaultEvalContext));
  }
  ov.serve_ctx = o.ctx;  // memory is counted at --ctx wherever the simulation runs
  std::vector<int64_t> layers = {candidates.front()};
  const size_t last = candidates.size() - 1;
  for (size_t i : {last / 2, last}) {
    if (candidates[i] > layers.back()) layers.push_back(candidates[i]);
  }
  ov.layers = layers;
  // The template's level (0.95) unless --confidence says otherwise.
  const double level = o.confidence.empty() ? kDefaultConfidence : confidence_level(o.confidence);
  if (!o.confidence.empty()) ov.confidence = level;
  if (!capture) {
    // Enough queries for the needles (one per query) over the template's seeds and the sampled
    // layers: kNeedleSamples, so that needle_hit moves in steps below 1 % (120 for llama-3.1-8b:
    // 5 queries per query head x 4 heads per KV head x 6 cases; 144 for llama-3.1-70b: 3 x 8 x 6),
    // or as many as --min-needle-hit needs to be certified.
    const int64_t needles = o.min_needle_hit ? needles_for(*o.min_needle_hit, level) : kNeedleSamples;
    const int64_t kv_heads = std::max<int64_t>(1, preset.shape.kv_heads);
    const int64_t rows_per_query = std::max<int64_t>(1, preset.q_heads / kv_heads);
    const int64_t cases = kTemplateSeeds * int64_t(layers.size());
    ov.queries = (needles + rows_per_query * cases - 1) / (rows_per_query * cases);
  }
  // The template judges each point with its 1 or 2 most damaged layers kept at bf16; one sampled
  // layer must stay quantized.
  std::vector<int64_t> exempt;
  for (int64_t n = 1; n <= 2 && n < int64_t(layers.size()); ++n) exempt.push_back(n);
  ov.exempt_layers = exempt;
  std::vector<BudgetTerm> terms;
  if (o.max_rel_err) terms.push_back({Metric::rel_out_err, Statistic::mean, BoundKind::at_most, *o.max_rel_err});
  if (o.min_needle_hit) terms.push_back({Metric::needle_hit, Statistic::mean, BoundKind::at_least, *o.min_needle_hit});
  ov.terms = terms;
  if (!o.gpu_mem.empty()) {
    // Without --weights the model's parameter count at 2 bytes each (bf16 weights, as published).
    if (o.weights.empty() && preset.parameters == 0) {
      throw InputError(capture ? "--gpu-mem: a capture gives no parameter count; pass --weights SIZE"
                               : "--gpu-mem: the preset '" + preset.name + "' gives no parameter count; pass --weights SIZE");
    }
    MemoryFit fit;
    const GpuMemory gpu = parse_gpu_memory(o.gpu_mem, "--gpu-mem");
    fit.gpu_mem = gpu.bytes;
    fit.tensor_parallel = gpu_count(gpu.gpus, "--gpu-mem", o.gpus, "--gpus");
    fit.weights = o.weights.empty() ? uint64_t(preset.parameters) * 2 : parse_size(o.weights, "--weights");
    if (weights_per_gpu(fit.weights, fit.tensor_parallel) >= fit.gpu_mem) {
      throw InputError(fit.tensor_parallel == 1
                           ? "--weights leave nothing of --gpu-mem for the cache"
                           : "the weights split over " + std::to_string(fit.tensor_parallel) +
                                 " GPUs leave nothing of each GPU's --gpu-mem for the cache");
    }
    fit.ctx = o.ctx;
    fit.sequences = o.sequences.value_or(1);
    ov.fit = fit;
  } else if (!o.weights.empty()) {
    throw InputError("--weights needs --gpu-mem (the memory they share)");
  } else if (o.gpus) {
    throw InputError("--gpus needs --gpu-mem (the memory of each GPU)");
  } else if (o.sequences) {
    throw InputError("--sequences needs --gpu-mem (the memory they must fit in)");
  }
  if (terms.empty() && !ov.fit) throw InputError("give a budget: --max-rel-err, --min-needle-hit and/or --gpu-mem");
  std::vector<RuntimeTarget> runtimes;
  if (o.runtimes.empty()) {
    for (const RuntimeTable& t : tables) runtimes.push_back({t.name, "latest"});
  }
  for (const std::string& r : o.runtimes) runtimes.push_back(parse_runtime_target(r, "--runtime"));
  ov.runtimes = runtimes;
  return ov;
}

int recommend(const RecommendOptions& o) {
  if (o.model.empty() == o.cache.empty()) throw InputError("give either --model NAME or --cache DIR");
  if (!o.cache.empty() && !o.profile.empty()) {
    throw InputError("--profile describes a synthetic workload; a capture (--cache) brings its own statistics");
  }
  const std::optional<std::vector<ChartScript>> scripts = page_scripts(o.html);
  check_report_outputs(o.out, o.html);
  std::optional<Capture> capture;
  if (!o.cache.empty()) capture = open_capture(o.cache);
  const ModelPreset preset = capture ? capture_model(*capture) : resolve_model_preset(o.model);
  if (o.eval_ctx && *o.eval_ctx > o.ctx) {
    throw InputError("--eval-ctx " + std::to_string(*o.eval_ctx) + " is longer than --ctx " + std::to_string(o.ctx));
  }
  ProgressLine progress("kvtune recommend", ProgressLine::mode_for_stderr(false));
  const SweepContext context = sweep_context(&progress);
  const SweepSpec spec = parse_sweep(kRecommendTemplate, "kvtune recommend (sweeps/recommend.toml)", context,
                                     overrides_for(o, preset, capture ? &*capture : nullptr, context.runtime_tables));
  SweepRunOptions run;
  run.out_dir = o.out;
  run.resume = o.resume;
  run.threads = o.jobs;
  const std::optional<std::vector<SweepRecord>> records = run_interruptible(spec, run, resume_command(o), progress);
  if (!records) return kInterruptedStatus;
  if (!o.json && spec.scenario.workload.tokens < o.ctx) {
    // Memory is counted at --ctx (serve_ctx); the report's serving line says so.
    std::cout << "simulated at " << spec.scenario.workload.tokens
              << (o.eval_ctx ? " tokens (--eval-ctx)"
                  : capture  ? " tokens (the capture's samples)"
                             : " tokens (the default limit; --eval-ctx sets it)")
              << "\n";
  }
  report(spec, *records, o.out, o.json, scripts);
  return 0;
}

}  // namespace

Runner add_recommend(CLI::App& app) {
  auto o = std::make_shared<RecommendOptions>();
  app.add_option("--model", o->model, "model preset name (configs/models) or preset file");
  app.add_option("--cache", o->cache,
                 "a capture directory (python/kvtune_capture.py): its cases and its model's shape instead of --model");
  app.add_option("--profile", o->profile,
                 "model profile (configs/profiles) or profile file: the model family's key/value statistics "
                 "(default: the template's generic ones)");
  app.add_option("--ctx", o->ctx, "context length to serve (tokens)")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--max-rel-err", o->max_rel_err, "budget: max mean rel_out_err")->check(kPositive);
  app.add_option("--min-needle-hit", o->min_needle_hit, "budget: min mean needle_hit")->check(CLI::Range(0.0, 1.0));
  app.add_option("--gpu-mem", o->gpu_mem,
                 "budget: GPU memory for weights + KV cache, e.g. 80GiB; NxSIZE (8x80GiB) for N GPUs of SIZE each");
  app.add_option("--gpus", o->gpus, "tensor-parallel GPUs of --gpu-mem each: KV heads and weights split, and each runtime's "
                 "setting for them printed (default 1)")
      ->check(CLI::Range(int64_t(1), kMaxGpus));
  app.add_option("--weights", o->weights, "weight bytes (default: the preset's parameters x 2, bf16)");
  app.add_option("--sequences", o->sequences, "sequences of --ctx tokens that must fit (with --gpu-mem; default 1), and each runtime's "
                 "setting for them printed")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--runtime", o->runtimes, "target runtime NAME[@VERSION], repeatable (default: all in configs/runtimes)");
  app.add_option("--eval-ctx", o->eval_ctx, "context to simulate (default: min(--ctx, 131072))")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--confidence", o->confidence,
                 "judge the budget on confidence intervals at this level (default 0.95: a point whose interval "
                 "straddles a bound is undecided), or 'off' to judge the estimates");
  app.add_option("--out", o->out, "output directory")->capture_default_str();
  app.add_flag("--resume", o->resume, "continue the recommendation's sweep in --out, skipping the points already there");
  app.add_option("--jobs", o->jobs, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  app.add_flag("--report", o->html, kReportFlagHelp);
  return [o] { return recommend(*o); };
}

}  // namespace kvtune::cli
