// Issue #15: kvtune's predictions against what real models did when their K and V caches were
// quantized. The published tables are tests/data/real/*.csv (copied unchanged from
// shared/reference/real-models; tests/data/real/README.md names each source), read here at run
// time. Every K/V pair of a table is simulated on the model's preset (its shape, configs/models)
// with its family's profile (its key/value statistics, configs/profiles), with llama.cpp's cache
// types as kvtune specs, and compared by ordering and ratio only: the tables measure the model's
// output distribution (KLD, PPL), kvtune one attention head at a time (the damage metric below
// says which kvtune figure stands for which). docs/fidelity.md puts both side by side.
//
// What is asserted holds at the fixed seeds below, each with its band:
//   - the ranking of the 8 quantized pairs of LLaMA-3-8B (PR 7412): Spearman rho >= 0.9;
//   - keys more sensitive than values, as published, on every table with a K-only and a V-only
//     row (or, KVSplit, the swapped K4V8 / K8V4 pair): ratio > 1;
//   - the Hadamard rotation's gain on q4_0 within x2 of the published one (log scale) on the two
//     models that published it: Qwen3-30B-A3B's keys (ik_llama.cpp PR 1034) and llama2 7B's keys
//     and values (llama.cpp PR 21551);
//   - q8_0 near lossless with and without rotation on both;
//   - the same recipe much worse on Qwen3-0.6B than on Qwen3-8B (ik_llama.cpp issue 1509): >= x3.
// What does not hold is measured and printed, never asserted: the sizes of the K/V ratios (kvtune
// overstates them), the q5_0 and q8_0 rotation gains (kvtune's gain hardly depends on the bit
// width, the models' does), and the full x117 of issue 1509. Each figure is printed as a
// "fidelity:" line and kept as a test property (--gtest_output=xml), so the gap stays visible.
//
// The profiles' massive key values were fitted to the two q4_0 rotation rows (configs/profiles
// says so in each file); everything else asserted here is a check they were not fitted on. The
// stand-in preset that is not the model's own: TinyLlama 1.1B (KVSplit) runs on llama-3.2-1b, the
// only preset with TinyLlama's 64-channel heads (TinyLlama: 4 KV heads, RoPE base 10000).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "kvtune/evaluator.h"
#include "kvtune/model_preset.h"
#include "kvtune/runtime_table.h"
#include "kvtune/scenario.h"
#include "rank_correlation.h"
#include "test_support.h"

namespace kvtune {
namespace {

// ---- The published tables ---------------------------------------------------------------------

// One row of a table: `source,model,context,weights_quant,k_type,v_type,rotation,metric,value,stderr`.
struct Published {
  std::string source, model, weights, k, v, rotation, metric;
  double value = 0.0;  // "11.30%" reads 11.30, "+0.86%" 0.86, "13.374 (truncated in excerpt)" 13.374
};

// RFC 4180 fields: quoted when they hold a comma, quotes doubled inside.
std::vector<std::vector<std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = any = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      if (any || !field.empty()) {
        row.push_back(field);
        rows.push_back(row);
      }
      row.clear();
      field.clear();
      any = false;
    } else {
      field += c;
      any = true;
    }
  }
  if (any || !field.empty()) {
    row.push_back(field);
    rows.push_back(row);
  }
  return rows;
}

const std::vector<std::string> kColumns = {"source", "model",    "context", "weights_quant", "k_type",
                                           "v_type", "rotation", "metric",  "value",         "stderr"};

