// End-to-end tests of `kvtune sweep`, `kvtune merge` and `kvtune recommend` on small workloads:
// the files in --out, the frontier and the runtime recommendations, resume, shards and merge,
// and exit status 2 with a clear message for bad input (nothing half-written).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

// A sweep that runs in well under a second: 4 K x 3 V candidates on a 512-token workload with a
// needle, llama.cpp as the runtime target.
const char* const kSmallSweep = R"(name = "small"
seeds = 2
runtimes = ["llama-cpp@b8607"]

[workload]
tokens = 512
head_dim = 128
queries = 2

[workload.keys]
outlier_count = 3
outlier_scale = 10.0

[workload.needles]
depths = [0.5]

[search]
k = ["q8_0", "q4_0", "int:bits=8,axis=channel", "int:bits=2,axis=channel"]
v = ["q8_0", "q4_0", "int:bits=4,axis=token"]

[budget]
max_rel_out_err = 0.05
min_needle_hit = 0.9
)";

size_t lines_of(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n' ? 1 : 0;
  return n;
}

class SweepCli : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    write_text(path("small.toml"), kSmallSweep);
  }
  std::string out(const std::string& name = "out") const { return path(name).string(); }
};

TEST_F(SweepCli, WritesEveryOutputAndRecommendsWhatTheRuntimeCanExpress) {
  const RunResult r = run({"sweep", path("small.toml").string(), "--out", out(), "--jobs", "2"});
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* file : {"sweep.toml", "resolved.json", "results.jsonl", "summary.json", "frontier.csv", "report.md"}) {
    EXPECT_TRUE(fs::exists(path("out") / file)) << file;
  }
  EXPECT_EQ(read_text(path("out") / "sweep.toml"), kSmallSweep);  // the spec as given, for merge and resume
  const json resolved = json::parse(read_text(path("out") / "resolved.json"));
  const size_t points = resolved["points"].size();
  EXPECT_GE(points, 12u);  // 4 x 3 search points, plus llama.cpp's options not among them
  EXPECT_EQ(lines_of(read_text(path("out") / "results.jsonl")), points);

  const json summary = json::parse(read_text(path("out") / "summary.json"));
  ASSERT_TRUE(summary["best"].is_object()) << summary.dump(2);
  EXPECT_FALSE(summary["frontier"].empty());
  ASSERT_EQ(summary["runtimes"].size(), 1u);
  EXPECT_EQ(summary["runtimes"][0]["title"], "llama.cpp");
  // The best meets the 5 % budget; 2-bit keys never do (the article's point, through the sweep).
  EXPECT_LE(summary["best"]["metrics"]["rel_out_err"]["mean"].get<double>(), 0.05);
  for (const json& p : summary["frontier"]) {
    if (p["k"] == "int:bits=2,axis=channel") {
      EXPECT_FALSE(p["feasible"].get<bool>()) << p["v"];
    }
  }
  EXPECT_THAT(r.out, HasSubstr("Best feasible configuration"));
  EXPECT_THAT(r.out, HasSubstr("llama.cpp b8607"));
  EXPECT_THAT(r.out, HasSubstr("-ctk "));
  EXPECT_THAT(read_text(path("out") / "report.md"), HasSubstr("llama.cpp"));
  EXPECT_THAT(read_text(path("out") / "frontier.csv"),
              ::testing::StartsWith("k,v,k_bits,v_bits,bits,rel_out_err,rel_out_err_p95,attn_kl_p95,needle_hit,"
                                    "bytes_per_token,feasible,exempt_layers,undecided,rel_out_err_lo,"));
  EXPECT_THAT(r.out, HasSubstr("intervals: [low, high] at 95 % confidence, two-sided (a bound is judged on its far "
                               "end); over the 2 cases (a layer's or head's over its own): Wilson score with the "
                               "cases' design effect for rates"));

  // --json prints summary.json.
  const RunResult again = run({"sweep", path("small.toml").string(), "--out", out("json"), "--json"});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["best"], summary["best"]);
}

TEST_F(SweepCli, ResumeContinuesAndAnExistingOutputNeedsIt) {
  ASSERT_EQ(run({"sweep", path("small.toml").string(), "--out", out()}).status, 0);
  const std::string results = read_text(path("out") / "results.jsonl");

  const RunResult refused = run({"sweep", path("small.toml").string(), "--out", out()});
  EXPECT_EQ(refused.status, 2);
  EXPECT_THAT(refused.err, HasSubstr("results.jsonl: exists; pass --resume"));
  EXPECT_EQ(read_text(path("out") / "results.jsonl"), results);  // untouched

  // Cut the file after 5 lines and resume: the missing points are evaluated again, the same.
  std::istringstream in(results);
  std::string line, head;
  for (int i = 0; i < 5 && std::getline(in, line); ++i) head += line + "\n";
  write_text(path("out") / "results.jsonl", head);
  const RunResult resumed = run({"sweep", path("small.toml").string(), "--out", out(), "--resume"});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  const std::string after = read_text(path("out") / "results.jsonl");
  EXPECT_EQ(lines_of(after), lines_of(results));

  // A changed workload is another sweep: --resume refuses to mix them.
  std::string changed = kSmallSweep;
  changed.replace(changed.find("tokens = 512"), 12, "tokens = 640");
  write_text(path("changed.toml"), changed);
  const RunResult other = run({"sweep", path("changed.toml").string(), "--out", out(), "--resume"});
  EXPECT_EQ(other.status, 2);
  EXPECT_THAT(other.err, HasSubstr("written by a sweep whose workload differs"));
}

