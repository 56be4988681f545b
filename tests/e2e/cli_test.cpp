// End-to-end tests of the `kvtune` command line: they run the built binary, as a user would, and
// check its exit status, its stdout (tables and --json) and the messages it writes to stderr.
// Exit statuses (core/cli/main.cpp): 0 success, 2 bad input, 1 internal error.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "capture_fixture.h"
#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

std::string test_data(const std::string& relative) { return std::string(KVTUNE_TEST_DATA) + "/" + relative; }

// The `name = "..."` of every [[pairs]] entry of a scenario file, in order. A line scan is enough
// for the repository's own, plainly formatted sweep files.
std::vector<std::string> pair_names_of(const fs::path& toml) {
  std::istringstream lines(read_text(toml));
  std::vector<std::string> names;
  bool in_pair = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with('[')) in_pair = line == "[[pairs]]";
    if (in_pair && line.starts_with("name = \"")) names.push_back(line.substr(8, line.rfind('"') - 8));
  }
  return names;
}

// One line of tests/data/seed-torch/expected.txt: "NAME   rel_out_err=X max_logit_err=Y".
struct ReferenceRow {
  std::string name;
  double rel_out_err = 0.0, max_logit_err = 0.0;
};

std::vector<ReferenceRow> read_reference_rows(const fs::path& path) {
  std::istringstream lines(read_text(path));
  std::vector<ReferenceRow> rows;
  for (std::string line; std::getline(lines, line);) {
    const size_t rel = line.find("rel_out_err="), logit = line.find("max_logit_err=");
    if (rel == std::string::npos || logit == std::string::npos) continue;
    ReferenceRow row;
    row.name = line.substr(0, line.find_last_not_of(' ', rel - 1) + 1);
    row.rel_out_err = std::stod(line.substr(rel + std::strlen("rel_out_err=")));
    row.max_logit_err = std::stod(line.substr(logit + std::strlen("max_logit_err=")));
    rows.push_back(row);
  }
  return rows;
}

// The reference printed 6 decimals, i.e. about 4 significant digits for these magnitudes.
::testing::AssertionResult agrees_to_4_digits(double actual, double expected) {
  const bool ok = expected == 0.0 ? std::abs(actual) < 1e-6 : std::abs(actual - expected) / std::abs(expected) < 5e-4;
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << actual << " does not agree with the reference " << expected
                                       << " to 4 significant digits";
}

// Every JSON row carries these keys and no others (DESIGN §5 metric names, verbatim).
const std::set<std::string> kRowKeys = {"name",
                                        "k",
                                        "v",
                                        "k_bits",
                                        "v_bits",
                                        "rel_out_err",
                                        "max_logit_err",
                                        "shift_logit_err",
                                        "attn_kl",
                                        "top1_agree",
                                        "topk_overlap",
                                        "needle_hit",
                                        "needle_mass_ratio",
                                        "tokens",
                                        "needle_depths",
                                        "kernel_vs_sim",
                                        "backend_used"};

std::set<std::string> keys_of(const json& object) {
  std::set<std::string> keys;
  for (const auto& [key, value] : object.items()) keys.insert(key);
  return keys;
}

// A metric summary as --json prints it: mean/p95/max over `count` samples.
void expect_summary(const json& summary, size_t count, const std::string& metric) {
  SCOPED_TRACE(metric);
  ASSERT_TRUE(summary.is_object()) << summary.dump();
  EXPECT_EQ(keys_of(summary), (std::set<std::string>{"mean", "p95", "max", "count", "level", "mean_ci",
                                                      "mean_ci_method", "p95_ci", "p95_ci_method"}));
  EXPECT_EQ(summary["count"].get<size_t>(), count);
  const double mean = summary["mean"].get<double>(), p95 = summary["p95"].get<double>(),
               max = summary["max"].get<double>();
  EXPECT_TRUE(std::isfinite(mean) && std::isfinite(p95) && std::isfinite(max));
  EXPECT_LE(p95, max);
  EXPECT_LE(mean, max);
  // The mean's 95 % interval over the cases: Wilson with their design effect for the 0/1 metrics,
  // Student's t otherwise.
  EXPECT_EQ(summary["level"].get<double>(), 0.95);
  const bool rate = metric.rfind("needle_hit", 0) == 0 || metric == "top1_agree";
  EXPECT_EQ(summary["mean_ci_method"], rate ? "wilson_cases" : "t_cases");
  EXPECT_LE(summary["mean_ci"][0].get<double>(), mean);
  EXPECT_GE(summary["mean_ci"][1].get<double>(), mean);
}

class Cli : public ScratchDirTest {
 protected:
  // Small valid K [8, 16], V [8, 16] and q [16] tensors; the bad-input tests spoil one at a time.
  void write_small_tensors() const {
    write_float32_matrix(path("K.npy"), 8, 16);
    write_float32_matrix(path("V.npy"), 8, 16, 0.25f);
    std::vector<float> q(16);
    for (size_t i = 0; i < q.size(); ++i) q[i] = 0.1f * static_cast<float>(i) - 0.7f;
    write_text(path("q.npy"), npy_bytes("<f4", "(16,)", raw_bytes(q)));
  }

  RunResult simulate_small(const std::string& pair) const {
    return run({"simulate", "--k", path("K.npy"), "--v", path("V.npy"), "--q", path("q.npy"), "--pair", pair});
  }

  // Bad input: status 2, nothing on stdout, one "kvtune: ..." message on stderr.
  static void expect_input_error(const RunResult& r) {
    EXPECT_EQ(r.status, 2) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("kvtune: ")) << r.err;
  }
};

// ---------------------------------------------------------------------------------------------
// simulate

// An unknown command is named (CLI11 alone says only that a subcommand is required).
TEST_F(Cli, AnUnknownCommandIsNamed) {
  const RunResult r = run({"smiulate"});
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.err, HasSubstr("kvtune: unknown command 'smiulate'; the commands are listed by kvtune --help"));
  const RunResult none = run({});
  EXPECT_EQ(none.status, 2);
  EXPECT_THAT(none.err, HasSubstr("A subcommand is required"));
}