std::vector<Published> read_table(const std::string& file) {
  const std::string path = testing::data_path("real/" + file);
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream text;
  text << in.rdbuf();
  const std::vector<std::vector<std::string>> rows = parse_csv(text.str());
  EXPECT_FALSE(rows.empty()) << path;
  if (rows.empty()) return {};
  EXPECT_EQ(rows[0], kColumns) << path;
  std::vector<Published> out;
  for (size_t i = 1; i < rows.size(); ++i) {
    std::vector<std::string> r = rows[i];
    // llama3-8b_pr7412.csv's model cell, "LLaMA 3 8B (model named by its f16 PPL, which matches PR
    // 6936)", holds a comma without quotes (the copy is kept unchanged), so its rows have 11 fields.
    // The cells after `context` never hold one: a longer row is read from both ends, its extra
    // fields joined back into `model` and `context` (only their start is matched below).
    EXPECT_GE(r.size(), kColumns.size()) << path << " row " << i;
    if (r.size() < kColumns.size()) continue;
    while (r.size() > kColumns.size()) {
      r[1] += "," + r[2];
      r.erase(r.begin() + 2);
    }
    Published p{r[0], r[1], r[3], r[4], r[5], r[6], r[7]};
    std::string value = r[8];
    value.erase(std::remove(value.begin(), value.end(), '+'), value.end());
    p.value = std::strtod(value.c_str(), nullptr);  // stops at '%' or at " (truncated ..."
    out.push_back(p);
  }
  return out;
}

// The one row of `table` with these fields; fails the test when there is not exactly one.
double published(const std::vector<Published>& table, const std::string& metric, const std::string& k,
                 const std::string& v, const std::string& rotation, const std::string& weights = "",
                 const std::string& model = "") {
  std::vector<double> found;
  for (const Published& p : table) {
    if (p.metric == metric && p.k == k && p.v == v && p.rotation == rotation &&
        (weights.empty() || p.weights == weights) && (model.empty() || p.model.rfind(model, 0) == 0)) {
      found.push_back(p.value);
    }
  }
  EXPECT_EQ(found.size(), 1u) << metric << " " << k << "/" << v << " " << rotation << " " << weights << " " << model;
  return found.empty() ? std::nan("") : found[0];
}

// ---- kvtune's predictions ---------------------------------------------------------------------