TEST_F(SweepCli, ShardsMergeIntoTheUnshardedResult) {
  ASSERT_EQ(run({"sweep", path("small.toml").string(), "--out", out("whole"), "--json"}).status, 0);
  for (const char* shard : {"0/2", "1/2"}) {
    const RunResult r = run({"sweep", path("small.toml").string(), "--out", out(std::string("s") + shard[0]), "--shard", shard});
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_THAT(r.err, HasSubstr("kvtune merge"));
  }
  const RunResult merged = run({"merge", out("s0"), out("s1"), "--out", out("merged"), "--json"});
  ASSERT_EQ(merged.status, 0) << merged.err;
  const json whole = json::parse(read_text(path("whole") / "summary.json"));
  const json combined = json::parse(merged.out);
  EXPECT_EQ(combined["best"], whole["best"]);
  EXPECT_EQ(combined["frontier"], whole["frontier"]);
  EXPECT_EQ(combined["runtimes"], whole["runtimes"]);

  // A missing shard is an error, not a smaller sweep.
  const RunResult partial = run({"merge", out("s0"), "--out", out("partial")});
  EXPECT_EQ(partial.status, 2);
  EXPECT_THAT(partial.err, HasSubstr("have no record in the given directories (a missing shard?)"));

  // Merging again into the same --out replaces that merge; a directory holding another sweep's
  // results is refused and left as it was (it was overwritten with exit status 0).
  ASSERT_EQ(run({"merge", out("s0"), out("s1"), "--out", out("merged")}).status, 0);
  std::string other = kSmallSweep;
  other.replace(other.find("tokens = 512"), 12, "tokens = 256");
  write_text(path("other.toml"), other);
  ASSERT_EQ(run({"sweep", path("other.toml").string(), "--out", out("precious")}).status, 0);
  const std::string before = read_text(path("precious") / "results.jsonl");
  const RunResult over = run({"merge", out("s0"), out("s1"), "--out", out("precious")});
  EXPECT_EQ(over.status, 2);
  EXPECT_THAT(over.err, HasSubstr("holds the results of another sweep"));
  EXPECT_EQ(read_text(path("precious") / "results.jsonl"), before);
}

TEST_F(SweepCli, BadInputExitsWith2AndNamesWhere) {
  std::string typo = kSmallSweep;
  typo.replace(typo.find("max_rel_out_err"), 15, "max_rel_out_erx");
  write_text(path("typo.toml"), typo);
  const RunResult r = run({"sweep", path("typo.toml").string(), "--out", out()});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr(path("typo.toml").string() + ":"));
  EXPECT_THAT(r.err, HasSubstr("unknown key 'max_rel_out_erx' in [budget]"));
  EXPECT_FALSE(fs::exists(path("out")));  // validated before anything is written

  const RunResult shard = run({"sweep", path("small.toml").string(), "--out", out(), "--shard", "2/2"});
  EXPECT_EQ(shard.status, 2);
  EXPECT_THAT(shard.err, HasSubstr("--shard '2/2': expected I/N with 0 <= I < N"));

  std::string bad_spec = kSmallSweep;
  bad_spec.replace(bad_spec.find("\"q4_0\", \"int:bits=8"), 6, "\"q4_9\"");
  write_text(path("spec.toml"), bad_spec);
  const RunResult spec = run({"sweep", path("spec.toml").string(), "--out", out()});
  EXPECT_EQ(spec.status, 2);
  EXPECT_THAT(spec.err, HasSubstr("q4_9"));

  const RunResult missing = run({"merge", out("nowhere")});
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("nowhere"));

  // A report file that cannot be written is found before the evaluation, not after results.jsonl
  // was written (the run had exited 2 leaving sweep.toml and the results behind).
  for (const char* blocked : {"summary.json", "report.html"}) {
    const std::string dir = std::string("blocked-") + blocked;
    fs::create_directories(path(dir) / blocked);
    const RunResult b = run({"sweep", path("small.toml").string(), "--out", out(dir), "--report"});
    EXPECT_EQ(b.status, 2) << blocked;
    EXPECT_THAT(b.err, HasSubstr(blocked + std::string(": is a directory, expected a file name")));
    EXPECT_FALSE(fs::exists(path(dir) / "results.jsonl")) << blocked;
    EXPECT_FALSE(fs::exists(path(dir) / "sweep.toml")) << blocked;
  }
  // A report file of the user's (in a directory that holds no sweep) is never replaced.
  fs::create_directories(path("mine"));
  write_text(path("mine") / "report.md", "my notes\n");
  const RunResult mine = run({"sweep", path("small.toml").string(), "--out", out("mine")});
  EXPECT_EQ(mine.status, 2);
  EXPECT_THAT(mine.err, HasSubstr("report.md: exists in a directory that is not a kvtune sweep's (no sweep.toml or "
                                  "results.jsonl) and would be replaced"));
  EXPECT_EQ(read_text(path("mine") / "report.md"), "my notes\n");
  EXPECT_FALSE(fs::exists(path("mine") / "results.jsonl"));
  // So is a chart file's name taken by a directory inside report-charts/.
  fs::create_directories(path("blocked-chart") / "report-charts" / "pareto.vl.json");
  const RunResult chart = run({"sweep", path("small.toml").string(), "--out", out("blocked-chart"), "--report"});
  EXPECT_EQ(chart.status, 2);
  EXPECT_THAT(chart.err, HasSubstr("pareto.vl.json: is not a file, and the report writes a chart there"));
  EXPECT_FALSE(fs::exists(path("blocked-chart") / "results.jsonl"));
}

