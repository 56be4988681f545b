// kvtune simulate [FILE.toml] | --k K.npy --v V.npy --q Q.npy --pair KSPEC/VSPEC ...
//                 | --cache DIR --pair KSPEC/VSPEC ...
//                 [--topk K] [--precision float64|float32] [--threads N] [--backend cpu|cuda|cuda-kernel] [--json] [--needle-csv FILE]
#include <filesystem>
#include <iostream>
#include <optional>

#include "backends.h"
#include "commands.h"
#include "kvtune/capture.h"
#include "plugins.h"
#include "embedded_scenarios.h"
#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/npy.h"
#include "kvtune/scenario.h"
#include "presets.h"
#include "report.h"

namespace kvtune::cli {
namespace {

struct SimulateOptions {
  std::string file;
  std::string k_path, v_path, q_path;
  std::string cache;  // a capture directory (docs/real-caches.md)
  std::vector<std::string> pairs;
  std::optional<int64_t> topk;
  std::string precision;  // empty: the scenario file's `[metrics] precision` (float64 by default)
  std::string needle_csv;
  std::string backend;  // empty: the scenario file's `backend` (cpu by default)
  int threads = 0;
  bool json = false;
};

PairRequest parse_pair(const std::string& text) {
  const size_t slash = text.find('/');
  if (slash == std::string::npos || text.find('/', slash + 1) != std::string::npos) {
    throw InputError("--pair '" + text + "': expected KSPEC/VSPEC, e.g. int:bits=8,axis=channel/int:bits=8,axis=token");
  }
  return {"", text.substr(0, slash), text.substr(slash + 1), "--pair " + text};
}

Case load_tensor_case(const SimulateOptions& o) {
  NpyArray k = read_npy(o.k_path), v = read_npy(o.v_path), q = read_npy(o.q_path);
  if (k.shape.size() != 2) throw InputError(o.k_path + ": keys must be a rank-2 [T, D] array, got rank " + std::to_string(k.shape.size()));
  if (v.shape.size() != 2) throw InputError(o.v_path + ": values must be a rank-2 [T, D] array, got rank " + std::to_string(v.shape.size()));
  if (v.shape != k.shape) {
    throw InputError(o.v_path + ": values are [" + std::to_string(v.shape[0]) + ", " + std::to_string(v.shape[1]) +
                     "] but keys (" + o.k_path + ") are [" + std::to_string(k.shape[0]) + ", " +
                     std::to_string(k.shape[1]) + "]; expected the same shape");
  }
  if (q.values.cols() != k.values.cols()) {
    throw InputError(o.q_path + ": queries have " + std::to_string(q.values.cols()) + " channels but keys have " +
                     std::to_string(k.values.cols()) + "; expected q as [D] or [Nq, D]");
  }
  Case c = case_from_tensors(std::move(k.values), std::move(v.values), std::move(q.values));
  c.keys_file = o.k_path;  // errors about the data (e.g. out of a scheme's range) name the file
  c.values_file = o.v_path;
  return c;
}

// `--cache DIR`: every sample, captured layer and KV head of the capture, each sample whole. The
// scenario is read from text so that it takes the checks of `[workload] source = "cache"`.
Scenario cache_scenario(const SimulateOptions& o) {
  open_capture(o.cache);  // its errors name the directory, not the scenario text below
  std::string text = "name = " + nlohmann::json("cache: " + o.cache).dump() + "\n[workload]\nsource = \"cache\"\npath = " +
                     nlohmann::json(std::filesystem::absolute(o.cache).string()).dump() + "\n";
  std::vector<PairRequest> pairs;
  for (const std::string& p : o.pairs) pairs.push_back(parse_pair(p));
  Scenario sc = parse_scenario(text + "[[pairs]]\nk = \"none\"\nv = \"none\"\n", "--cache " + o.cache);
  sc.pairs = pairs;
  return sc;
}

// A GPU context does not survive fork, so with a GPU backend plugin schemes run in-process.
void warn_in_process(const EvalPlan& plan) {
  if (plan_uses_plugins(plan)) {
    std::cerr << "kvtune: warning: plugin schemes run inside kvtune with a GPU backend: a crash in one ends "
                 "the command (use --backend cpu to run them in a child process)\n";
  }
}

// Plugin schemes are evaluated in a child process, so a crashing plugin is an error, not a crash.
bool isolated(const EvalPlan& plan) {
  if (!plan_uses_plugins(plan)) return false;
  if (!plan.backend || plan.backend->name() == "cpu") return true;
  warn_in_process(plan);
  return false;
}

// --precision as given (empty: the file's).
std::optional<Precision> precision_option(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (const std::optional<Precision> p = precision_from_name(text)) return p;
  throw InputError("--precision: unknown precision '" + text + "'; expected one of: float64, float32");
}

int run(const SimulateOptions& o) {
  const Registry& registry = command_registry();
  const std::optional<Precision> precision = precision_option(o.precision);
  const bool tensors = !o.k_path.empty() || !o.v_path.empty() || !o.q_path.empty();
  if (!o.needle_csv.empty()) require_writable(o.needle_csv);  // before any long computation
  require_not_an_input(o.needle_csv, {o.file, o.k_path, o.v_path, o.q_path}, "--needle-csv");
  std::vector<EvalResult> runs;
  std::string name;
  std::string statistics;  // what the workload's key/value statistics stand for (scenarios only)
  std::string capture_dir;  // the capture a scenario read its cases from
  if (tensors) {
    if (!o.file.empty()) throw InputError("give either a scenario file or --k/--v/--q tensors, not both");
    if (!o.cache.empty()) throw InputError("give either --cache or --k/--v/--q tensors, not both");
    if (o.k_path.empty() || o.v_path.empty() || o.q_path.empty()) {
      throw InputError("--k, --v and --q are needed together");
    }
    if (o.pairs.empty()) throw InputError("--k/--v/--q need at least one --pair KSPEC/VSPEC");
    std::vector<PairRequest> requests;
    for (const std::string& p : o.pairs) requests.push_back(parse_pair(p));
    EvalPlan plan = build_plan(requests, registry, o.topk.value_or(8));
    plan.precision = precision.value_or(Precision::float64);
    plan.backend = make_backend(o.backend.empty() ? "cpu" : o.backend, "--backend");
    const Case c = load_tensor_case(o);
    check_plan_shape(plan, c.keys.rows(), c.keys.cols());
    const CaseSource source = [&](size_t) { return c; };
    runs.push_back(isolated(plan) ? evaluate_isolated(plan, 1, source, 1) : evaluate(plan, 1, source, 1));
    name = o.k_path;
  } else {
    if (!o.cache.empty() && !o.file.empty()) throw InputError("give either a scenario file or --cache, not both");
    if (o.cache.empty() && !o.pairs.empty()) {
      throw InputError("--pair needs --k/--v/--q tensors or --cache; a scenario file lists its own [[pairs]]");
    }
    if (!o.cache.empty() && o.pairs.empty()) throw InputError("--cache needs at least one --pair KSPEC/VSPEC");
    Scenario sc = !o.cache.empty() ? cache_scenario(o)
                  : o.file.empty()
                      ? parse_scenario(kDefaultScenario, kDefaultScenarioName, resolve_model_preset, resolve_model_profile)
                      : load_scenario(o.file, resolve_model_preset, resolve_model_profile);
    sc.topk = o.topk.value_or(sc.topk);
    sc.precision = precision.value_or(sc.precision);
    const EvalBackendPtr backend =
        o.backend.empty() ? make_backend(sc.backend, o.file.empty() ? kDefaultScenarioName : o.file)
                          : make_backend(o.backend, "--backend");
    // Plugin schemes run in a child process on the CPU backend (evaluate_isolated).
    const bool cpu = !backend || backend->name() == "cpu";
    if (!cpu) warn_in_process(build_plan(sc.pairs, registry, sc.topk));
    runs = evaluate_scenario(sc, registry, o.threads, backend,
                             cpu ? std::optional<IsolationOptions>(IsolationOptions{}) : std::nullopt);
    name = sc.name;
    statistics = sc.capture ? "cache" : sc.profile.empty() ? "generic" : sc.profile;
    if (sc.capture) capture_dir = sc.capture->dir;
  }
  if (!o.needle_csv.empty()) {
    const std::string csv = needle_csv(runs);
    write_file_atomic(o.needle_csv, std::as_bytes(std::span(csv.data(), csv.size())));
  }
  if (o.json) {
    nlohmann::json doc = to_json(name, runs);
    add_backend_used(doc, runs);
    if (!statistics.empty()) doc["profile"] = statistics;
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << name << "\n";
  if (statistics == "generic") {
    std::cout << "statistics: generic synthetic keys and values, the same for every model (a preset sets only the "
                 "shape; [workload] profile = NAME gives a model's own)\n";
  } else if (statistics == "cache") {
    std::cout << "statistics: a real cache (" << capture_dir << ")\n";
  } else if (!statistics.empty()) {
    std::cout << "statistics: model profile " << statistics << "\n";
  }
  for (const EvalResult& r : runs) {
    std::cout << "\n";
    print_table(std::cout, r);
    print_backend_used(std::cout, r);
  }
  print_needle_tables(std::cout, runs);
  return 0;
}

}  // namespace

Runner add_simulate(CLI::App& app) {
  auto o = std::make_shared<SimulateOptions>();
  app.add_option("file", o->file, "scenario TOML (default: the embedded seed-table experiment)");
  app.add_option("--k", o->k_path, "keys .npy [T, D] (float16/32/64)");
  app.add_option("--v", o->v_path, "values .npy [T, D]");
  app.add_option("--q", o->q_path, "queries .npy [D] or [Nq, D]");
  app.add_option("--cache", o->cache, "a capture directory (python/kvtune_capture.py): its samples, layers and heads");
  app.add_option("--pair", o->pairs, "KSPEC/VSPEC, repeatable (with --k/--v/--q or --cache)");
  app.add_option("--topk", o->topk, "k of topk_overlap")->check(kPositive);
  app.add_option("--precision", o->precision,
                 "the products' arithmetic: float64 (the reference) or float32 (faster, within stated bounds); "
                 "overrides the file's [metrics] precision");
  app.add_option("--threads", o->threads, "worker threads (default: all cores)")->check(CLI::Range(0, 1024));
  app.add_option("--needle-csv", o->needle_csv,
                 "write needle_hit and needle_mass_ratio by pair, context and depth as CSV");
  app.add_option("--backend", o->backend,
                 "cpu, cuda (quantizers on the GPU) or cuda-kernel (also attention by the fused kernel); "
                 "overrides the file's `backend`");
  app.add_flag("--json", o->json, "print JSON instead of a table");
  return [o] { return run(*o); };
}

}  // namespace kvtune::cli