// llama.cpp's cache types as kvtune specs, rotated by llama.cpp's Hadamard transform when `rotated`
// (kvtune's default rotation group is llama.cpp's: 128 channels for K, 64 for V at head_dim 128).
// q6_0 (an ik_llama.cpp type) and q1_0 (a type of PR 21551) have no kvtune scheme: their rows are
// skipped. f16 is never rotated (llama.cpp rotates only quantized caches).
std::optional<std::string> kv_spec(const std::string& type, bool rotated) {
  static const std::vector<std::string> known = {"f16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "iq4_nl"};
  if (std::find(known.begin(), known.end(), type) == known.end()) return std::nullopt;
  if (!rotated || type == "f16") return type;
  return type + ":rotation=hadamard";
}

struct Pair {
  std::string k, v;  // kvtune specs
};

// What kvtune predicts for one pair, over every query row of every case.
struct Prediction {
  // The damage metric that stands for KLD and ΔPPL: the mean over query rows of rel_out_err², minus
  // the same for f16/f16 (kvtune's noise floor: f16 rounding against the float64 reference).
  //
  // Why this one: a model's output KLD against the f16-cache run is, to second order, a quadratic
  // form in the perturbation of its hidden states, and an attention head perturbs them by exactly
  // its output error o - o_ref (carried by the residual stream to the logits). So KLD grows as
  // E||o - o_ref||², which is rel_out_err² with each head's ||o_ref|| as the unit. ΔPPL / PPL is
  // about the same quantity: Δ ln PPL = E_y[ln p_ref(y) - ln p(y)], which is KL(p_ref || p) when the
  // text follows the model. attn_kl (the KL of the attention weights) would be the other choice, but
  // it depends on K alone (0 for every V-only pair), so it cannot rank the V rows; it is printed as
  // a second opinion for the K-only rows. Mean rel_out_err (what `kvtune simulate` prints) is the
  // square root's scale: its ratios are about the square roots of these.
  double damage = 0.0;
  double attn_kl = 0.0;      // mean, minus f16/f16's
  double rel_out_err = 0.0;  // mean
};

// 8 seeds x 3 layers x 2 KV heads = 48 cases per table, 4 query rows per query head. Every band
// was checked on the seed blocks starting at 8, 16, 100, 200 and 300 too (kSeedStart); the
// figures quoted in the comments are block 0's, with the other blocks' range where it matters.
constexpr int kSeeds = 8;
constexpr int kSeedStart = 0;

// Where a table's model is simulated: its preset (the shape), its profile (the key/value
// statistics, configs/profiles), the first, middle and last layer and two KV heads.
struct Model {
  std::string preset, profile, layers, heads;
};
const Model kLlama3 = {"llama-3.1-8b", "llama", "[0, 15, 31]", "[0, 4]"};
const Model kLlama2 = {"llama-2-7b", "llama", "[0, 15, 31]", "[0, 16]"};
const Model kTinyLlama = {"llama-3.2-1b", "llama", "[0, 7, 15]", "[0, 4]"};
const Model kQwen3Moe = {"qwen3-30b-a3b", "qwen3", "[0, 24, 47]", "[0, 2]"};
const Model kQwen3Dense = {"qwen3-8b", "qwen3", "[0, 17, 35]", "[0, 4]"};
const Model kQwen3Small = {"qwen3-0.6b", "qwen3-0.6b", "[0, 14, 27]", "[0, 4]"};

const std::filesystem::path kConfigs = testing::config_dir();
ModelPreset preset(const std::string& name) { return find_model_preset(kConfigs, name); }
std::filesystem::path profile(const std::string& name) { return find_model_profile(kConfigs, name); }

// The channel order llama.cpp stores the preset's keys in: its table's [[key_layout]] for the
// preset's architecture (a Llama model's RoPE pairs adjacent, a Qwen model's as computed), or "".
std::string llama_cpp_key_order(const std::string& preset_name) {
  static const RuntimeView view = runtime_options(
      load_runtime_table(kConfigs / "runtimes" / "llama-cpp.toml", builtin_registry()), "latest");
  const RuntimeOption* layout = key_layout_for(view, preset(preset_name).architecture);
  return layout == nullptr ? "" : layout->key_layout->pair_order;
}

// The scenario file that `kvtune simulate` would run for these pairs (docs/fidelity.md shows one).
// T = 512: the published runs are llama-perplexity's 512-token chunks. The keys are in the
// checkpoint's order, the one the profiles were fitted in (docs/fidelity.md, "The cache layout
// llama.cpp stores").
std::string scenario_text(const Model& m, const std::vector<Pair>& pairs) {
  std::string text = "name = \"fidelity: " + m.preset + "\"\n";
  text += "seeds = " + std::to_string(kSeeds) + "\nseed_start = " + std::to_string(kSeedStart) + "\n";
  text += "[workload]\nmodel = \"" + m.preset + "\"\nprofile = \"" + m.profile + "\"\ntokens = 512\nlayers = " +
          m.layers + "\nheads = " + m.heads + "\nqueries = 4\n";
  for (const Pair& p : pairs) text += "[[pairs]]\nk = \"" + p.k + "\"\nv = \"" + p.v + "\"\n";
  return text;
}

double mean_square(const std::vector<double>& x) {
  double s = 0.0;
  for (double e : x) s += e * e;
  return s / double(x.size());
}

// Runs f16/f16 and `pairs` on `model`; one Prediction per pair of `pairs`.
std::vector<Prediction> predict(const Model& model, const std::vector<Pair>& pairs) {
  std::vector<Pair> all = {{"f16", "f16"}};
  all.insert(all.end(), pairs.begin(), pairs.end());
  const Scenario sc = parse_scenario(scenario_text(model, all), "fidelity:" + model.preset, preset, profile);
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);
  const PairResult& floor = r.pairs.at(0);
  const double floor_damage = mean_square(floor.samples[size_t(Metric::rel_out_err)]);
  const double floor_kl = floor.summary(Metric::attn_kl).mean;
  std::vector<Prediction> out;
  for (size_t i = 1; i < r.pairs.size(); ++i) {
    const PairResult& p = r.pairs[i];
    out.push_back({mean_square(p.samples[size_t(Metric::rel_out_err)]) - floor_damage,
                   p.summary(Metric::attn_kl).mean - floor_kl, p.summary(Metric::rel_out_err).mean});
  }
  return out;
}

// A printed line and a test property, so the figure is seen whether the test passes or not.
void report(const std::string& key, double value, const std::string& what) {
  char text[32];
  std::snprintf(text, sizeof text, "%.6g", value);
  ::testing::Test::RecordProperty(key, text);
  std::printf("fidelity: %-40s %12.5g  %s\n", key.c_str(), value, what.c_str());
}