TEST_F(SweepCli, RecommendAnswersTheCommonQuestion) {
  const RunResult r = run({"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--eval-ctx", "256",
                           "--max-rel-err", "0.05", "--runtime", "ollama", "--runtime", "llama-cpp",
                           "--out", out(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json summary = json::parse(r.out);
  ASSERT_EQ(summary["runtimes"].size(), 2u);
  EXPECT_EQ(summary["runtimes"][0]["title"], "Ollama");
  EXPECT_EQ(summary["runtimes"][1]["title"], "llama.cpp");
  // sweep.toml is the template with the typed overrides applied, written by toml++.
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("model = 'llama-3.2-1b'"));
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("layers = [ 0, 7, 15 ]"));  // Llama-3.2-1B: 16 layers
  // Enough needles for 1 % steps: 5 queries per query head x 4 query heads per KV head x (2 seeds
  // x 3 layers) = 120, judged on their 95 % intervals.
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("queries = 5"));
  EXPECT_EQ(summary["budget"]["confidence"], 0.95);
  const json& point = summary["best"].is_object() ? summary["best"] : summary["runtimes"][0]["closest"]["point"];
  EXPECT_EQ(point["metrics"]["needle_hit"]["count"], 120);
  EXPECT_EQ(point["metrics"]["needle_hit"]["mean_ci_method"], "wilson_cases");
  // Simulated at 256 tokens, served at 4096 without a memory budget: memory counted at --ctx.
  EXPECT_EQ(summary["workload"]["tokens"], 256);
  EXPECT_EQ(summary["serving"]["ctx"], 4096);
  EXPECT_EQ(summary["serving"]["beyond_model_context"], false);
  EXPECT_EQ(point["memory"]["context"], 4096);
  EXPECT_EQ(point["memory"]["total_bytes"].get<double>(), point["memory"]["bytes_per_token"].get<double>() * 4096);
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("serve_ctx = 4096"));
  EXPECT_THAT(read_text(path("out") / "report.md"),
              HasSubstr("serving: 4096 tokens per sequence (memory is counted there; simulated at 256)"));

  const RunResult no_budget = run({"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--out", out("x")});
  EXPECT_EQ(no_budget.status, 2);
  EXPECT_THAT(no_budget.err, HasSubstr("give a budget"));
  const RunResult unknown = run({"recommend", "--model", "llama-9", "--ctx", "4096", "--max-rel-err", "0.1"});
  EXPECT_EQ(unknown.status, 2);
  EXPECT_THAT(unknown.err, HasSubstr("llama-3.1-8b"));  // the presets are listed
}

