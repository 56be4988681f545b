// kvtune recommend --model NAME --ctx N [--max-rel-err E] [--min-needle-hit H] [--gpu-mem SIZE]
//                  [--weights SIZE] [--sequences S] [--runtime R[@VERSION]...] [--eval-ctx N]
//                  [--out DIR] [--jobs N] [--json]
// The common question as a sweep: the embedded template (sweeps/recommend.toml.in) filled in with
// the model, the context, the budget and the runtimes, then run like `kvtune sweep`.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <optional>

#include "commands.h"
#include "embedded_scenarios.h"
#include "kvtune/error.h"
#include "kvtune/memory.h"
#include "plugins.h"
#include "presets.h"
#include "sweep_support.h"

namespace kvtune::cli {
namespace {

struct RecommendOptions {
  std::string model;
  int64_t ctx = 0;
  std::optional<double> max_rel_err, min_needle_hit;
  std::string gpu_mem, weights;
  int64_t sequences = 1;
  std::vector<std::string> runtimes;
  std::optional<int64_t> eval_ctx;
  std::string out = "kvtune-recommend";
  int jobs = 0;
  bool json = false;
};

// The longest context the simulation runs at by default: attention over 32768 tokens already
// shows the long-range effects, and the cost grows linearly beyond it (docs/performance.md).
constexpr int64_t kDefaultEvalContext = 32768;

std::string number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void replace(std::string& text, const std::string& key, const std::string& value) {
  const size_t at = text.find(key);
  if (at == std::string::npos) throw std::logic_error("recommend template lacks " + key);
  text.replace(at, key.size(), value);
}

std::string sweep_text(const RecommendOptions& o, const ModelPreset& preset, const std::vector<std::string>& runtime_names) {
  std::string text = kRecommendTemplate;
  const int64_t eval = o.eval_ctx.value_or(std::min(o.ctx, kDefaultEvalContext));
  replace(text, "@MODEL_NAME@", preset.title.empty() ? preset.name : preset.title);
  replace(text, "@CTX@", std::to_string(o.ctx));
  replace(text, "@MODEL@", quoted(preset.name));
  replace(text, "@TOKENS@", std::to_string(eval));
  // The first, middle and last layer: outliers and sinks differ most across depth.
  const int64_t last = preset.shape.layers - 1;
  std::string layers = "[0";
  for (int64_t l : {last / 2, last}) {
    if (l > 0 && layers.find(", " + std::to_string(l)) == std::string::npos) layers += ", " + std::to_string(l);
  }
  replace(text, "@LAYERS@", layers + "]");
  std::string budget;
  if (o.max_rel_err) budget += "max_rel_out_err = " + number(*o.max_rel_err) + "\n";
  if (o.min_needle_hit) budget += "min_needle_hit = " + number(*o.min_needle_hit) + "\n";
  if (!o.gpu_mem.empty()) {
    // Without --weights the model's parameter count at 2 bytes each (bf16 weights, as published).
    if (o.weights.empty() && preset.parameters == 0) {
      throw InputError("--gpu-mem: the preset '" + preset.name + "' gives no parameter count; pass --weights SIZE");
    }
    const uint64_t weights = o.weights.empty() ? uint64_t(preset.parameters) * 2 : parse_size(o.weights, "--weights");
    budget += "fit = { gpu_mem = " + std::to_string(parse_size(o.gpu_mem, "--gpu-mem")) +
              ", weights = " + std::to_string(weights) + ", ctx = " + std::to_string(o.ctx) +
              ", sequences = " + std::to_string(o.sequences) + " }\n";
  } else if (!o.weights.empty()) {
    throw InputError("--weights needs --gpu-mem (the memory they share)");
  }
  if (budget.empty()) {
    throw InputError("give a budget: --max-rel-err, --min-needle-hit and/or --gpu-mem");
  }
  replace(text, "@BUDGET@", budget);
  std::string runtimes;
  for (const std::string& r : o.runtimes.empty() ? runtime_names : o.runtimes) {
    runtimes += (runtimes.empty() ? "" : ", ") + quoted(r);
  }
  replace(text, "@RUNTIMES@", "runtimes = [" + runtimes + "]");
  return text;
}

int recommend(const RecommendOptions& o) {
  const ModelPreset preset = resolve_model_preset(o.model);
  if (o.eval_ctx && *o.eval_ctx > o.ctx) {
    throw InputError("--eval-ctx " + std::to_string(*o.eval_ctx) + " is longer than --ctx " + std::to_string(o.ctx));
  }
  const SweepContext context = sweep_context(command_registry());
  std::vector<std::string> all_runtimes;
  for (const RuntimeTable& t : context.runtime_tables) all_runtimes.push_back(t.name);
  const std::string text = sweep_text(o, preset, all_runtimes);
  const SweepSpec spec = parse_sweep(text, "kvtune recommend (sweeps/recommend.toml.in)", context);
  SweepRunOptions run;
  run.out_dir = o.out;
  run.threads = o.jobs;
  if (::isatty(STDERR_FILENO)) {
    run.progress = [](size_t done, size_t total) {
      std::cerr << "\rkvtune recommend: " << done << "/" << total << " points" << (done == total ? "\n" : "")
                << std::flush;
    };
  }
  const std::vector<SweepRecord> records = run_and_record(spec, command_registry(), run);
  if (!o.json && spec.scenario.contexts.front() < o.ctx) {
    std::cout << "simulated at " << spec.scenario.contexts.front() << " tokens (--eval-ctx); memory at " << o.ctx
              << " tokens\n";
  }
  report(spec, command_registry(), records, o.out, o.json);
  return 0;
}

}  // namespace

Runner add_recommend(CLI::App& app) {
  auto o = std::make_shared<RecommendOptions>();
  app.add_option("--model", o->model, "model preset name (configs/models) or preset file")->required();
  app.add_option("--ctx", o->ctx, "context length to serve (tokens)")->required()->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--max-rel-err", o->max_rel_err, "budget: max mean rel_out_err")->check(CLI::PositiveNumber);
  app.add_option("--min-needle-hit", o->min_needle_hit, "budget: min mean needle_hit")->check(CLI::Range(0.0, 1.0));
  app.add_option("--gpu-mem", o->gpu_mem, "budget: GPU memory for weights + KV cache, e.g. 80GiB");
  app.add_option("--weights", o->weights, "weight bytes (default: the preset's parameters x 2, bf16)");
  app.add_option("--sequences", o->sequences, "sequences of --ctx tokens that must fit (with --gpu-mem)")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  app.add_option("--runtime", o->runtimes, "target runtime NAME[@VERSION], repeatable (default: all in configs/runtimes)");
  app.add_option("--eval-ctx", o->eval_ctx, "context to simulate (default: min(--ctx, 32768))")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 24));
  app.add_option("--out", o->out, "output directory")->capture_default_str();
  app.add_option("--jobs", o->jobs, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_flag("--json", o->json, "print summary.json instead of the console summary");
  return [o] { return recommend(*o); };
}

}  // namespace kvtune::cli