// Every row of the copies read, each with its source (tests/data/real/README.md).
TEST(Fidelity, TablesAreReadWithTheirSources) {
  const std::vector<std::pair<std::string, size_t>> files = {{"llama3-8b_pr7412.csv", 49},
                                                             {"qwen3-30b-a3b_k-hadamard.csv", 18},
                                                             {"llama2-7b_pr21551.csv", 6},
                                                             {"qwen3-0.6b-8b_q4_0-hadamard.csv", 4},
                                                             {"tinyllama_kvsplit.csv", 4}};
  for (const auto& [file, rows] : files) {
    const std::vector<Published> table = read_table(file);
    EXPECT_EQ(table.size(), rows) << file;
    for (const Published& p : table) {
      EXPECT_FALSE(p.source.empty()) << file;
      EXPECT_TRUE(std::isfinite(p.value)) << file << " " << p.metric;
    }
  }
}

// ---- LLaMA 3 8B, llama.cpp PR 7412: KLD per K/V type, f16 weights, no rotation ----------------

// The table's 8 quantized pairs with their published KLD minus the f16/f16 noise floor (0.000189),
// and kvtune's predictions on llama-3.1-8b: computed once per process, shared by the tests below.
struct Llama3 {
  std::vector<Pair> pairs;
  std::vector<double> kld;
  std::vector<Prediction> pred;

  size_t index(const std::string& k, const std::string& v) const {
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (pairs[i].k == k && pairs[i].v == v) return i;
    }
    ADD_FAILURE() << "no pair " << k << "/" << v;
    return 0;
  }
};

const Llama3& llama3() {
  static const Llama3 t = [] {
    Llama3 out;
    const std::vector<Published> table = read_table("llama3-8b_pr7412.csv");
    const double noise = published(table, "KLD_mean", "f16", "f16", "none", "f16");
    for (const Published& p : table) {
      if (p.metric != "KLD_mean" || p.weights != "f16" || (p.k == "f16" && p.v == "f16")) continue;
      out.pairs.push_back({*kv_spec(p.k, false), *kv_spec(p.v, false)});
      out.kld.push_back(p.value - noise);
    }
    out.pred = predict(kLlama3, out.pairs);
    return out;
  }();
  return t;
}

TEST(Fidelity, Llama3PairsRankAsPublished) {
  const Llama3& t = llama3();
  // f16/q8_0, q8_0/f16, q8_0/q8_0, f16/q5_1, f16/q4_0, q8_0/q4_0, q4_0/f16, q4_0/q4_0
  ASSERT_EQ(t.pairs.size(), 8u);
  std::vector<double> damage;
  for (size_t i = 0; i < t.pairs.size(); ++i) {
    damage.push_back(t.pred[i].damage);
    std::printf(
        "fidelity: PR7412 %-5s/%-5s published KLD-floor %.6f  kvtune damage %.4g  rel_out_err %.4g  attn_kl %.4g\n",
        t.pairs[i].k.c_str(), t.pairs[i].v.c_str(), t.kld[i], t.pred[i].damage, t.pred[i].rel_out_err,
        t.pred[i].attn_kl);
  }
  const double rho = testing::spearman(damage, t.kld);
  report("pr7412_spearman", rho, "Spearman rho, kvtune damage vs published KLD - floor, 8 pairs (band: >= 0.9)");
  EXPECT_GE(rho, 0.9);
}

// ---- Keys against values ----------------------------------------------------------------------

// K-only over V-only damage at one type, published (KLD - floor) and predicted. Band: > 1, the
// published direction; the size is printed (PR 7412: x1.36 at q8_0, x6.8 at q4_0).
TEST(Fidelity, KeysAreMoreSensitiveThanValuesOnLlama3) {
  const Llama3& t = llama3();
  for (const std::string type : {"q8_0", "q4_0"}) {
    const size_t k_only = t.index(type, "f16"), v_only = t.index("f16", type);
    const double pub = t.kld[k_only] / t.kld[v_only];
    const double ours = t.pred[k_only].damage / t.pred[v_only].damage;
    report("pr7412_k_over_v_" + type + "_published", pub, "KLD-floor of " + type + "/f16 over f16/" + type);
    report("pr7412_k_over_v_" + type + "_kvtune", ours, "kvtune damage, same ratio (band: > 1)");
    ASSERT_GT(pub, 1.0);
    EXPECT_GT(ours, 1.0) << type;
  }
}