TEST_F(Cli, SimulateWithoutArgumentsRunsTheEmbeddedSeedTable) {
  const RunResult r = run({"simulate"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("cases 64  tokens 4096  head_dim 128"));
  const std::vector<std::string> names = pair_names_of(fs::path(KVTUNE_SOURCE_DIR) / "sweeps/seed-table.toml");
  ASSERT_EQ(names.size(), 4u);
  for (const std::string& name : names) EXPECT_THAT(r.out, HasSubstr("\n" + name + "  ")) << "row " << name;
}

TEST_F(Cli, SimulateOnSeedTorchTensorsMatchesThePyTorchReference) {
  const RunResult r = run({"simulate", "--k", test_data("seed-torch/K.npy"), "--v", test_data("seed-torch/V.npy"),
                           "--q", test_data("seed-torch/q.npy"),  //
                           "--pair", "int:bits=8,axis=tensor/int:bits=8,axis=tensor", "--pair",
                           "int:bits=8,axis=channel/int:bits=8,axis=token", "--pair", "none/int:bits=8,axis=token",  //
                           "--pair", "int:bits=8,axis=tensor/none", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  EXPECT_EQ(result["contexts"], json{4096});
  EXPECT_EQ(result["head_dim"], 128);
  EXPECT_EQ(result["cases"], 1);

  // The --pair order above is the order of expected.txt's lines.
  const std::vector<ReferenceRow> reference = read_reference_rows(test_data("seed-torch/expected.txt"));
  const json& rows = result["rows"];
  ASSERT_EQ(reference.size(), 4u);
  ASSERT_EQ(rows.size(), reference.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE(reference[i].name);
    EXPECT_TRUE(agrees_to_4_digits(rows[i]["rel_out_err"]["mean"].get<double>(), reference[i].rel_out_err));
    EXPECT_TRUE(agrees_to_4_digits(rows[i]["max_logit_err"]["mean"].get<double>(), reference[i].max_logit_err));
  }

  // Bits per element include the f32 scales: one per tensor, per channel (128) or per token (4096).
  const double elements = 4096.0 * 128.0;
  const double per_tensor = 8 + 32 / elements, per_channel = 8 + 32 * 128 / elements,
               per_token = 8 + 32 * 4096 / elements, exact = 32;
  const double expected_bits[4][2] = {
      {per_tensor, per_tensor}, {per_channel, per_token}, {exact, per_token}, {per_tensor, exact}};
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_DOUBLE_EQ(rows[i]["k_bits"].get<double>(), expected_bits[i][0]) << "row " << i;
    EXPECT_DOUBLE_EQ(rows[i]["v_bits"].get<double>(), expected_bits[i][1]) << "row " << i;
  }
  EXPECT_DOUBLE_EQ(per_channel, 8.0078125);
  EXPECT_DOUBLE_EQ(per_token, 8.25);
}

TEST_F(Cli, SimulateScenarioFileJsonHasExactlyTheMetricKeys) {
  write_text(path("small.toml"),
             "name = \"small\"\n"
             "seeds = 3\n"
             "[workload]\n"
             "tokens = 256\n"
             "head_dim = 64\n"
             "queries = 2\n"
             "[[pairs]]\n"
             "k = \"int:bits=4,axis=channel\"\n"
             "v = \"int:bits=4,axis=token\"\n");
  const RunResult r = run({"simulate", path("small.toml"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  EXPECT_EQ(result["cases"], 3);
  EXPECT_EQ(result["contexts"], json{256});
  EXPECT_EQ(result["head_dim"], 64);
  EXPECT_EQ(result["queries_per_case"], 2);
  ASSERT_EQ(result["rows"].size(), 1u);
  const json& row = result["rows"][0];
  EXPECT_EQ(keys_of(row), kRowKeys);
  EXPECT_EQ(row["k"], "int:bits=4,axis=channel");
  EXPECT_EQ(row["v"], "int:bits=4,axis=token");
  EXPECT_EQ(row["name"], "int:bits=4,axis=channel / int:bits=4,axis=token");
  for (const char* metric :
       {"rel_out_err", "max_logit_err", "shift_logit_err", "attn_kl", "top1_agree", "topk_overlap"}) {
    expect_summary(row[metric], 3 * 2, metric);  // one sample per query per seed
  }
  EXPECT_GT(row["rel_out_err"]["mean"].get<double>(), 0.0);  // 4 bits cannot be exact
  EXPECT_EQ(row["tokens"], 256);
  EXPECT_TRUE(row["needle_hit"].is_null());                  // no needles in this workload
  EXPECT_TRUE(row["needle_mass_ratio"].is_null());
  EXPECT_TRUE(row["needle_depths"].empty());
  EXPECT_EQ(result["backend"], "cpu");
  EXPECT_TRUE(row["kernel_vs_sim"].is_null());  // only the cuda-kernel backend measures it
}

// [metrics] precision and --precision choose the products' arithmetic; the JSON and the table say
// which ran, float32 gives other (bounded) numbers, and a bad value is refused with exit 2.
TEST_F(Cli, SimulatePrecisionComesFromTheFileOrTheCommandLine) {
  const std::string scenario =
      "name = \"p\"\nseeds = 2\n[workload]\ntokens = 300\nhead_dim = 64\nqueries = 2\n"
      "[[pairs]]\nk = \"f16\"\nv = \"q8_0\"\n";
  write_text(path("p64.toml"), scenario);
  write_text(path("p32.toml"), scenario + "[metrics]\nprecision = \"float32\"\n");
  const RunResult f64 = run({"simulate", path("p64.toml"), "--json"});
  const RunResult f32 = run({"simulate", path("p32.toml"), "--json"});
  const RunResult flag = run({"simulate", path("p64.toml"), "--precision", "float32", "--json"});
  ASSERT_EQ(f64.status, 0) << f64.err;
  ASSERT_EQ(f32.status, 0) << f32.err;
  ASSERT_EQ(flag.status, 0) << flag.err;
  EXPECT_EQ(json::parse(f64.out)["precision"], "float64");
  EXPECT_EQ(json::parse(f32.out)["precision"], "float32");
  EXPECT_EQ(json::parse(flag.out), json::parse(f32.out));
  const double a = json::parse(f64.out)["rows"][0]["max_logit_err"]["mean"].get<double>();
  const double b = json::parse(f32.out)["rows"][0]["max_logit_err"]["mean"].get<double>();
  EXPECT_NE(a, b);
  EXPECT_NEAR(a, b, 1e-3 * a);
  const RunResult table = run({"simulate", path("p32.toml")});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("backend cpu  products float32"));

  const RunResult unknown = run({"simulate", path("p64.toml"), "--precision", "double"});
  expect_input_error(unknown);
  EXPECT_THAT(unknown.err, HasSubstr("--precision: unknown precision 'double'; expected one of: float64, float32"));
  write_text(path("bad.toml"), scenario + "[metrics]\nprecision = \"half\"\n");
  const RunResult bad = run({"simulate", path("bad.toml")});
  expect_input_error(bad);
  EXPECT_THAT(bad.err, HasSubstr(path("bad.toml").string() + ":11:13: 'precision' must be one of: float64, float32"));
}

TEST_F(Cli, SimulateScenarioWithNeedlesSummarizesTheNeedleMetrics) {
  write_text(path("needles.toml"),
             "seeds = 3\n"
             "[workload]\n"
             "tokens = 256\n"
             "head_dim = 64\n"
             "[workload.needles]\n"
             "depths = [0.5]\n"
             "[[pairs]]\n"
             "k = \"int:bits=8,axis=channel\"\n"
             "v = \"none\"\n");
  const RunResult r = run({"simulate", path("needles.toml"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  ASSERT_EQ(result["rows"].size(), 1u);
  const json& row = result["rows"][0];
  EXPECT_EQ(keys_of(row), kRowKeys);
  expect_summary(row["needle_hit"], 3, "needle_hit");  // one needle query per seed
  expect_summary(row["needle_mass_ratio"], 3, "needle_mass_ratio");
  // Needles hold half the attention; 8-bit per-channel keys keep every one of them on top and
  // their mass within a few percent.
  EXPECT_EQ(row["needle_hit"]["mean"].get<double>(), 1.0);
  EXPECT_NEAR(row["needle_mass_ratio"]["mean"].get<double>(), 1.0, 0.05);
  ASSERT_EQ(row["needle_depths"].size(), 1u);
  EXPECT_EQ(row["needle_depths"][0]["depth"], 0.5);
  expect_summary(row["needle_depths"][0]["needle_hit"], 3, "needle_hit at depth 0.5");
}

// A scenario over two context lengths, three depths and multi-needle queries: the JSON has one
// row per pair and context, the console a depth x context table per pair, the CSV one line per
// (pair, context, depth).
TEST_F(Cli, SimulatePrintsNeedleTablesByDepthAndContextAndWritesThemAsCsv) {
  write_text(path("depths.toml"),
             "seeds = 2\n"
             "[workload]\n"
             "tokens = [256, 512]\n"
             "head_dim = 64\n"
             "queries = 3\n"
             "[workload.needles]\n"
             "depths = [0.1, 0.5, 0.9]\n"
             "per_query = 2\n"
             "[[pairs]]\n"
             "name = \"k8\"\n"
             "k = \"int:bits=8,axis=channel\"\n"
             "v = \"none\"\n"
             "[[pairs]]\n"
             "name = \"k2\"\n"
             "k = \"int:bits=2,axis=token\"\n"
             "v = \"none\"\n");
  const std::string csv_path = path("needles.csv");
  const RunResult r = run({"simulate", path("depths.toml"), "--json", "--needle-csv", csv_path});
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  EXPECT_EQ(result["contexts"], (json{256, 512}));
  ASSERT_EQ(result["rows"].size(), 4u);  // 2 pairs x 2 contexts, context-major
  EXPECT_EQ(result["rows"][0]["tokens"], 256);
  EXPECT_EQ(result["rows"][3]["tokens"], 512);
  EXPECT_EQ(result["rows"][3]["name"], "k2");
  // 3 queries x 2 needles = 6 needles per case, cycling over the 3 depths: 2 per depth per case.
  for (const json& row : result["rows"]) {
    expect_summary(row["needle_hit"], 2 * 6, "needle_hit");
    ASSERT_EQ(row["needle_depths"].size(), 3u);
    for (const json& d : row["needle_depths"]) expect_summary(d["needle_hit"], 2 * 2, "needle_hit by depth");
  }
  EXPECT_EQ(result["rows"][0]["needle_hit"]["mean"].get<double>(), 1.0);  // 8-bit keys keep every needle

  std::istringstream lines(read_text(csv_path));
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line,
            "pair,k,v,tokens,depth,needles,needle_hit,needle_mass_ratio,needle_hit_lo,needle_hit_hi,"
            "needle_mass_ratio_lo,needle_mass_ratio_hi");
  std::vector<std::string> body;
  while (std::getline(lines, line)) body.push_back(line);
  ASSERT_EQ(body.size(), 12u);  // 2 contexts x 2 pairs x 3 depths
  EXPECT_THAT(body[0], ::testing::StartsWith("k8,\"int:bits=8,axis=channel\",none,256,0.1,4,1,"));
  EXPECT_THAT(body[11], ::testing::StartsWith("k2,\"int:bits=2,axis=token\",none,512,0.9,4,"));

  const RunResult table = run({"simulate", path("depths.toml")});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr("needle_hit (needle_mass_ratio) [needle_hit's 95 % Wilson interval] by depth x context: k8"));
  EXPECT_THAT(table.out, HasSubstr("needle_hit (needle_mass_ratio) [needle_hit's 95 % Wilson interval] by depth x context: k2"));
  EXPECT_THAT(table.out, HasSubstr("1.000 ("));
}

TEST_F(Cli, NeedleCsvIntoAMissingDirectoryFailsBeforeEvaluating) {
  write_text(path("one.toml"), "[workload]\ntokens = 64\nhead_dim = 16\n[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult r = run({"simulate", path("one.toml"), "--needle-csv", path("no/such/dir/n.csv")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("no/such/dir/n.csv"));
  EXPECT_FALSE(fs::exists(path("no/such/dir/n.csv")));
  // The scenario file itself (another spelling of it) is an input, not a place for the CSV.
  const std::string scenario = read_text(path("one.toml"));
  const RunResult over = run({"simulate", path("one.toml"), "--needle-csv", path(".") / "one.toml"});
  expect_input_error(over);
  EXPECT_THAT(over.err, HasSubstr("is also an input"));
  EXPECT_EQ(read_text(path("one.toml")), scenario);
}

// `model = NAME` takes the shape and RoPE from configs/models; layers and heads are sampled.
TEST_F(Cli, ScenarioWithAModelPresetSamplesItsLayersAndHeads) {
  write_text(path("model.toml"),
             "seeds = 1\n"
             "[workload]\n"
             "model = \"llama-3.1-8b\"\n"
             "tokens = 128\n"
             "layers = [0, 31]\n"
             "heads = [7]\n"
             "[[pairs]]\n"
             "k = \"int:bits=8,axis=channel\"\n"
             "v = \"int:bits=8,axis=token\"\n");
  const RunResult r = run({"simulate", path("model.toml"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json result = json::parse(r.out);
  EXPECT_EQ(result["head_dim"], 128);        // Llama-3.1-8B: head_dim 128 (configs/models/llama-3.1-8b.toml)
  EXPECT_EQ(result["cases"], 2);             // 1 seed x layers {0, 31} x head {7}
  EXPECT_EQ(result["queries_per_case"], 4);  // 32 query heads / 8 KV heads, one query each

  write_text(path("model-bad.toml"), "[workload]\nmodel = \"llama-9\"\n[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult bad = run({"simulate", path("model-bad.toml")});
  expect_input_error(bad);
  EXPECT_THAT(bad.err, HasSubstr(path("model-bad.toml").string() + ":2:9:"));
  EXPECT_THAT(bad.err, HasSubstr("llama-3.1-8b"));  // the available presets are listed

  write_text(path("layer-bad.toml"),
             "[workload]\nmodel = \"llama-3.2-1b\"\nlayers = [0, 16]\n[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult out_of_range = run({"simulate", path("layer-bad.toml")});
  expect_input_error(out_of_range);
  EXPECT_THAT(out_of_range.err, HasSubstr(path("layer-bad.toml").string() + ":3:"));
  // Llama-3.2-1B has 16 layers (configs/models/llama-3.2-1b.toml).
  EXPECT_THAT(out_of_range.err, HasSubstr("'layers' entries must be integers in 0..15"));
}

// A preset alone gives the shape, not the model's statistics, and the output says so; `profile`
// names a model's own (configs/profiles), and an unknown one is refused with the available names.
TEST_F(Cli, ScenarioSaysWhetherItsStatisticsAreGenericOrAModelsProfile) {
  const std::string head = "seeds = 1\n[workload]\nmodel = \"qwen3-8b\"\ntokens = 128\nlayers = [0]\nheads = [0]\n";
  const std::string pairs = "[[pairs]]\nk = \"q4_0\"\nv = \"f16\"\n";
  write_text(path("generic.toml"), head + pairs);
  const RunResult generic = run({"simulate", path("generic.toml")});
  ASSERT_EQ(generic.status, 0) << generic.err;
  EXPECT_THAT(generic.out, HasSubstr("statistics: generic synthetic keys and values, the same for every model"));
  const RunResult generic_json = run({"simulate", path("generic.toml"), "--json"});
  ASSERT_EQ(generic_json.status, 0) << generic_json.err;
  EXPECT_EQ(json::parse(generic_json.out)["profile"], "generic");

  write_text(path("profiled.toml"), head + "profile = \"qwen3\"\n" + pairs);
  const RunResult profiled = run({"simulate", path("profiled.toml"), "--json"});
  ASSERT_EQ(profiled.status, 0) << profiled.err;
  EXPECT_EQ(json::parse(profiled.out)["profile"], "qwen3");

  write_text(path("profile-bad.toml"), head + "profile = \"qwen9\"\n" + pairs);
  const RunResult bad = run({"simulate", path("profile-bad.toml")});
  expect_input_error(bad);
  EXPECT_THAT(bad.err, HasSubstr(path("profile-bad.toml").string() + ":7:11: unknown model profile 'qwen9'"));
  EXPECT_THAT(bad.err, HasSubstr("qwen3-0.6b"));  // the available profiles are listed
}

// `--cache DIR` evaluates every sample, captured layer and KV head of a capture directory
// (docs/real-caches.md); a directory that is not one is refused with exit 2.
TEST_F(Cli, SimulateOnACaptureDirectoryEvaluatesItsCases) {
  testing::write_capture(path("cap"));
  const RunResult r = run({"simulate", "--cache", path("cap").string(), "--pair", "q8_0/q8_0", "--pair", "q4_0/f16", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["profile"], "cache");
  EXPECT_EQ(doc["cases"], 8);  // 2 samples x layers {0, 2} x 2 KV heads
  EXPECT_EQ(doc["queries_per_case"], 2);
  EXPECT_EQ(doc["head_dim"], 32);
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_LT(doc["rows"][0]["rel_out_err"]["mean"].get<double>(), doc["rows"][1]["rel_out_err"]["mean"].get<double>());

  const RunResult text = run({"simulate", "--cache", path("cap").string(), "--pair", "q8_0/q8_0"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("statistics: a real cache"));

  const RunResult missing = run({"simulate", "--cache", path("nope").string(), "--pair", "q8_0/q8_0"});
  expect_input_error(missing);
  EXPECT_THAT(missing.err, HasSubstr("not a capture directory (no manifest.json"));
  const RunResult no_pair = run({"simulate", "--cache", path("cap").string()});
  expect_input_error(no_pair);
  EXPECT_THAT(no_pair.err, HasSubstr("--cache needs at least one --pair"));
  fs::remove(path("cap") / "layer_002.safetensors");
  const RunResult broken = run({"simulate", "--cache", path("cap").string(), "--pair", "q8_0/q8_0"});
  expect_input_error(broken);
  EXPECT_THAT(broken.err, HasSubstr("layer_002.safetensors: missing (the manifest lists it)"));
}

// calibrate: static scales fitted on a capture, written as the runtimes load them; a bad request
// writes nothing and exits 2.
TEST_F(Cli, CalibrateWritesTheScaleFilesOrNothing) {
  testing::write_capture(path("cap"));
  const RunResult r = run({"calibrate", path("cap").string(), "--out", path("scales").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["layers"].size(), 2u);
  EXPECT_EQ(doc["layers"][1]["layer"], 2);
  EXPECT_GT(doc["layers"][1]["k_scale"].get<double>(), 0.0);
  EXPECT_THAT(doc["sglang_not_written"].get<std::string>(), HasSubstr("every one of the model's 4 layers"));
  EXPECT_TRUE(fs::exists(path("scales") / "kv_scales.safetensors"));
  EXPECT_TRUE(fs::exists(path("scales") / "quantization_config.json"));
  EXPECT_FALSE(fs::exists(path("scales") / "sglang_kv_scales.json"));

  const RunResult again = run({"calibrate", path("cap").string(), "--out", path("scales").string()});
  expect_input_error(again);
  EXPECT_THAT(again.err, HasSubstr("exists; give a new directory"));
  const RunResult unit = run({"calibrate", path("cap").string(), "--k", "fp8", "--out", path("unit").string()});
  expect_input_error(unit);
  EXPECT_THAT(unit.err, HasSubstr("has no static scales to fit"));
  EXPECT_FALSE(fs::exists(path("unit")));
  const RunResult int8 = run({"calibrate", path("cap").string(), "--v", "q8_0", "--out", path("q8").string()});
  expect_input_error(int8);
  EXPECT_THAT(int8.err, HasSubstr("give an fp8 format=e4m3 scheme with scale=calibrated"));
  EXPECT_FALSE(fs::exists(path("q8")));
  const RunResult none = run({"calibrate", path("nope").string(), "--out", path("x").string()});
  expect_input_error(none);
  EXPECT_THAT(none.err, HasSubstr("not a capture directory"));
  // An --out that cannot be made is refused before the fit, with the reason (these were internal
  // errors from std::filesystem, exit 1).
  write_text(path("afile"), "x");
  const RunResult under_file = run({"calibrate", path("cap").string(), "--out", (path("afile") / "s").string()});
  expect_input_error(under_file);
  EXPECT_THAT(under_file.err, HasSubstr("output directory " + path("afile").string() + " is not a directory"));
  const RunResult empty = run({"calibrate", path("cap").string(), "--out", ""});
  EXPECT_EQ(empty.status, 2);
  EXPECT_THAT(empty.err, HasSubstr("--out: an empty value"));
}

// profile: a capture condensed into a profile file a scenario names; a bad request writes nothing.
TEST_F(Cli, ProfileWritesAProfileAScenarioCanUse) {
  testing::write_capture(path("cap"));
  const RunResult r = run({"profile", path("cap").string(), "--out", path("fitted.toml").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  ASSERT_EQ(doc["layers"].size(), 2u);
  EXPECT_EQ(doc["layers"][1]["layer"], 2);
  EXPECT_GT(doc["layers"][0]["key_scale"].get<double>(), 0.0);
  // The profile drives a synthetic workload of another layer count (its overrides mapped by depth).
  write_text(path("use.toml"),
             "[workload]\nprofile = \"fitted.toml\"\ntokens = 128\nhead_dim = 32\nnum_layers = 8\nkv_heads = 2\n"
             "q_per_kv = 2\n[[pairs]]\nk = \"q8_0\"\nv = \"q8_0\"\n");
  const RunResult use = run({"simulate", path("use.toml").string(), "--json"});
  ASSERT_EQ(use.status, 0) << use.err;
  EXPECT_EQ(json::parse(use.out)["profile"], "fitted.toml");

  const RunResult again = run({"profile", path("cap").string(), "--out", path("fitted.toml").string()});
  expect_input_error(again);
  EXPECT_THAT(again.err, HasSubstr("exists; give a new file"));
  const RunResult ext = run({"profile", path("cap").string(), "--out", path("fitted.json").string()});
  expect_input_error(ext);
  EXPECT_THAT(ext.err, HasSubstr("a profile file ends in .toml"));
  const RunResult layer = run({"profile", path("cap").string(), "--layers", "1", "--out", path("l1.toml").string()});
  expect_input_error(layer);
  EXPECT_THAT(layer.err, HasSubstr("layer 1 was not captured"));
  EXPECT_FALSE(fs::exists(path("l1.toml")));
  const RunResult shortp = run({"profile", path("cap").string(), "--tokens", "20", "--out", path("s.toml").string()});
  expect_input_error(shortp);
  EXPECT_THAT(shortp.err, HasSubstr("a profile needs at least 32"));
  const RunResult none = run({"profile", path("nope").string(), "--out", path("n.toml").string()});
  expect_input_error(none);
  EXPECT_THAT(none.err, HasSubstr("not a capture directory"));
}

// recommend --cache: the capture's cases and its model's shape (memory per layer and KV head).
TEST_F(Cli, RecommendOnACaptureUsesItsShape) {
  testing::write_capture(path("cap"));
  const RunResult r = run({"recommend", "--cache", path("cap").string(), "--ctx", "4096", "--gpu-mem", "1GiB",
                           "--weights", "512MiB", "--runtime", "vllm", "--out", path("rec").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json doc = json::parse(r.out);
  EXPECT_EQ(doc["workload"]["model"], "test/stand-in");
  EXPECT_EQ(doc["workload"]["profile"], "cache");
  EXPECT_EQ(doc["workload"]["cases"], 4);   // 2 samples x the first and last captured layer x KV head 0
  EXPECT_EQ(doc["workload"]["tokens"], 64);  // each sample whole: the shortest checks the candidates
  EXPECT_EQ(doc["budget"]["fit"]["ctx"], 4096);
  const RunResult both = run({"recommend", "--cache", path("cap").string(), "--model", "llama-3.1-8b", "--ctx", "64",
                              "--max-rel-err", "0.1"});
  expect_input_error(both);
  EXPECT_THAT(both.err, HasSubstr("give either --model NAME or --cache DIR"));
  const RunResult weights = run({"recommend", "--cache", path("cap").string(), "--ctx", "64", "--gpu-mem", "1GiB"});
  expect_input_error(weights);
  EXPECT_THAT(weights.err, HasSubstr("a capture gives no parameter count; pass --weights SIZE"));
}

// A sweep over a capture with a NaN in a layer is bad input, refused with exit 2 and nothing left
// behind, as simulate refuses it (every point had become an "error" record and the sweep exited 0).
TEST_F(Cli, ASweepOverACaptureWithANanIsRefused) {
  testing::write_capture(path("cap"));
  const fs::path layer = path("cap") / "layer_002.safetensors";
  std::string bytes = read_text(layer);
  uint64_t header = 0;
  std::memcpy(&header, bytes.data(), 8);
  const json tensors = json::parse(bytes.substr(8, header));
  const size_t at = 8 + header + tensors["k"]["data_offsets"][0].get<size_t>() + 2 * 5;  // k's sixth element
  bytes[at] = '\x00';
  bytes[at + 1] = '\x7e';  // f16 NaN
  write_text(layer, bytes);
  write_text(path("nan.toml"), "[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nboth = [\"q8_0\", \"f16\"]\n");
  const RunResult r = run({"sweep", path("nan.toml").string(), "--out", path("nan-out").string()});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("layer_002.safetensors: tensor 'k': non-finite value (NaN)"));
  EXPECT_FALSE(fs::exists(path("nan-out")));
  // With plugin schemes the points run in a child process; the cases are made before it, so the
  // NaN is still the sweep's bad input, not each plugin point's failure.
  write_text(path("nan-plugin.toml"),
             "[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nboth = [\"nf4:group=32\"]\n");
  const RunResult plugin = run({"sweep", path("nan-plugin.toml").string(), "--plugin", KVTUNE_TEST_NF4, "--out",
                                path("nan-plugin-out").string()});
  expect_input_error(plugin);
  EXPECT_THAT(plugin.err, HasSubstr("non-finite value (NaN)"));
  EXPECT_FALSE(fs::exists(path("nan-plugin-out")));
  // The sweep file in its own --out is the user's, not this run's: it stays.
  fs::create_directories(path("own"));
  write_text(path("own") / "sweep.toml", read_text(path("nan.toml")));
  fs::copy(path("cap"), path("own") / "cap", fs::copy_options::recursive);
  const std::string own = read_text(path("own") / "sweep.toml");
  const RunResult in_place = run({"sweep", (path("own") / "sweep.toml").string(), "--out", path("own").string()});
  expect_input_error(in_place);
  EXPECT_EQ(read_text(path("own") / "sweep.toml"), own);
  EXPECT_FALSE(fs::exists(path("own") / "results.jsonl"));
}

TEST_F(Cli, UnknownRopeConventionIsRefusedWithTheChoices) {
  write_text(path("rope.toml"),
             "[workload]\ntokens = 64\nhead_dim = 16\n[workload.rope]\nconvention = \"neox\"\n"
             "[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult r = run({"simulate", path("rope.toml")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("rope.toml").string() + ":5:14:"));
  EXPECT_THAT(r.err, HasSubstr("'convention' must be one of: rotate_half, interleaved"));
}

// A scheme that cannot take the scenario's head_dim is named with the [[pairs]] entry that asks for it.
TEST_F(Cli, AShapeASchemeRefusesNamesItsPair) {
  write_text(path("hd48.toml"), "[workload]\ntokens = 64\nhead_dim = 48\n[[pairs]]\nk = \"f16\"\nv = \"f16\"\n"
                                "[[pairs]]\nk = \"q8_0\"\nv = \"f16\"\n");
  const RunResult r = run({"simulate", path("hd48.toml")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("hd48.toml").string() + ":7:1: 'q8_0': head_dim 48 is not a multiple of the "
                                                             "32-element ggml block"));
}


// ---------------------------------------------------------------------------------------------
// evaluator backends

constexpr const char* kBackendScenario =
    "seeds = 2\n"
    "[workload]\n"
    "tokens = 96\n"
    "head_dim = 64\n"
    "queries = 3\n"
    "[[pairs]]\n"
    "k = \"q8_0\"\n"
    "v = \"int:bits=4,axis=token,group=32,asym,scale=f16\"\n"
    "[[pairs]]\n"
    "k = \"fp8:format=e4m3,scale=dynamic\"\n"
    "v = \"bf16\"\n";

TEST_F(Cli, UnknownBackendIsRefusedWithTheChoices) {
  write_text(path("b.toml"), kBackendScenario);
  const RunResult r = run({"simulate", path("b.toml"), "--backend", "gpu"});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("--backend: unknown backend 'gpu'; expected one of: cpu, cuda, cuda-kernel"));
}

TEST_F(Cli, BackendKeyInAScenarioIsCheckedWithFileLineAndColumn) {
  write_text(path("b.toml"), std::string("backend = \"metal\"\n") + kBackendScenario);
  const RunResult r = run({"simulate", path("b.toml")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("b.toml").string() + ":1:11:"));
  EXPECT_THAT(r.err, HasSubstr("'backend' must be one of: cpu, cuda, cuda-kernel"));
}

// With a GPU (and a CUDA build) the cuda backend's metrics equal the CPU's: the kernels write the
// CPU schemes' bytes. Without one, the command is refused up front, saying why.
TEST_F(Cli, CudaBackendMatchesTheCpuOrSaysWhyItCannotRun) {
  write_text(path("b.toml"), kBackendScenario);
  const RunResult cpu = run({"simulate", path("b.toml"), "--json"});
  ASSERT_EQ(cpu.status, 0) << cpu.err;
  for (const std::string backend : {"cuda", "cuda-kernel"}) {
    SCOPED_TRACE(backend);
    const RunResult gpu = run({"simulate", path("b.toml"), "--json", "--backend", backend});
    if (gpu.status == 2) {
      expect_input_error(gpu);
      EXPECT_THAT(gpu.err, HasSubstr("backend '" + backend + "' needs"));
      EXPECT_TRUE(gpu.err.find("needs a CUDA device: no CUDA device") != std::string::npos ||
                  gpu.err.find("built without it") != std::string::npos)
          << gpu.err;
      continue;
    }
    ASSERT_EQ(gpu.status, 0) << gpu.err;
    const json a = json::parse(cpu.out), b = json::parse(gpu.out);
    EXPECT_EQ(b["backend"], backend);
    ASSERT_EQ(a["rows"].size(), b["rows"].size());
    for (size_t i = 0; i < a["rows"].size(); ++i) {
      for (const char* metric : {"max_logit_err", "attn_kl", "top1_agree"}) {
        EXPECT_EQ(a["rows"][i][metric], b["rows"][i][metric]) << metric;  // same round trips, same bits
      }
      if (backend == "cuda") {
        EXPECT_EQ(a["rows"][i]["rel_out_err"], b["rows"][i]["rel_out_err"]);
      } else {  // the fused kernel (fp32, another summation order) against the float64 product
        EXPECT_LT(b["rows"][i]["kernel_vs_sim"]["max"].get<double>(), 1e-3);
      }
    }
  }
}

// A sweep file's `backend` is resolved before anything is evaluated or written: without a device
// the sweep is refused and leaves no output directory; with one it runs.
TEST_F(Cli, SweepOnTheCudaBackendRunsOrIsRefusedBeforeWriting) {
  write_text(path("s.toml"),
             "backend = \"cuda\"\n"
             "[workload]\ntokens = 64\nhead_dim = 32\n"
             "[search]\nk = [\"q8_0\"]\nv = [\"q8_0\"]\n");
  const RunResult r = run({"sweep", path("s.toml"), "--out", path("out")});
  if (r.status == 2) {
    expect_input_error(r);
    EXPECT_THAT(r.err, HasSubstr("backend 'cuda' needs"));
    EXPECT_FALSE(fs::exists(path("out")));
  } else {
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_TRUE(fs::exists(path("out") / "results.jsonl"));
  }
}

// ---------------------------------------------------------------------------------------------
// quantize

constexpr int kGgmlTokens = 256, kGgmlDim = 128;
constexpr size_t kInt4CodeBytes = kGgmlTokens * kGgmlDim * 4 / 8;  // two 4-bit codes per byte
constexpr size_t kPerTokenScaleBytes = kGgmlTokens * 4;            // one f32 scale per token, stored first

TEST_F(Cli, QuantizeInt4PerTokenWritesTheFootprintAndARoundTrip) {
  const RunResult r = run({"quantize", "--scheme", "int:bits=4,axis=token", "--in", test_data("ggml/input.npy"),
                           "--out", path("out.npy"), "--packed-out", path("out.bin")});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("256 x 128, 17408 bytes packed"));

  const std::vector<unsigned char> packed = read_bytes(path("out.bin"));
  EXPECT_EQ(packed.size(), kInt4CodeBytes + kPerTokenScaleBytes);

  const Float32Npy input = read_float32_npy(test_data("ggml/input.npy"));
  const Float32Npy output = read_float32_npy(path("out.npy"));
  EXPECT_THAT(output.header, HasSubstr("'fortran_order': False"));
  EXPECT_THAT(output.header, HasSubstr("'shape': (256, 128)"));
  ASSERT_EQ(output.values.size(), size_t(kGgmlTokens) * kGgmlDim);
  ASSERT_EQ(input.values.size(), output.values.size());
  ASSERT_GE(packed.size(), kPerTokenScaleBytes);

  // Symmetric absmax: scale = max|x| / 7 per token, and rounding is off by at most half a step.
  for (int t = 0; t < kGgmlTokens; ++t) {
    float scale;
    std::memcpy(&scale, packed.data() + 4 * t, 4);
    float amax = 0.0f;
    for (int c = 0; c < kGgmlDim; ++c) amax = std::max(amax, std::abs(input.values[t * kGgmlDim + c]));
    ASSERT_NEAR(scale, amax / 7.0f, 1e-6 * amax) << "token " << t;
    for (int c = 0; c < kGgmlDim; ++c) {
      const size_t i = size_t(t) * kGgmlDim + c;
      ASSERT_LE(std::abs(output.values[i] - input.values[i]), 0.5f * scale * (1 + 1e-5f))
          << "[" << t << ", " << c << "]";
    }
  }
}

TEST_F(Cli, QuantizingARoundTripAgainGivesTheSameCodes) {
  const std::string scheme = "int:bits=4,axis=token";
  const RunResult first = run({"quantize", "--scheme", scheme, "--in", test_data("ggml/input.npy"), "--out",
                               path("once.npy"), "--packed-out", path("once.bin")});
  ASSERT_EQ(first.status, 0) << first.err;
  const RunResult second = run({"quantize", "--scheme", scheme, "--in", path("once.npy"), "--out", path("twice.npy"),
                                "--packed-out", path("twice.bin")});
  ASSERT_EQ(second.status, 0) << second.err;

  const std::vector<unsigned char> once = read_bytes(path("once.bin")), twice = read_bytes(path("twice.bin"));
  ASSERT_EQ(once.size(), kInt4CodeBytes + kPerTokenScaleBytes);
  ASSERT_EQ(twice.size(), once.size());
  // The codes follow the scales; a scale may differ in its last bit (7s / 7 need not be s exactly).
  EXPECT_TRUE(std::equal(once.end() - kInt4CodeBytes, once.end(), twice.end() - kInt4CodeBytes))
      << "the code bytes changed on the second pass";
  for (int t = 0; t < kGgmlTokens; ++t) {
    float s1, s2;
    std::memcpy(&s1, once.data() + 4 * t, 4);
    std::memcpy(&s2, twice.data() + 4 * t, 4);
    EXPECT_NEAR(s2, s1, 1e-6f * s1) << "token " << t;
  }
}

// ---------------------------------------------------------------------------------------------
// schemes

TEST_F(Cli, SchemesJsonListsTheFamiliesAndTheIntDomains) {
  const RunResult r = run({"schemes", "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json families = json::parse(r.out)["families"];
  std::set<std::string> names;
  const json* int_family = nullptr;
  for (const json& f : families) {
    names.insert(f["name"].get<std::string>());
    if (f["name"] == "int") int_family = &f;
  }
  for (const char* family : {"int", "none", "f32", "f16", "bf16"}) EXPECT_TRUE(names.count(family)) << family;
  ASSERT_NE(int_family, nullptr);

  std::set<std::string> params;
  for (const json& p : (*int_family)["params"]) {
    const std::string name = p["name"].get<std::string>();
    params.insert(name);
    if (name == "bits") {
      EXPECT_EQ(p["kind"], "integer");
      EXPECT_EQ(p["min"], 2);
      EXPECT_EQ(p["max"], 8);
    }
    if (name == "axis") {
      EXPECT_EQ(p["kind"], "choice");
      EXPECT_EQ(p["choices"], (json{"tensor", "channel", "token"}));
    }
  }
  EXPECT_EQ(params, (std::set<std::string>{"bits", "axis", "group", "asym", "scale"}));
}

// ---------------------------------------------------------------------------------------------
// Bad input: exit status 2 and a message naming the problem.

// Tensors and a capture are two sources of cases: giving both is refused (--cache was ignored).
TEST_F(Cli, TensorsAndACaptureTogetherAreRefused) {
  write_small_tensors();
  testing::write_capture(path("cap"));
  const RunResult r = run({"simulate", "--k", path("K.npy"), "--v", path("V.npy"), "--q", path("q.npy"), "--cache",
                           path("cap"), "--pair", "f16/f16"});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("give either --cache or --k/--v/--q tensors, not both"));
}

TEST_F(Cli, SmallTensorsUsedByTheBadInputTestsAreValidAsWritten) {
  write_small_tensors();  // the control: each bad-input test below changes exactly one thing
  const RunResult r = simulate_small("int:bits=8,axis=channel/int:bits=8,axis=token");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("tokens 8  head_dim 16"));
}

TEST_F(Cli, MalformedTomlNamesFileLineAndColumn) {
  const std::string file = path("bad.toml");
  write_text(file, "name = \"bad\"\n[workload]\ntokens = = 3\n");
  const RunResult r = run({"simulate", file});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(file + ":3:"));
}

TEST_F(Cli, UnknownWorkloadKeyIsNamedWithTheValidKeys) {
  const std::string file = path("typo.toml");
  write_text(file,
             "seeds = 2\n[workload]\ntokens = 64\nhead_dim = 16\ntokenz = 3\n[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult r = run({"simulate", file});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(file + ":5:1:"));
  EXPECT_THAT(r.err, HasSubstr("unknown key 'tokenz' in [workload]"));
  EXPECT_THAT(r.err, HasSubstr("valid keys are:"));
  EXPECT_THAT(r.err, HasSubstr("head_dim"));
  EXPECT_THAT(r.err, HasSubstr("tokens"));
}

TEST_F(Cli, UnknownSchemeFamilyListsTheValidOnes) {
  write_small_tensors();
  const RunResult r = simulate_small("nf3/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("unknown scheme 'nf3'"));
  for (const char* family : {"int", "bf16", "f16", "f32", "none"}) EXPECT_THAT(r.err, HasSubstr(family));
}

TEST_F(Cli, UnknownSchemeParameterListsTheValidOnes) {
  write_small_tensors();
  const RunResult r = simulate_small("int:bits=8,foo=1/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("unknown parameter 'foo'"));
  EXPECT_THAT(r.err, HasSubstr("bits"));
  EXPECT_THAT(r.err, HasSubstr("axis"));
}

TEST_F(Cli, OutOfRangeSchemeValueNamesTheParameterAndItsDomain) {
  write_small_tensors();
  const RunResult r = simulate_small("int:bits=9/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("'bits' = '9'"));
  EXPECT_THAT(r.err, HasSubstr("2..8"));
}

TEST_F(Cli, NpyWithIntegerDtypeIsRefused) {
  write_small_tensors();
  write_text(path("K.npy"), npy_bytes("<i4", "(8, 16)", raw_bytes(std::vector<int32_t>(8 * 16, 1))));
  const RunResult r = simulate_small("none/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("K.npy").string()));
  EXPECT_THAT(r.err, HasSubstr("dtype"));
  EXPECT_THAT(r.err, HasSubstr("<i4"));
}

TEST_F(Cli, NpyOfRankThreeIsRefused) {
  write_small_tensors();
  write_text(path("V.npy"), npy_bytes("<f4", "(2, 8, 16)", raw_bytes(std::vector<float>(2 * 8 * 16, 0.5f))));
  const RunResult r = simulate_small("none/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("V.npy").string()));
  EXPECT_THAT(r.err, HasSubstr("rank 3"));
}

TEST_F(Cli, MismatchedKeyAndValueShapesAreBothNamed) {
  write_small_tensors();
  write_float32_matrix(path("V.npy"), 4, 16);
  const RunResult r = simulate_small("none/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("[4, 16]"));  // values
  EXPECT_THAT(r.err, HasSubstr("[8, 16]"));  // keys
}

TEST_F(Cli, TruncatedNpyDataIsRefused) {
  write_small_tensors();
  write_text(path("q.npy"), npy_bytes("<f4", "(16,)", raw_bytes(std::vector<float>(10, 1.0f))));
  const RunResult r = simulate_small("none/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("q.npy").string()));
  EXPECT_THAT(r.err, HasSubstr("truncated"));
}

TEST_F(Cli, NanInNpyDataIsNamedWithItsIndex) {
  write_small_tensors();
  std::vector<float> keys(8 * 16, 0.25f);
  keys[2 * 16 + 5] = std::nanf("");
  write_text(path("K.npy"), npy_bytes("<f4", "(8, 16)", raw_bytes(keys)));
  const RunResult r = simulate_small("none/none");
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("K.npy").string()));
  EXPECT_THAT(r.err, HasSubstr("NaN"));
  EXPECT_THAT(r.err, HasSubstr("[2, 5]"));
}

// A scheme built for one role (kvquant role=v) takes it without --role, and refuses --role for the
// other instead of quietly quantizing as its own.
TEST_F(Cli, QuantizeTakesTheRoleItsSchemeIsBuiltFor) {
  const RunResult own = run({"quantize", "--scheme", "kvquant:role=v", "--in", test_data("ggml/input.npy"), "--out",
                             path("v.npy")});
  EXPECT_EQ(own.status, 0) << own.err;
  const RunResult other = run({"quantize", "--scheme", "kvquant:role=v", "--role", "k", "--in",
                               test_data("ggml/input.npy"), "--out", path("k.npy")});
  expect_input_error(other);
  EXPECT_THAT(other.err, HasSubstr("--role k: 'kvquant:bits=3,role=v,outliers=1' is built for values (role=v) and "
                                   "cannot store keys"));
  EXPECT_FALSE(fs::exists(path("k.npy")));
}

TEST_F(Cli, QuantizeIntoAMissingDirectoryWritesNothing) {
  const fs::path missing = path("no-such-dir") / "out.npy";
  const RunResult r =
      run({"quantize", "--scheme", "int:bits=8", "--in", test_data("ggml/input.npy"), "--out", missing});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(missing.string()));
  EXPECT_THAT(r.err, HasSubstr("does not exist"));
  EXPECT_FALSE(fs::exists(missing.parent_path()));

  // A bad --packed-out is refused before the (valid) --out is written, so nothing is half-done.
  const RunResult packed = run({"quantize", "--scheme", "int:bits=8", "--in", test_data("ggml/input.npy"), "--out",
                                path("out.npy"), "--packed-out", path("no-such-dir") / "out.bin"});
  expect_input_error(packed);
  EXPECT_FALSE(fs::exists(path("out.npy")));
  EXPECT_FALSE(fs::exists(path("no-such-dir")));
}

// An output that names an input (or the other output) is refused before anything is written; a
// --packed-out that fails while written leaves no --out behind.
TEST_F(Cli, QuantizeRefusesOutputsThatReplaceItsInput) {
  write_small_tensors();
  const std::string before = read_text(path("K.npy"));
  const RunResult over = run({"quantize", "--scheme", "int:bits=8", "--in", path("K.npy"), "--out", path(".") / "K.npy"});
  expect_input_error(over);
  EXPECT_THAT(over.err, HasSubstr("is also an input"));
  const RunResult packed_over =
      run({"quantize", "--scheme", "int:bits=8", "--in", path("K.npy"), "--out", path("o.npy"), "--packed-out", path("K.npy")});
  expect_input_error(packed_over);
  EXPECT_EQ(read_text(path("K.npy")), before);
  const RunResult twice =
      run({"quantize", "--scheme", "int:bits=8", "--in", path("K.npy"), "--out", path("o.npy"), "--packed-out", path("o.npy")});
  expect_input_error(twice);
  EXPECT_THAT(twice.err, HasSubstr("name the same file"));
  EXPECT_FALSE(fs::exists(path("o.npy")));
  const RunResult full =  // Linux's always-full device
      run({"quantize", "--scheme", "int:bits=8", "--in", path("K.npy"), "--out", path("o.npy"), "--packed-out", "/dev/full"});
  expect_input_error(full);
  EXPECT_THAT(full.err, HasSubstr("No space left on device"));
  EXPECT_FALSE(fs::exists(path("o.npy")));
}

TEST_F(Cli, GroupThatDoesNotDivideHeadDimIsRefused) {
  const RunResult r = run({"quantize", "--scheme", "int:bits=4,axis=token,group=48", "--in",
                           test_data("ggml/input.npy"), "--out", path("out.npy")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr("group=48"));
  EXPECT_THAT(r.err, HasSubstr("head_dim 128"));
  EXPECT_FALSE(fs::exists(path("out.npy")));
}

// ---------------------------------------------------------------------------------------------
// Command-line syntax

TEST_F(Cli, UnknownFlagExitsWithStatus2) {
  const RunResult sub = run({"simulate", "--bogus"});
  EXPECT_EQ(sub.status, 2);
  EXPECT_EQ(sub.out, "");
  EXPECT_THAT(sub.err, HasSubstr("--bogus"));

  const RunResult top = run({"--bogus"});
  EXPECT_EQ(top.status, 2);
  EXPECT_EQ(top.out, "");
  EXPECT_THAT(top.err, Not(HasSubstr("internal error")));
}

// An empty value is refused, not read as "not given" (`sweep ""` ran the default sweep), and a
// floating-point option refuses NaN and infinities (NaN passed every range check).
TEST_F(Cli, EmptyAndNonFiniteOptionValuesAreRefused) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"sweep", "", "--out", path("e1").string()}, "file: an empty value"},
      {{"simulate", ""}, "file: an empty value"},
      {{"sweep", "--shard", "", "--out", path("e2").string()}, "--shard: an empty value"},
      {{"memory", "--model", "llama-3.2-1b", "--ctx", "64", "--k", "f16", "--v", "f16", "--gpu-mem", ""},
       "--gpu-mem: an empty value"},
      {{"recommend", "--model", "llama-3.2-1b", "--ctx", "64", "--max-rel-err", "0.1", "--confidence", ""},
       "--confidence: an empty value"},
      {{"profile", path("cap").string(), "--out", path("p.toml").string(), "--outlier-threshold", "nan"},
       "--outlier-threshold: 'nan' is not a finite number"},
      {{"check-plugin", "x.so", "--timeout", "inf"}, "--timeout: 'inf' is not a finite number > 0"},
      {{"simulate", "--topk", "0"}, "--topk: '0' is not a finite number > 0"}};
  for (const auto& [args, message] : cases) {
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << message;
    EXPECT_EQ(r.out, "") << message;
    EXPECT_THAT(r.err, HasSubstr(message));
  }
  for (const char* dir : {"e1", "e2", "p.toml"}) EXPECT_FALSE(fs::exists(path(dir))) << dir;
}

}  // namespace
}  // namespace kvtune::e2e