// --confidence sets the template's level or turns the interval judgement off; a bad value is
// refused before anything is written.
// A needle bound decides the needles: a perfect score over n needles certifies at most
// n / (n + z^2), so 0.97 at 95 % takes 125 and kvtune samples twice that, 250 (11 queries x 4 x 6 = 264);
// a bound of 1 can never be certified on an interval and is refused before anything is written.
TEST_F(SweepCli, RecommendSamplesEnoughNeedlesToCertifyItsNeedleBound) {
  const RunResult r = run({"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--eval-ctx", "256",
                           "--min-needle-hit", "0.97", "--runtime", "ollama", "--out", out(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("queries = 11"));
  const json summary = json::parse(r.out);
  ASSERT_TRUE(summary["best"].is_object()) << r.out;
  EXPECT_EQ(summary["best"]["metrics"]["needle_hit"]["count"], 264);
  const RunResult one = run({"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--min-needle-hit", "1",
                             "--out", (path("out") / "one").string()});
  EXPECT_EQ(one.status, 2);
  EXPECT_THAT(one.err, HasSubstr("--min-needle-hit 1 can never be certified on a confidence interval"));
  EXPECT_FALSE(fs::exists(path("out") / "one"));
}

// A sweep file whose needle bound its needles cannot certify says so, and how many it would take.
TEST_F(SweepCli, ANeedleBoundBeyondItsSamplesSaysWhatWouldCertifyIt) {
  write_text(path("bound.toml"), R"(name = "needle bound"
seeds = 2
runtimes = ["vllm"]
[workload]
model = "llama-3.2-1b"
tokens = 256
layers = [0, 15]
queries = 2
[workload.needles]
depths = [0.5]
mass = 0.5
[search]
pairing = "cartesian"
both = ["bf16"]
[budget]
min_needle_hit = 0.99
confidence = 0.95
)");
  const RunResult r = run({"sweep", path("bound.toml").string(), "--out", out()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("min_needle_hit = 0.99 cannot be certified with 256 samples at 95 % confidence: a "
                               "perfect score's interval starts at 0.9852; it takes at least 381 samples"));
}

TEST_F(SweepCli, RecommendConfidenceSetsOrRemovesTheIntervalJudgement) {
  const std::vector<std::string> base = {"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--eval-ctx", "256",
                                         "--max-rel-err", "0.05", "--runtime", "ollama", "--json"};
  auto with = [&](const std::string& level, const std::string& dir) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--confidence", level, "--out", out(dir)});
    return run(args);
  };
  const RunResult ninety = with("0.9", "ninety");
  ASSERT_EQ(ninety.status, 0) << ninety.err;
  const json a = json::parse(ninety.out);
  EXPECT_EQ(a["budget"]["confidence"], 0.9);
  EXPECT_EQ(a["intervals"]["level"], 0.9);
  const RunResult off = with("off", "off");
  ASSERT_EQ(off.status, 0) << off.err;
  const json b = json::parse(off.out);
  EXPECT_TRUE(b["budget"]["confidence"].is_null());
  EXPECT_EQ(b["counts"]["undecided"], 0);
  for (const char* bad : {"1.5", "0.2", "high", "0.9x"}) {
    const RunResult r = with(bad, std::string("bad-") + bad);
    EXPECT_EQ(r.status, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("--confidence '" + std::string(bad) + "': expected a confidence level in 0.5..0.999"));
    EXPECT_FALSE(fs::exists(path(std::string("bad-") + bad))) << bad;
  }
}

// --gpus N: the fit is per GPU. Llama-3.2-1B has 8 KV heads, so on 2 GPUs each holds 4: every
// point's per-GPU bytes per sequence are half its total. Each runtime's settings say how to run on
// the 2 GPUs (configs/runtimes/*.toml [[tensor_parallel]]) and how to hold its sequences ([[context]]).
TEST_F(SweepCli, RecommendFitsEachGpuOfATensorParallelGroup) {
  const RunResult r = run({"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--eval-ctx", "256",
                           "--gpu-mem", "2x4GiB", "--gpus", "2", "--runtime", "ollama", "--runtime", "vllm", "--out",
                           out(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json summary = json::parse(r.out);
  ASSERT_EQ(summary["runtimes"].size(), 2u);
  for (const json& rt : summary["runtimes"]) {
    EXPECT_EQ(rt["gpus"], 2) << rt["name"];
    EXPECT_EQ(rt["gpus_unset"], false) << rt["name"];
    ASSERT_TRUE(rt["recommendation"].is_object()) << rt["name"];
  }
  const json& ollama = summary["runtimes"][0]["recommendation"]["option"]["settings"];
  EXPECT_THAT(ollama["env"].get<std::vector<std::string>>(), ::testing::Contains("OLLAMA_SCHED_SPREAD=1"));
  EXPECT_THAT(ollama["caveats"].dump(), HasSubstr("make exactly 2 GPUs visible"));
  const json& vllm = summary["runtimes"][1]["recommendation"]["option"]["settings"];
  EXPECT_THAT(vllm["cli"].get<std::vector<std::string>>(), ::testing::Contains("--tensor-parallel-size 2"));
  EXPECT_THAT(vllm["python"].get<std::string>(), HasSubstr(", tensor_parallel_size=2, max_model_len=4096)"));
  // ... and how to hold the fit's one sequence of 4096 tokens ([[context]]).
  for (const json& rt : summary["runtimes"]) {
    EXPECT_EQ(rt["context"], 4096) << rt["name"];
    EXPECT_EQ(rt["sequences"], 1) << rt["name"];
    EXPECT_EQ(rt["context_unset"], false) << rt["name"];
  }
  EXPECT_THAT(ollama["env"].get<std::vector<std::string>>(),
              ::testing::IsSupersetOf({"OLLAMA_CONTEXT_LENGTH=4096", "OLLAMA_NUM_PARALLEL=1"}));
  EXPECT_THAT(vllm["cli"].get<std::vector<std::string>>(), ::testing::Contains("--max-model-len 4096"));
  EXPECT_THAT(read_text(path("out") / "report.md"), HasSubstr("--tensor-parallel-size 2"));
  EXPECT_EQ(summary["budget"]["fit"]["tensor_parallel"], 2);
  EXPECT_EQ(summary["budget"]["fit"]["gpu_mem"], uint64_t(4) << 30);
  ASSERT_TRUE(summary["best"].is_object());
  const json& best = summary["best"];
  EXPECT_EQ(best["bytes_per_sequence_per_gpu"].get<uint64_t>() * 2, best["memory"]["total_bytes"].get<uint64_t>());
  EXPECT_THAT(read_text(path("out") / "sweep.toml"), HasSubstr("tensor_parallel = 2"));

  // A preset file of one's own, as `memory --model` takes it (it was looked up by its stem and refused).
  fs::copy_file(fs::path(KVTUNE_SOURCE_DIR) / "configs" / "models" / "llama-3.2-1b.toml", path("my-1b.toml"));
  const RunResult own = run({"recommend", "--model", path("my-1b.toml").string(), "--ctx", "4096", "--eval-ctx", "256",
                             "--gpu-mem", "2x4GiB", "--gpus", "2", "--runtime", "ollama", "--out", out("own"), "--json"});
  ASSERT_EQ(own.status, 0) << own.err;
  EXPECT_EQ(json::parse(own.out)["best"]["memory"], best["memory"]);
  // Given relative, it is written absolute into --out's sweep.toml, so report and merge find it from elsewhere.
  const RunResult relative = run_kvtune({"recommend", "--model", "my-1b.toml", "--ctx", "4096", "--eval-ctx", "256",
                                         "--gpu-mem", "2x4GiB", "--gpus", "2", "--runtime", "ollama", "--out", out("rel")},
                                        path(""), "cd " + shell_quote(path("").string()) + " && ");
  ASSERT_EQ(relative.status, 0) << relative.err;
  EXPECT_THAT(read_text(path("rel") / "sweep.toml"), HasSubstr("model = '" + path("my-1b.toml").string() + "'"));
  EXPECT_EQ(run({"report", out("rel")}).status, 0);
}

TEST_F(SweepCli, RecommendRefusesBadGpuCountsAndWritesNothing) {
  const std::vector<std::string> base = {"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--max-rel-err", "0.1"};
  auto with = [&](std::vector<std::string> extra, const std::string& dir) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--out", out(dir)});
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_FALSE(fs::exists(path(dir))) << dir;
    return r.err;
  };
  EXPECT_THAT(with({"--gpu-mem", "80GiB", "--gpus", "0"}, "zero"), HasSubstr("--gpus"));
  EXPECT_THAT(with({"--gpu-mem", "2x80GiB", "--gpus", "4"}, "conflict"),
              HasSubstr("--gpus 4 disagrees with --gpu-mem 2xSIZE (2 GPUs)"));
  EXPECT_THAT(with({"--gpu-mem", "x80GiB"}, "malformed"), HasSubstr("--gpu-mem 'x80GiB'"));
  EXPECT_THAT(with({"--gpus", "2"}, "alone"), HasSubstr("--gpus needs --gpu-mem"));
  EXPECT_THAT(with({"--sequences", "4"}, "sequences"), HasSubstr("--sequences needs --gpu-mem"));  // was ignored
  // 2 x 1235814400 bf16 bytes over 2 GPUs leave nothing of a 1 GB GPU.
  EXPECT_THAT(with({"--gpu-mem", "2x1GB"}, "full"), HasSubstr("the weights split over 2 GPUs leave nothing"));
}

// --profile names the model family's statistics; an unknown one is refused before anything runs.
TEST_F(SweepCli, RecommendRefusesAnUnknownProfileAndWritesNothing) {
  const RunResult r = run({"recommend", "--model", "qwen3-8b", "--profile", "qwen9", "--ctx", "4096", "--max-rel-err",
                           "0.1", "--out", out("p")});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("unknown model profile 'qwen9'"));
  EXPECT_THAT(r.err, HasSubstr("qwen3-0.6b"));  // the available profiles are listed
  EXPECT_FALSE(fs::exists(path("p")));
}

// A runtime version the table cannot answer: the runtime, the version and what the table covers
// are named, nothing is written, exit 2.
TEST_F(SweepCli, RecommendRefusesRuntimeVersionsTheTableDoesNotCover) {
  const std::vector<std::string> base = {"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--max-rel-err", "0.1"};
  auto with = [&](const std::string& runtime, const std::string& dir) {
    std::vector<std::string> args = base;
    for (const std::string& a : {std::string("--runtime"), runtime, std::string("--out"), out(dir)}) args.push_back(a);
    return run(args);
  };
  const RunResult old = with("vllm@0.5.0", "old");
  EXPECT_EQ(old.status, 2);
  EXPECT_THAT(old.err, HasSubstr("runtime 'vllm': vLLM version '0.5.0' is older than this table covers (0.11.2 and later)"));
  EXPECT_THAT(old.err, HasSubstr("a command-line setting"));  // not a made-up file position
  EXPECT_FALSE(fs::exists(path("old")));
  const RunResult malformed = with("llama-cpp@8607", "malformed");
  EXPECT_EQ(malformed.status, 2);
  EXPECT_THAT(malformed.err, HasSubstr("runtime 'llama-cpp': llama.cpp version '8607' is not valid; expected"));
  const RunResult nameless = with("nosuch@1.0", "nameless");
  EXPECT_EQ(nameless.status, 2);
  EXPECT_THAT(nameless.err, HasSubstr("unknown runtime 'nosuch'; valid ones are: llama-cpp, lmdeploy"));
}


// A sweep of 144 points in three batches (about 5 s on one core), so Ctrl-C after 1 s lands in a batch.
const char* const kInterruptSweep = R"(name = "interrupt"
seeds = 4
[workload]
tokens = 65536
head_dim = 128
queries = 2
[search]
k = ["q8_0", "q4_0", "q5_0", "q5_1", "q4_1", "iq4_nl", "int:bits=8,axis=channel", "int:bits=4,axis=channel",
     "int:bits=2,axis=channel", "int:bits=8,axis=token", "int:bits=4,axis=token", "int:bits=2,axis=token"]
v = ["q8_0", "q4_0", "q5_0", "q5_1", "q4_1", "iq4_nl", "int:bits=8,axis=token", "int:bits=4,axis=token",
     "int:bits=2,axis=token", "f16", "bf16", "int:bits=6,axis=token"]
)";

// Issue #17 item 5: --shard auto takes I and N from a Slurm job array (ID - MIN of COUNT) or a
// Kubernetes Indexed Job (JOB_COMPLETION_INDEX, the count from auto/N or KVTUNE_SHARDS); what it
// cannot read is bad input (exit 2) naming the variable, and nothing is written.
TEST_F(SweepCli, ShardAutoReadsSlurmArraysAndKubernetesIndexedJobs) {
  write_text(path("small.toml"), kSmallSweep);
  const std::string clean = "env -u SLURM_ARRAY_TASK_ID -u SLURM_ARRAY_TASK_STEP -u JOB_COMPLETION_INDEX -u KVTUNE_SHARDS ";
  auto shard_of = [&](const std::string& env, const std::string& shard, const std::string& dir) {
    const RunResult r = run_kvtune({"sweep", path("small.toml").string(), "--shard", shard, "--out", path(dir).string()},
                                   path(""), clean + env);
    EXPECT_EQ(r.status, 0) << r.err;
    std::istringstream lines(read_text(path(dir) / "results.jsonl"));
    std::string first;
    if (!std::getline(lines, first)) return std::pair<int64_t, int64_t>{-1, -1};
    const json record = json::parse(first);
    return std::pair{record["shard"].get<int64_t>(), record["shards"].get<int64_t>()};
  };
  const std::string slurm = "SLURM_ARRAY_TASK_MIN=1 SLURM_ARRAY_TASK_MAX=4 SLURM_ARRAY_TASK_COUNT=4 ";
  EXPECT_EQ(shard_of(slurm + "SLURM_ARRAY_TASK_ID=3 ", "auto", "slurm"), (std::pair<int64_t, int64_t>{2, 4}));
  EXPECT_EQ(shard_of(slurm + "SLURM_ARRAY_TASK_ID=4 ", "auto/4", "slurm4"), (std::pair<int64_t, int64_t>{3, 4}));
  EXPECT_EQ(shard_of("JOB_COMPLETION_INDEX=1 ", "auto/3", "k8s"), (std::pair<int64_t, int64_t>{1, 3}));
  EXPECT_EQ(shard_of("JOB_COMPLETION_INDEX=2 KVTUNE_SHARDS=3 ", "auto", "k8s-env"), (std::pair<int64_t, int64_t>{2, 3}));

  auto refused = [&](const std::string& env, const std::string& shard, const std::string& message) {
    const RunResult r = run_kvtune({"sweep", path("small.toml").string(), "--shard", shard, "--out", path("bad").string()},
                                   path(""), clean + env);
    EXPECT_EQ(r.status, 2) << env << shard;
    EXPECT_THAT(r.err, HasSubstr(message)) << env << shard;
    EXPECT_FALSE(fs::exists(path("bad"))) << env << shard;
  };
  refused("", "auto", "--shard auto: neither SLURM_ARRAY_TASK_ID (a Slurm job array, sbatch --array) nor "
                      "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set");
  refused("SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=6 SLURM_ARRAY_TASK_COUNT=4 ", "auto",
          "the Slurm job array's indices 0..6 are not one unbroken range of 4 tasks; submit it as --array=0-3");
  refused("SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=3 ", "auto",
          "--shard auto: SLURM_ARRAY_TASK_COUNT is not set");
  refused(slurm + "SLURM_ARRAY_TASK_ID=2 ", "auto/5", "--shard auto/5: the Slurm job array has 4 tasks, not 5");
  refused("JOB_COMPLETION_INDEX=1 ", "auto", "pass --shard auto/N with N = the job's completions, or set KVTUNE_SHARDS");
  refused("JOB_COMPLETION_INDEX=3 ", "auto/3", "--shard auto/3: JOB_COMPLETION_INDEX = 3 is not below the shard count 3");
  refused("JOB_COMPLETION_INDEX=x1 ", "auto/3", "--shard auto/3: JOB_COMPLETION_INDEX = 'x1' is not a whole number");
  refused("", "auto/0", "--shard 'auto/0': expected I/N with 0 <= I < N (e.g. 0/4), auto or auto/N");
  refused("", "4/4", "--shard '4/4': expected I/N with 0 <= I < N (e.g. 0/4), auto or auto/N");
  // Counts that disagree, and a step (these were ignored), and a count of 0 (which suggested --array=0--1).
  refused("JOB_COMPLETION_INDEX=1 KVTUNE_SHARDS=2 ", "auto/3",
          "--shard auto/3: KVTUNE_SHARDS = 2 disagrees with the 3 shards of --shard");
  refused(slurm + "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_STEP=0 ", "auto",
          "--shard auto: the Slurm job array steps by 0 (SLURM_ARRAY_TASK_STEP); submit it as --array=0-3");
  refused(slurm + "SLURM_ARRAY_TASK_ID=2 SLURM_ARRAY_TASK_STEP=x ", "auto",
          "--shard auto: SLURM_ARRAY_TASK_STEP = 'x' is not a whole number");
  refused("SLURM_ARRAY_TASK_ID=0 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=0 SLURM_ARRAY_TASK_COUNT=0 ", "auto",
          "--shard auto: SLURM_ARRAY_TASK_COUNT = 0 is not a number of tasks");
  EXPECT_EQ(shard_of(slurm + "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_STEP=1 ", "auto", "slurm-step"),
            (std::pair<int64_t, int64_t>{0, 4}));
  // auto/N is the count; a KVTUNE_SHARDS that is not a number has nothing to disagree with.
  EXPECT_EQ(shard_of("JOB_COMPLETION_INDEX=1 KVTUNE_SHARDS=x ", "auto/3", "k8s-junk"), (std::pair<int64_t, int64_t>{1, 3}));
}

// Runs `command` under script(1), which gives it a pseudo-terminal, and returns what the terminal
// showed (stderr included). util-linux's script is in bsdutils, which every Debian system has.
std::string on_a_terminal(const std::string& command, const fs::path& typescript) {
  const std::string line = "script -qfec " + shell_quote(command) + " " + shell_quote(typescript.string()) + " >/dev/null";
  EXPECT_EQ(std::system(line.c_str()), 0) << line;
  return read_text(typescript);
}

size_t count_of(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// Issue #17 item 6: on a terminal the line shows points done, rate and ETA and is redrawn several
// times a second while a batch runs (the 144-point sweep takes 2-5 s in three batches); with CI set,
// or without a terminal, nothing.
TEST_F(SweepCli, ProgressLineOnATerminalOnlyAndNotUnderCi) {
  write_text(path("slow.toml"), kInterruptSweep);
  const std::string sweep = shell_quote(KVTUNE_BINARY) + " sweep " + shell_quote(path("slow.toml").string()) +
                            " --jobs 1 >/dev/null --out ";
  const std::string shown = on_a_terminal("env -u CI " + sweep + shell_quote(out() + "-tty"), path("tty.txt"));
  EXPECT_THAT(shown, HasSubstr("\rkvtune sweep: evaluating 0/144 points (0%), ETA --:--"));
  EXPECT_THAT(shown, HasSubstr("kvtune sweep: evaluating 144/144 points (100%), "));
  EXPECT_THAT(shown, ::testing::ContainsRegex("points/s, ETA [0-9]+:[0-9][0-9]"));
  // At least 4 redraws a second minus start-up: far more than the 3 batch ends alone would give.
  EXPECT_GE(count_of(shown, "\rkvtune sweep: evaluating"), 6u) << shown;
  const std::string ci = on_a_terminal("env CI=true " + sweep + shell_quote(out() + "-ci"), path("ci.txt"));
  EXPECT_THAT(ci, Not(HasSubstr("evaluating")));
  const RunResult piped = run({"sweep", path("slow.toml").string(), "--out", out() + "-pipe", "--jobs", "2"});
  ASSERT_EQ(piped.status, 0) << piped.err;
  EXPECT_THAT(piped.err, Not(HasSubstr("evaluating")));
}

// A shard has no terminal under a batch scheduler: it logs whole lines (the last one at the end).
TEST_F(SweepCli, AShardLogsItsProgressWithoutATerminal) {
  write_text(path("slow.toml"), kInterruptSweep);
  const std::string command = "env -u CI " + shell_quote(KVTUNE_BINARY) + " sweep " +
                              shell_quote(path("slow.toml").string()) + " --shard 1/2 --jobs 2 --out " +
                              shell_quote(out()) + " >/dev/null 2>" + shell_quote(path("err.txt").string());
  ASSERT_EQ(std::system(command.c_str()), 0);
  const std::string err = read_text(path("err.txt"));
  EXPECT_THAT(err, ::testing::ContainsRegex("kvtune sweep shard 1/2: evaluating 72/72 points \\(100%\\), [0-9.]+ "
                                            "points/s, ETA 0:00\n"));
  EXPECT_THAT(err, Not(HasSubstr("\r")));
}

// Before: SIGINT ended the process with status 130 and no word.
TEST_F(SweepCli, CtrlCStopsAfterTheBatchAndSaysHowToResume) {
  write_text(path("slow.toml"), kInterruptSweep);
  // One SIGINT to kvtune alone, as a terminal's Ctrl-C would (timeout(1) also signals its group).
  const std::string command = shell_quote(KVTUNE_BINARY) + " sweep " + shell_quote(path("slow.toml").string()) +
                              " --out " + shell_quote(out()) + " --jobs 1 >/dev/null 2>" +
                              shell_quote(path("err.txt").string()) + " & pid=$!; sleep 1; kill -INT $pid; wait $pid";
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 130);
  const std::string err = read_text(path("err.txt"));
  // The running batch finishes first (on a slow machine a later one may be running at 1 s).
  const size_t written = lines_of(read_text(path("out") / "results.jsonl"));
  EXPECT_TRUE(written == 64 || written == 128) << written;
  EXPECT_THAT(err, HasSubstr("kvtune: interrupted; " + std::to_string(written) + " of 144 points are in " + out() +
                             "/results.jsonl"));
  EXPECT_THAT(err, HasSubstr("continue with: kvtune sweep " + path("slow.toml").string() + " --out " + out() +
                             " --resume"));
  const RunResult resumed = run({"sweep", path("slow.toml").string(), "--out", out(), "--resume", "--jobs", "2"});
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  EXPECT_EQ(lines_of(read_text(path("out") / "results.jsonl")), 144u);
}

// Before: recommend told the user to pass --resume, which it did not accept.
TEST_F(SweepCli, RecommendResumesItsOwnSweep) {
  const std::vector<std::string> args = {"recommend", "--model", "llama-3.2-1b", "--ctx", "4096", "--eval-ctx", "256",
                                         "--max-rel-err", "0.05", "--runtime", "ollama", "--out", out()};
  ASSERT_EQ(run(args).status, 0);
  const RunResult again = run(args);
  EXPECT_EQ(again.status, 2);
  EXPECT_THAT(again.err, HasSubstr("pass --resume"));
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  const RunResult resumed = run(resume);
  EXPECT_EQ(resumed.status, 0) << resumed.err;
}

// Before: summary.json carried violations and gaps as English sentences.
TEST_F(SweepCli, SummaryJsonHoldsViolationsGapsAndNotesAsData) {
  write_text(path("data.toml"), kSmallSweep);
  const RunResult r = run({"sweep", path("data.toml").string(), "--out", out(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json summary = json::parse(r.out);
  bool saw_metric = false;
  for (const json& p : summary["frontier"]) {
    for (const json& v : p["violations"]) {
      ASSERT_TRUE(v.is_object()) << v;
      if (v["kind"] != "metric") continue;
      saw_metric = true;
      EXPECT_TRUE(v["term"] == "max_rel_out_err" || v["term"] == "min_needle_hit") << v;
      EXPECT_TRUE(v["value"].is_number());
      EXPECT_TRUE(v["bound"].is_number());
      EXPECT_TRUE(v["bound_kind"] == "max" || v["bound_kind"] == "min");
    }
  }
  EXPECT_TRUE(saw_metric);
  ASSERT_EQ(summary["runtimes"].size(), 1u);
  const json& gap = summary["runtimes"][0]["gap"];
  ASSERT_TRUE(gap.is_object()) << gap;
  EXPECT_TRUE(gap.contains("kind"));
  EXPECT_TRUE(summary["notes"].is_array());
  for (const json& n : summary["notes"]) EXPECT_TRUE(n.is_object() && n.contains("kind")) << n;
  // The console still says it in words.
  const RunResult words = run({"sweep", path("data.toml").string(), "--out", out("w")});
  ASSERT_EQ(words.status, 0) << words.err;
  EXPECT_THAT(words.out, HasSubstr("rel_out_err"));
}

// llama.cpp stores a Llama model's keys with RoPE pairs adjacent: the search's rotated q4_0/iq4_nl, in
// the checkpoint's order, is llama.cpp's own pair in another order, which the gap says, in words and
// in summary.json, rather than "not available".
TEST_F(SweepCli, TheGapNamesARuntimesOwnTypesInAnotherKeyOrder) {
  write_text(path("order.toml"), R"(name = "order"
seeds = 2
seed_start = 1
runtimes = ["llama-cpp"]
[workload]
model = "llama-3.1-8b"
tokens = 1024
layers = [0]
heads = [0]
[workload.keys]
outlier_count = 4
outlier_scale = 10.0
[search]
k = ["q4_0:rotation=hadamard"]
v = ["iq4_nl:rotation=hadamard"]
[budget]
max_bits = 4.5
objective = "min_error"
)");
  const RunResult r = run({"sweep", path("order.toml").string(), "--out", out()});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("the best overall (K q4_0:rotation=hadamard, V iq4_nl:rotation=hadamard; llama.cpp's own "
                               "types, but it stores this model's keys in another channel order, pair_order=adjacent)"));
  const json summary = json::parse(read_text(path("out") / "summary.json"));
  const json& gap = summary["runtimes"][0]["gap"];
  EXPECT_EQ(gap["best_expressible"], false);
  EXPECT_EQ(gap["best_key_order"], "adjacent");
}

}  // namespace
}  // namespace kvtune::e2e