// KVSplit (TinyLlama, llama-3.2-1b): K4V8 against K8V4, the same bits split the two ways. Band: > 1.
TEST(Fidelity, KeysAreMoreSensitiveThanValuesOnTinyLlama) {
  const std::vector<Published> table = read_table("tinyllama_kvsplit.csv");
  std::vector<Pair> pairs;
  std::vector<double> change;
  for (const Published& p : table) {
    pairs.push_back({*kv_spec(p.k, false), *kv_spec(p.v, false)});
    change.push_back(p.value);  // PPL change against fp16, %
  }
  ASSERT_EQ(pairs.size(), 4u);  // q8_0/q8_0, q8_0/q4_0, q4_0/q8_0, q4_0/q4_0
  const std::vector<Prediction> pred = predict(kTinyLlama, pairs);
  std::vector<double> damage;
  for (size_t i = 0; i < pairs.size(); ++i) {
    damage.push_back(pred[i].damage);
    std::printf("fidelity: KVSplit %-5s/%-5s published PPL change %+.2f %%  kvtune damage %.4g  rel_out_err %.4g\n",
                pairs[i].k.c_str(), pairs[i].v.c_str(), change[i], pred[i].damage, pred[i].rel_out_err);
  }
  report("kvsplit_spearman", testing::spearman(damage, change),
         "Spearman rho over the 4 pairs (not asserted: direction-only data)");
  const double pub = published(table, "PPL_change_vs_fp16", "q4_0", "q8_0", "none") /
                     published(table, "PPL_change_vs_fp16", "q8_0", "q4_0", "none");
  auto at = [&](const std::string& k, const std::string& v) {
    for (size_t i = 0; i < pairs.size(); ++i) {
      if (pairs[i].k == k && pairs[i].v == v) return pred[i].damage;
    }
    ADD_FAILURE() << "no pair " << k << "/" << v;
    return std::nan("");
  };
  const double ours = at("q4_0", "q8_0") / at("q8_0", "q4_0");
  report("kvsplit_k4v8_over_k8v4_published", pub, "PPL change of K4V8 over K8V4");
  report("kvsplit_k4v8_over_k8v4_kvtune", ours, "kvtune damage, same ratio (band: > 1)");
  ASSERT_GT(pub, 1.0);
  EXPECT_GT(ours, 1.0);
}

// ---- The Hadamard rotation --------------------------------------------------------------------

// A rotation's gain: damage unrotated over damage rotated, published (ΔPPL) and predicted.
struct Gain {
  double published = 0.0, kvtune = 0.0, kvtune_attn_kl = 0.0;
};

void report_gain(const std::string& key, const Gain& g) {
  report(key + "_published", g.published, "published ΔPPL unrotated / rotated");
  report(key + "_kvtune", g.kvtune, "kvtune damage unrotated / rotated");
  report(key + "_kvtune_attn_kl", g.kvtune_attn_kl, "kvtune attn_kl (K alone) unrotated / rotated");
  // The criterion, measured only: |log(kvtune / published)| <= log 2.
  report(key + "_log2_gap", std::log2(g.kvtune / g.published), "log2(kvtune / published); the issue wants |.| <= 1");
}

// The criterion for a rotation gain: within x2 of the published one on the log scale.
void expect_within_x2(const Gain& g) {
  EXPECT_LE(std::abs(std::log2(g.kvtune / g.published)), 1.0) << "kvtune x" << g.kvtune << ", published x" << g.published;
}

// Qwen3-30B-A3B (ik_llama.cpp PR 1034; the qwen3-30b-a3b preset with the qwen3 profile): K of each
// type with V = f16, K unrotated and Hadamard-rotated (khad). q6_0 has no kvtune scheme and is
// skipped. Published ΔPPL gains: q4_0 x12.3 (+11.30 % -> +0.92 %), q5_0 x3.0, q8_0 x0.60 (+0.04 %
// -> +0.07 %: both inside the measurement's noise).
//
// Asserted: the q4_0 gain within x2 (kvtune x8.4 at these seeds, x7.5 to x9.7 over the other seed
// blocks; the profile's massive key value was fitted to this row, see configs/profiles/qwen3.toml),
// and q8_0 near lossless with and without rotation (below 2 % of the unrotated q4_0 damage; the
// published share is 0.4 % and 0.6 %). Measured only: the q5_0 gain, which kvtune puts near its
// q4_0 gain (every bit width is in the quadratic regime of one head, so a rotation divides the
// error by about the same factor) where the model shows x3.
TEST(Fidelity, RotationGainOfLowBitKeysOnQwen3MoeIsThePublishedOne) {
  const std::vector<Published> table = read_table("qwen3-30b-a3b_k-hadamard.csv");
  // The file's last row is Ling-Mini-2.0's f16 PPL, another model of the same PR.
  const double base = published(table, "PPL", "f16", "f16", "n/a", "", "Qwen3-30B-A3B");
  std::vector<std::string> types;
  for (const Published& p : table) {
    if (p.metric != "PPL" || p.k == "f16" || p.rotation != "none") continue;
    if (!kv_spec(p.k, false)) continue;  // q6_0: no kvtune scheme
    types.push_back(p.k);
  }
  ASSERT_EQ(types, (std::vector<std::string>{"q8_0", "q5_0", "q4_0"}));
  std::vector<Pair> pairs;
  for (const std::string& type : types) {
    pairs.push_back({*kv_spec(type, false), "f16"});
    pairs.push_back({*kv_spec(type, true), "f16"});
  }
  const std::vector<Prediction> pred = predict(kQwen3Moe, pairs);
  std::vector<Gain> gains;
  for (size_t i = 0; i < types.size(); ++i) {
    const Prediction& plain = pred[2 * i];
    const Prediction& rotated = pred[2 * i + 1];
    gains.push_back({(published(table, "PPL", types[i], "f16", "none") - base) /
                         (published(table, "PPL", types[i], "f16", "khad") - base),
                     plain.damage / rotated.damage, plain.attn_kl / rotated.attn_kl});
    std::printf("fidelity: PR1034 %-5s/f16 kvtune damage %.4g -> %.4g rotated, attn_kl %.4g -> %.4g\n",
                types[i].c_str(), plain.damage, rotated.damage, plain.attn_kl, rotated.attn_kl);
    report_gain("pr1034_rotation_gain_" + types[i], gains.back());
  }
  expect_within_x2(gains[2]);  // q4_0
  const double q4 = pred[4].damage;
  for (size_t i : {0, 1}) {  // q8_0 unrotated, rotated
    report(std::string("pr1034_q8_0_share_of_q4_0") + (i == 1 ? "_rotated" : ""), pred[i].damage / q4,
           "kvtune damage of q8_0 K over unrotated q4_0 K (band: < 0.02; published 0.004 / 0.006)");
    EXPECT_LT(pred[i].damage, 0.02 * q4);
  }
}

// llama2 7B (PR 21551; the llama-2-7b preset with the llama profile): q4_0/q4_0 with K and V
// rotated. Published: PPL 6.3123 at f16, 6.4648 unrotated, 6.3243 rotated: ΔPPL gain x12.7.
// Asserted: kvtune's gain within x2 (x8 at these seeds; the profile's massive key value was fitted
// to this row, configs/profiles/llama.toml).
TEST(Fidelity, RotationGainOfFourBitCachesOnLlama2IsThePublishedOne) {
  const std::vector<Published> table = read_table("llama2-7b_pr21551.csv");
  const double base = published(table, "PPL", "f16", "f16", "none");
  // The q1_0 rows (q4_0/q1_0, q1_0/q1_0) have no kvtune scheme and are skipped.
  EXPECT_FALSE(kv_spec("q1_0", false).has_value());
  const std::vector<Prediction> pred =
      predict(kLlama2, {{*kv_spec("q4_0", false), *kv_spec("q4_0", false)},
                        {*kv_spec("q4_0", true), *kv_spec("q4_0", true)},
                        {*kv_spec("q8_0", false), *kv_spec("q8_0", false)},
                        {*kv_spec("q8_0", true), *kv_spec("q8_0", true)}});
  const Prediction& plain = pred[0];
  const Prediction& rotated = pred[1];
  const Gain g{(published(table, "PPL", "q4_0", "q4_0", "none") - base) /
                   (published(table, "PPL", "q4_0", "q4_0", "hadamard") - base),
               plain.damage / rotated.damage, plain.attn_kl / rotated.attn_kl};
  std::printf("fidelity: PR21551 q4_0/q4_0 kvtune damage %.4g -> %.4g rotated, attn_kl %.4g -> %.4g\n", plain.damage,
              rotated.damage, plain.attn_kl, rotated.attn_kl);
  report_gain("pr21551_rotation_gain_q4_0", g);
  expect_within_x2(g);
  // Measured only: the same pairs with the keys in the order llama.cpp stores them (RoPE pairs
  // adjacent), which kvtune's llama.cpp and Ollama recommendations use. One massive pair then fills
  // one q4_0 block instead of two, and the profile's fit no longer holds (x4.0 at these seeds).
  const std::string order = llama_cpp_key_order(kLlama2.preset);
  ASSERT_EQ(order, "adjacent");
  const std::vector<Prediction> stored =
      predict(kLlama2, {{in_key_order(*kv_spec("q4_0", false), order, builtin_registry()), *kv_spec("q4_0", false)},
                        {in_key_order(*kv_spec("q4_0", true), order, builtin_registry()), *kv_spec("q4_0", true)}});
  report("pr21551_rotation_gain_q4_0_kvtune_llama_cpp_order", stored[0].damage / stored[1].damage,
         "kvtune damage unrotated / rotated, keys in llama.cpp's order (not asserted)");
  // q8_0/q8_0 near lossless with and without rotation: below 2 % of q4_0/q4_0's damage.
  for (size_t i : {2, 3}) {
    report(std::string("pr21551_q8_0_share_of_q4_0") + (i == 3 ? "_rotated" : ""), pred[i].damage / plain.damage,
           "kvtune damage of q8_0/q8_0 over unrotated q4_0/q4_0 (band: < 0.02)");
    EXPECT_LT(pred[i].damage, 0.02 * plain.damage);
  }
}

// ik_llama.cpp issue 1509: q4_0/q4_0 with K and V rotated costs Qwen3-8B +2.18 % PPL and Qwen3-0.6B
// +254 %, x117 apart. The qwen3-0.6b profile's larger massive key value was fitted to the direction
// (configs/profiles/qwen3-0.6b.toml). Asserted: the 0.6B damage x3 to x30 the 8B's (x9.4 at these
// seeds). Both ends bind the fitted value: offsets below about 55 or above about 180 leave the band
// (an offset of 400 would give the published x117, but nothing measured supports a value that large;
// the choice of 100 is a fit to the direction, not to the size).
TEST(Fidelity, TheSameRecipeIsHarmlessOnQwen3DenseAndRuinousOnQwen3Small) {
  const std::vector<Published> sizes = read_table("qwen3-0.6b-8b_q4_0-hadamard.csv");
  auto change = [&](const std::string& model) {
    return published(sizes, "PPL", "q4_0", "q4_0", "khad+vhad", "", model) /
               published(sizes, "PPL", "f16", "f16", "n/a", "", model) -
           1.0;
  };
  const std::vector<Pair> recipe = {{*kv_spec("q4_0", true), *kv_spec("q4_0", true)}};
  const double dense = predict(kQwen3Dense, recipe).at(0).damage;
  const double small = predict(kQwen3Small, recipe).at(0).damage;
  report("issue1509_qwen3_8b_kvtune_damage", dense, "kvtune damage, q4_0/q4_0 K and V rotated, qwen3-8b + qwen3");
  report("issue1509_qwen3_0_6b_kvtune_damage", small, "the same on qwen3-0.6b + qwen3-0.6b");
  report("issue1509_0_6b_over_8b_published", change("Qwen3-0.6B") / change("Qwen3-8B"),
         "relative ΔPPL of 0.6B over 8B");
  report("issue1509_0_6b_over_8b_kvtune", small / dense, "kvtune damage, same ratio (band: 3 to 30)");
  EXPECT_GE(small / dense, 3.0);
  EXPECT_LE(small / dense, 30.0);
}

}  // namespace
}  // namespace kvtune
