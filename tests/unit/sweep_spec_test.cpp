// Sweep files (docs/sweep-file.md): how [search] expands into points, how runtimes add theirs, what
// the hash covers, that the shipped default parses, and that every bad input names file:line:col.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <iostream>

#include "kvtune/error.h"
#include "kvtune/sweep.h"
#include "kvtune/sweep_report.h"
#include "capture_fixture.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::canonical;
using testing::config_dir;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const SweepContext& context() {
  static const SweepContext c = [] {
    SweepContext out;
    out.registry = &builtin_registry();
    out.models = [](const std::string& name) { return find_model_preset(config_dir(), name); };
    out.profiles = [](const std::string& name) { return find_model_profile(config_dir(), name); };
    out.runtime_tables = load_runtime_tables(config_dir(), builtin_registry());
    return out;
  }();
  return c;
}

SweepSpec parse(const std::string& text) { return parse_sweep(text, "s.toml", context()); }

// The message of the InputError that parsing `text` throws (empty when it parses).
std::string sweep_spec_error(const std::string& text) {
  try {
    parse(text);
  } catch (const InputError& e) {
    return e.what();
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> pairs_of(const SweepSpec& s) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const SweepPoint& p : s.points) out.emplace_back(p.k, p.v);
  return out;
}

bool any_contains(const std::vector<std::string>& list, const std::string& part) {
  return std::any_of(list.begin(), list.end(), [&](const std::string& s) { return s.find(part) != std::string::npos; });
}

TEST(SweepSpec, GridIsTheProductOfItsValueLists) {
  const SweepSpec s = parse(R"(
[search]
v = ["f16"]
[[search.grid]]
roles = ["k"]
family = "int"
bits = [2, 4, 8]
axis = ["channel", "token"]
asym = [true, false]
)");
  EXPECT_EQ(s.k_candidates.size(), 12u);
  EXPECT_EQ(s.points.size(), 12u);
  EXPECT_EQ(s.k_candidates.front(), "int:bits=2,axis=channel,asym");
  EXPECT_EQ(s.k_candidates[1], "int:bits=2,axis=channel");
  EXPECT_THAT(s.v_candidates, ElementsAre("f16"));
  EXPECT_EQ(s.points.front().origin, "search");
  EXPECT_EQ(s.pairing, Pairing::cartesian);
  EXPECT_EQ(s.name, "s.toml");  // the file name when the file gives none
}

// Integer values may be written as ranges: arithmetic (step) or geometric (factor).
TEST(SweepSpec, IntegerRangesExpandToTheirValues) {
  const SweepSpec s = parse(R"(
[search]
v = ["f16"]
[[search.grid]]
roles = ["k"]
family = "int"
bits = { from = 2, to = 8, step = 2 }
axis = "token"
group = { from = 32, to = 128, factor = 2 }
[search.k_policy]
residual_window = { from = 0, to = 256, step = 128 }
)");
  EXPECT_EQ(s.k_candidates.size(), 4u * 3u * 3u);  // bits 2,4,6,8 x group 32,64,128 x window none,128,256
  EXPECT_EQ(s.k_candidates.front(), "int:bits=2,axis=token,group=32");
  EXPECT_TRUE(any_contains(s.k_candidates, "int:bits=6,axis=token,group=64,residual_window=256"));

  const std::string grid = "[search]\nv = [\"f16\"]\n[[search.grid]]\nroles = [\"k\"]\nfamily = \"int\"\n";
  EXPECT_THAT(sweep_spec_error(grid + "axis = { from = 1, to = 2 }\n"),
              HasSubstr("s.toml:6:8: 'axis' is not an integer parameter: list its values"));
  EXPECT_THAT(sweep_spec_error(grid + "bits = { from = 2, to = 8, step = 2, factor = 2 }\n"),
              HasSubstr("s.toml:6:8: 'bits': give 'step' or 'factor', not both"));
  EXPECT_THAT(sweep_spec_error(grid + "bits = { from = 2, to = 10 }\n"),
              HasSubstr("'bits' = 9 is not valid; expected 2..8"));
  EXPECT_THAT(sweep_spec_error(grid + "bits = { to = 8 }\n"), HasSubstr("missing key 'from' in [bits]"));
}

TEST(SweepSpec, SkipInvalidDropsRefusedCombinationsAndSaysSo) {
  // axis=tensor refuses a group; group 48 does not divide head_dim 128 for per-token scales.
  const SweepSpec s = parse(R"(
[search]
v = ["f16"]
[[search.grid]]
family = "int"
roles = ["k"]
axis = ["tensor", "token"]
group = [32, 48]
skip_invalid = true
)");
  EXPECT_THAT(s.k_candidates, ElementsAre("int:bits=8,axis=token,group=32"));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_THAT(note_text(s.notes[0]), HasSubstr("[[search.grid]] at s.toml:4:1: skip_invalid dropped 3 candidate(s)"));
}

TEST(SweepSpec, PolicyValuesAreCrossedWithEveryCandidate) {
  const SweepSpec s = parse(R"(
[workload]
rope = {}
[search]
both = ["q8_0", "q4_0:residual_window=32"]
[search.policy]
residual_window = [0, 128]
[search.k_policy]
rope_stage = ["post", "pre"]
[search.v_policy]
sink_tokens = 4
)");
  EXPECT_THAT(s.k_candidates,
              ElementsAre("q8_0", canonical("q8_0:rope_stage=pre"), canonical("q8_0:residual_window=128"),
                          canonical("q8_0:residual_window=128,rope_stage=pre"), canonical("q4_0:residual_window=32"),
                          canonical("q4_0:residual_window=32,rope_stage=pre")));
  // rope_stage only applies to keys; a key the candidate sets itself keeps its value.
  EXPECT_THAT(s.v_candidates,
              ElementsAre(canonical("q8_0:sink_tokens=4"), canonical("q8_0:sink_tokens=4,residual_window=128"),
                          canonical("q4_0:residual_window=32,sink_tokens=4")));
  EXPECT_EQ(s.points.size(), 6u * 3u);
}

TEST(SweepSpec, RotationGroupOnlyGoesWhereARotationIs) {
  const SweepSpec s = parse(R"(
[search]
k = ["q8_0"]
v = ["q4_0"]
[search.policy]
rotation = ["none", "hadamard"]
rotation_group = 64
)");
  EXPECT_THAT(s.k_candidates, ElementsAre("q8_0", canonical("q8_0:rotation=hadamard,rotation_group=64")));
}

TEST(SweepSpec, CandidatesAreCanonicalDeduplicatedAndInFileOrder) {
  const SweepSpec s = parse(R"(
[search]
both = ["q8_0:variant=ref"]
k = ["int:axis=channel,bits=4", "int:bits=4,axis=channel", "q8_0"]
v = ["q4_0", "q4_0:rotation=none"]
)");
  EXPECT_THAT(s.k_candidates, ElementsAre("q8_0", "int:bits=4,axis=channel"));
  EXPECT_THAT(s.v_candidates, ElementsAre("q8_0", "q4_0"));
  EXPECT_EQ(s.points.size(), 4u);
}

TEST(SweepSpec, MatchedPairsCandidatesOfBothRoles) {
  const SweepSpec s = parse(R"(
[search]
pairing = "matched"
k = ["q8_0", "q4_0"]
v = ["f16", "q4_0"]
)");
  using P = std::pair<std::string, std::string>;
  EXPECT_THAT(pairs_of(s), ElementsAre(P{"q4_0", "q4_0"}));
}

TEST(SweepSpec, IndependentPairsEachRoleWithExact) {
  const SweepSpec s = parse(R"(
[search]
pairing = "independent"
k = ["q8_0", "none"]
v = ["q4_0", "none"]
)");
  using P = std::pair<std::string, std::string>;
  EXPECT_THAT(pairs_of(s), ElementsAre(P{"q8_0", "none"}, P{"none", "none"}, P{"none", "q4_0"}));
  EXPECT_STREQ(pairing_name(s.pairing), "independent");
}

TEST(SweepSpec, ConstraintsPrunePairs) {
  const SweepSpec s = parse(R"(
[search]
both = ["q4_0", "q8_0"]
[search.constraints]
k_bits_at_least_v_bits = true
max_pair_bits = 13.0
exclude = ["q8_0:variant=ref / q4_0:rotation=none"]
)");
  // q4_0 = 4.5 and q8_0 = 8.5 bits: (q4_0, q8_0) has fewer K bits, (q8_0, q8_0) is 17 > 13, and
  // (q8_0, q4_0) is excluded.
  using P = std::pair<std::string, std::string>;
  EXPECT_THAT(pairs_of(s), ElementsAre(P{"q4_0", "q4_0"}));
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_THAT(note_text(s.notes[0]), HasSubstr("dropped 3 of 4 pairs (k_bits_at_least_v_bits: 1, max_pair_bits: 1, exclude: 1)"));
}

TEST(SweepSpec, RuntimePointsFollowTheSearchPoints) {
  const SweepSpec s = parse(R"(
[search]
both = ["bf16"]
[[runtimes]]
name = "vllm"
)");
  ASSERT_EQ(s.runtime_views.size(), 1u);
  ASSERT_EQ(s.runtimes.size(), 1u);
  EXPECT_EQ(s.runtimes[0].version, "latest");
  EXPECT_EQ(s.points.front().k, "bf16");
  EXPECT_EQ(s.points.front().origin, "search");  // vLLM's "auto" is bf16/bf16: one point, the search's
  std::set<std::pair<std::string, std::string>> distinct;
  for (const RuntimeOption& o : s.runtime_views[0].options) distinct.insert({o.k_spec, o.v_spec});
  EXPECT_EQ(s.points.size(), distinct.size());
  for (size_t i = 1; i < s.points.size(); ++i) {
    EXPECT_THAT(s.points[i].origin, HasSubstr("runtime vllm " + s.runtime_views[0].version + ": "));
  }
  const auto pairs = pairs_of(s);
  const std::set<std::pair<std::string, std::string>> all(pairs.begin(), pairs.end());
  EXPECT_EQ(all.size(), s.points.size());  // no duplicate (k, v)
}

// llama.cpp stores a Llama model's keys with each RoPE pair in neighbouring channels ([[key_layout]]):
// its points are judged in that order (but for key formats that keep their values in any order), a
// Qwen model's and vLLM's are not, interleaved cases are in that order already, and a capture whose
// pair order is unknown keeps its order and says why. A known order with RoPE kvtune cannot redo
// (yarn) is still an order.
TEST(SweepSpec, RuntimePointsJudgeKeysInTheOrderTheRuntimeStoresThem) {
  const auto sweep = [](const std::string& model, const std::string& rope = "") {
    return parse("[workload]\nmodel = \"" + model + "\"\ntokens = 1024\n" + rope + "[search]\nboth = [\"q4_0\"]\n"
                 "[[runtimes]]\nname = \"llama-cpp\"\n[[runtimes]]\nname = \"vllm\"\n");
  };
  const auto in_pairs = [](const RuntimeOption& o) { return o.k_spec.find("pair_order=adjacent") != std::string::npos; };
  const auto none_in_pairs = [&](const RuntimeView& v) { return std::none_of(v.options.begin(), v.options.end(), in_pairs); };
  const SweepSpec llama = sweep("llama-3.1-8b");
  ASSERT_EQ(llama.runtime_views.size(), 2u);
  EXPECT_EQ(llama.runtime_views[0].key_order, "adjacent");
  size_t moved = 0;
  for (const RuntimeOption& o : llama.runtime_views[0].options) {
    const bool invariant = builtin_registry().make(o.k_spec)->traits().channel_order_invariant;
    EXPECT_EQ(in_pairs(o), !invariant) << o.k_spec;
    EXPECT_EQ(any_contains(o.settings.caveats, "kvtune judges these keys in llama.cpp's channel order"), !invariant) << o.name;
    EXPECT_EQ(o.v_spec.find("pair_order"), std::string::npos) << o.v_spec;
    moved += in_pairs(o) ? 1 : 0;
  }
  EXPECT_GT(moved, 0u);
  EXPECT_TRUE(none_in_pairs(llama.runtime_views[1]));
  std::set<std::string> keys;
  for (const SweepPoint& p : llama.points) keys.insert(p.k);
  EXPECT_EQ(keys.count("q4_0"), 1u);  // the search's own point, in the checkpoint's order
  EXPECT_EQ(keys.count("q4_0:rotation=hadamard,pair_order=adjacent"), 1u);  // llama.cpp's -ctk q4_0
  EXPECT_EQ(keys.count("f16"), 1u);                                        // the same values in any order
  // The Llama profile was fitted with the keys in the checkpoint's order: the moved options say so.
  const SweepSpec profiled = sweep("llama-3.1-8b", "profile = \"llama\"\n");
  for (const RuntimeOption& o : profiled.runtime_views[0].options) {
    EXPECT_EQ(any_contains(o.settings.caveats, "the profile 'llama' was fitted with the keys in the checkpoint's order"),
              in_pairs(o)) << o.k_spec;
  }
  for (const RuntimeOption& o : llama.runtime_views[0].options) {
    EXPECT_FALSE(any_contains(o.settings.caveats, "was fitted with the keys")) << o.k_spec;
  }

  EXPECT_TRUE(none_in_pairs(sweep("qwen2.5-7b").runtime_views[0]));
  const SweepSpec interleaved = sweep("llama-3.1-8b", "[workload.rope]\nconvention = \"interleaved\"\n");
  EXPECT_TRUE(none_in_pairs(interleaved.runtime_views[0]));
  EXPECT_EQ(interleaved.runtime_views[0].key_order, "");

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kvtune-sweep-key-layout";
  const std::string cache = "[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nk = [\"q8_0\"]\nv = [\"q8_0\"]\n"
                            "[[runtimes]]\nname = \"llama-cpp\"\n";
  const auto captured = [&](const std::map<std::string, std::string>& edit) {
    std::filesystem::remove_all(dir);
    testing::write_capture(dir / "cap", {}, edit);
    return parse_sweep(cache, (dir / "s.toml").string(), context()).runtime_views[0];
  };
  const std::string plain = "\"rope_theta\": 10000.0, \"rope_scaling\": null, \"rope_convention\": \"rotate_half\"}";
  const std::string llama_class = ", \"architecture\": \"LlamaForCausalLM\"}";
  const auto unknown_caveat = [](const RuntimeView& v) {
    return std::all_of(v.options.begin(), v.options.end(), [](const RuntimeOption& o) {
      return any_contains(o.settings.caveats, "the capture's RoPE pair order is unknown, so they could not be put in "
                                              "the order llama.cpp stores this model's keys");
    });
  };
  for (const std::string theta : {"10000.0", "null"}) {
    const RuntimeView unknown = captured({{plain, "\"rope_theta\": " + theta + ", \"rope_scaling\": null, "
                                                  "\"rope_convention\": \"unknown\"" + llama_class}});
    EXPECT_TRUE(none_in_pairs(unknown)) << theta;
    EXPECT_TRUE(unknown_caveat(unknown)) << theta;
  }
  const RuntimeView yarn = captured({{plain, "\"rope_theta\": 10000.0, \"rope_scaling\": {\"rope_type\": \"yarn\", "
                                             "\"factor\": 4.0}, \"rope_convention\": \"rotate_half\"" + llama_class}});
  EXPECT_FALSE(none_in_pairs(yarn));
  EXPECT_FALSE(unknown_caveat(yarn));
  // Without RoPE the pair order still decides what the layout moves, so an interleaved one is hashed.
  const auto hash_without_rope = [&](const std::string& convention) {
    std::filesystem::remove_all(dir);
    testing::write_capture(dir / "cap", {}, {{plain, "\"rope_theta\": null, \"rope_scaling\": null, "
                                                     "\"rope_convention\": \"" + convention + "\"" + llama_class}});
    return parse_sweep(cache, (dir / "s.toml").string(), context()).hash;
  };
  EXPECT_NE(hash_without_rope("interleaved"), hash_without_rope("rotate_half"));
  std::filesystem::remove_all(dir);
}

TEST(SweepSpec, RuntimeOptionsThatCannotTakeTheShapeAreNoted) {
  // head_dim 48 is not a multiple of ggml's 32-element blocks: llama.cpp's quantized types drop out.
  const SweepSpec s = parse(R"(
runtimes = ["llama-cpp"]
[workload]
head_dim = 48
)");
  EXPECT_TRUE(s.k_candidates.empty());
  ASSERT_FALSE(s.points.empty());
  for (const SweepPoint& p : s.points) {
    EXPECT_EQ(p.k.find('q'), std::string::npos) << p.k;
    EXPECT_EQ(p.v.find('q'), std::string::npos) << p.v;
  }
  EXPECT_TRUE(any_contains(note_texts(s.notes), "llama-cpp " + s.runtime_views[0].version + ": option '"));
  EXPECT_TRUE(any_contains(note_texts(s.notes), "head_dim 48 is not a multiple of the 32-element ggml block"));
}

TEST(SweepSpec, BudgetAndFit) {
  const SweepSpec s = parse(R"(
[workload]
model = "llama-3.1-8b"
tokens = 1024
[search]
both = ["q8_0"]
[budget]
max_bits = 8.5
fit = { gpu_mem = "80GiB", weights = "16GB" }
)");
  ASSERT_TRUE(s.model.has_value());
  EXPECT_EQ(s.model->name, "llama-3.1-8b");
  EXPECT_EQ(s.scenario.workload.head_dim, 128);
  ASSERT_TRUE(s.budget.fit.has_value());
  EXPECT_EQ(s.budget.fit->gpu_mem, 80ull << 30);
  EXPECT_EQ(s.budget.fit->weights, 16000000000ull);
  EXPECT_EQ(s.budget.fit->ctx, 1024);
  EXPECT_EQ(s.budget.fit->sequences, 1);
  EXPECT_EQ(s.budget.objective, Objective::min_error);  // no error bound
  EXPECT_EQ(s.budget.max_bits, 8.5);
  EXPECT_EQ(parse("[search]\nboth = [\"q8_0\"]\n[budget]\nmax_rel_out_err = 0.1\n").budget.objective,
            Objective::min_bits);
  EXPECT_STREQ(objective_name(Objective::min_error), "min_error");
}

// Tensor parallelism in the fit budget: tensor_parallel, gpu_mem = "NxSIZE", or both when they agree.
TEST(SweepSpec, FitTakesTensorParallelOrACountTimesASize) {
  auto fit_of = [](const std::string& fit) {
    return parse("[workload]\nmodel = \"llama-3.1-70b\"\ntokens = 1024\n[search]\nboth = [\"q8_0\"]\n[budget]\nfit = " +
                 fit + "\n")
        .budget.fit.value();
  };
  EXPECT_EQ(fit_of(R"({ gpu_mem = "80GiB" })").tensor_parallel, 1);
  const MemoryFit tp8 = fit_of(R"({ gpu_mem = "80GiB", tensor_parallel = 8, weights = "140GB" })");
  EXPECT_EQ(tp8.tensor_parallel, 8);
  EXPECT_EQ(tp8.gpu_mem, 80ull << 30);  // one GPU's
  EXPECT_EQ(tp8.weights, 140000000000ull);  // the whole model's: 17.5 GB per GPU, so it fits
  const MemoryFit nx = fit_of(R"({ gpu_mem = "8x80GiB" })");
  EXPECT_EQ(nx.tensor_parallel, 8);
  EXPECT_EQ(nx.gpu_mem, 80ull << 30);
  EXPECT_EQ(fit_of(R"({ gpu_mem = "2x80GiB", tensor_parallel = 2 })").tensor_parallel, 2);

  // The typed override writes tensor_parallel into the table it reads.
  SweepOverrides ov;
  ov.fit = MemoryFit{80ull << 30, 140000000000ull, 4096, 2, 8};
  const SweepSpec s = parse_sweep("[workload]\nmodel = \"llama-3.1-70b\"\n[search]\nboth = [\"q8_0\"]\n", "s.toml",
                                  context(), ov);
  EXPECT_EQ(s.budget.fit.value().tensor_parallel, 8);
}

// serve_ctx: the served context when it is not the simulated one. The fit's ctx defaults to it, it
// changes no metric (the hash is the same: a resumed sweep may set it), and the override writes it.
TEST(SweepSpec, ServeCtxIsTheFitsContextAndLeavesTheHash) {
  const std::string body = "[workload]\nmodel = \"llama-3.1-8b\"\ntokens = 1024\n[search]\nboth = [\"q8_0\"]\n";
  const SweepSpec plain = parse(body + "[budget]\nfit = { gpu_mem = \"80GiB\" }\n");
  EXPECT_EQ(plain.serve_ctx, 0);
  EXPECT_EQ(plain.budget.fit.value().ctx, 1024);
  const SweepSpec served = parse("serve_ctx = 65536\n" + body + "[budget]\nfit = { gpu_mem = \"80GiB\" }\n");
  EXPECT_EQ(served.serve_ctx, 65536);
  EXPECT_EQ(served.budget.fit.value().ctx, 65536);
  EXPECT_EQ(served.hash, plain.hash);
  EXPECT_EQ(parse("serve_ctx = 65536\n" + body + "[budget]\nfit = { gpu_mem = \"80GiB\", ctx = 65536 }\n").budget.fit->ctx,
            65536);
  EXPECT_FALSE(parse("serve_ctx = 65536\n" + body).budget.fit.has_value());

  SweepOverrides ov;
  ov.serve_ctx = 262144;
  const SweepSpec overridden = parse_sweep(body, "s.toml", context(), ov);
  EXPECT_EQ(overridden.serve_ctx, 262144);
  EXPECT_THAT(overridden.text, HasSubstr("serve_ctx = 262144"));

  const std::string fit = "[budget]\nfit = { gpu_mem = \"80GiB\", ctx = 4096 }\n";
  EXPECT_THAT(sweep_spec_error("serve_ctx = 65536\n" + body + fit),
              HasSubstr("s.toml:8:34: 'ctx' 4096 differs from serve_ctx 65536 (give one of them)"));
  EXPECT_THAT(sweep_spec_error("serve_ctx = 65536\n[search]\nboth = [\"q8_0\"]\n"),
              HasSubstr("s.toml:1:13: 'serve_ctx' needs [workload] model = \"NAME\" (or a capture)"));
  for (const char* bad : {"0", "\"64k\"", "2.5", "16777217"}) {
    EXPECT_THAT(sweep_spec_error(std::string("serve_ctx = ") + bad + "\n" + body),
                HasSubstr("s.toml:1:13: 'serve_ctx' must be an integer in 1..16777216"))
        << bad;
  }
}

// recommend --profile: the typed override drops the template's generic statistics so the profile's
// apply, keeps the experiment (needles, calibration), and the hash tells the two apart.
TEST(SweepSpec, AProfileOverrideReplacesTheTemplatesGenericStatistics) {
  const std::string path = std::string(KVTUNE_SOURCE_DIR) + "/sweeps/recommend.toml";
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SweepOverrides ov;
  ov.model = "qwen3-8b";
  const SweepSpec generic = parse_sweep(text, path, context(), ov);
  EXPECT_EQ(generic.scenario.profile, "");
  EXPECT_EQ(generic.scenario.workload.sinks.key_norm, 8.0);  // the template's generic sinks
  ov.profile = "qwen3";
  const SweepSpec profiled = parse_sweep(text, path, context(), ov);
  const WorkloadConfig& w = profiled.scenario.workload;
  EXPECT_EQ(profiled.scenario.profile, "qwen3");
  EXPECT_EQ(w.keys.outlier_offset, 20.0);  // configs/profiles/qwen3.toml
  EXPECT_TRUE(w.keys.outlier_pairs);
  EXPECT_EQ(w.keys.outlier_count, 2);
  EXPECT_EQ(w.sinks.key_norm, 1.0);
  EXPECT_EQ(w.needles.depths, generic.scenario.workload.needles.depths);  // the experiment is kept
  EXPECT_EQ(w.calibration.samples, generic.scenario.workload.calibration.samples);
  EXPECT_NE(profiled.hash, generic.hash);
  ov.profile = "qwen9";
  EXPECT_THROW(parse_sweep(text, path, context(), ov), InputError);
}

// What a preset resolves beyond its shape is hashed where the workload has it, so an edited preset
// file cannot resume into records made otherwise: the logit softcap, which layers slide over what
// window, their own RoPE base. A base with no sliding layer to take it changes nothing; a capture's
// logit scale and cap are hashed as well.
TEST(SweepSpec, APresetsSoftcapAndSlidingLayersAreHashed) {
  ModelPreset toy;
  toy.name = "toy";
  toy.shape = {4, 1, 32, 0, 0};
  toy.q_heads = 1;
  toy.rope_theta = 10000.0;
  SweepContext ctx = context();
  ctx.models = [&](const std::string&) { return toy; };
  const std::string text = "[workload]\nmodel = \"toy\"\ntokens = 64\n[search]\nk = [\"q8_0\"]\nv = [\"q8_0\"]\n";
  const auto hash = [&] { return parse_sweep(text, "s.toml", ctx).hash; };
  const uint64_t plain = hash();
  toy.sliding_rope_theta = 20000.0;  // no sliding layer takes it
  EXPECT_EQ(hash(), plain);
  toy.logit_softcap = 50.0;
  const uint64_t capped = hash();
  EXPECT_NE(capped, plain);
  toy.shape.sliding_window = 32;
  toy.shape.sliding_layers = 2;
  toy.sliding_window_pattern = 2;
  const uint64_t sliding = hash();
  EXPECT_NE(sliding, capped);
  toy.sliding_rope_theta = 10000.0;
  EXPECT_NE(hash(), sliding);
  toy.shape.sliding_window = 16;
  EXPECT_NE(hash(), sliding);

  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kvtune-sweep-capture-scale";
  std::filesystem::remove_all(dir);
  testing::write_capture(dir / "cap");
  const std::string cache = "[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nk = [\"q8_0\"]\nv = [\"q8_0\"]\n";
  const uint64_t unscaled = parse_sweep(cache, (dir / "s.toml").string(), context()).hash;
  std::filesystem::remove_all(dir / "cap");
  testing::write_capture(dir / "cap", {}, {{"\"rope_scaling\": null", "\"rope_scaling\": null, \"query_pre_attn_scalar\": 128.0"}});
  const uint64_t scaled = parse_sweep(cache, (dir / "s.toml").string(), context()).hash;
  EXPECT_NE(scaled, unscaled);
  std::filesystem::remove_all(dir / "cap");
  testing::write_capture(dir / "cap", {}, {{"\"rope_scaling\": null", "\"rope_scaling\": null, \"attn_logit_softcapping\": 50.0"}});
  EXPECT_NE(parse_sweep(cache, (dir / "s.toml").string(), context()).hash, unscaled);
  std::filesystem::remove_all(dir);
}

// A sweep on a capture (docs/real-caches.md): its candidates are checked at the shortest sample,
// and the hash follows the capture and the scales it loads.
TEST(SweepSpec, ASweepOnACaptureChecksItsShapeAndHashesTheCapture) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kvtune-sweep-capture";
  std::filesystem::remove_all(dir);
  testing::write_capture(dir / "cap");
  const std::string text = "[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nk = [\"q8_0\", \"q4_0\"]\nv = [\"q8_0\"]\n";
  const SweepSpec s = parse_sweep(text, (dir / "s.toml").string(), context());
  ASSERT_TRUE(s.scenario.capture.has_value());
  EXPECT_EQ(s.points.size(), 2u);
  EXPECT_EQ(s.scenario.workload.tokens, 64);  // the shortest sample
  testing::CaptureSpec longer;
  longer.samples = {{"a", 96}, {"b", 80}};
  std::filesystem::remove_all(dir / "cap");
  testing::write_capture(dir / "cap", longer);
  EXPECT_NE(parse_sweep(text, (dir / "s.toml").string(), context()).hash, s.hash);
  // A pre-RoPE key policy has nothing to un-rotate on a capture: refused before any point runs.
  try {
    parse_sweep("[workload]\nsource = \"cache\"\npath = \"cap\"\n[search]\nk = [\"q8_0:rope_stage=pre\"]\n"
                "v = [\"q8_0\"]\n",
                (dir / "s.toml").string(), context());
    ADD_FAILURE() << "rope_stage=pre was accepted on a capture";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("rope_stage=pre needs a workload with RoPE ([workload.rope] or a model); a "
                                    "capture's keys are used as cached, after RoPE"));
  }
  std::filesystem::remove_all(dir);
}

TEST(SweepSpec, RefusesBadTensorParallelNamingFileLineAndColumn) {
  auto error_with = [](const std::string& fit) {
    return sweep_spec_error(
        "[search]\nboth = [\"q8_0\"]\n[workload]\nmodel = \"llama-3.1-70b\"\n[budget]\nfit = " + fit + "\n");
  };
  for (const char* bad : {"0", "\"8\"", "2.5", "-1", "4097", "1.5e26", "-1e300"}) {
    EXPECT_THAT(error_with(std::string(R"({ gpu_mem = "80GiB", tensor_parallel = )") + bad + " }"),
                HasSubstr("s.toml:6:46: 'tensor_parallel' must be an integer in 1..4096"))
        << bad;
  }
  EXPECT_THAT(error_with(R"({ gpu_mem = "2x80GiB", tensor_parallel = 4 })"),
              HasSubstr("s.toml:6:48: 'tensor_parallel' 4 disagrees with 'gpu_mem' 2xSIZE (2 GPUs)"));
  EXPECT_THAT(error_with(R"({ gpu_mem = "0x80GiB" })"),
              HasSubstr("s.toml:6:19: budget.fit.gpu_mem '0x80GiB': the GPU count must be in 1..4096"));
  EXPECT_THAT(error_with(R"({ gpu_mem = "ax80GiB" })"), HasSubstr("s.toml:6:19: budget.fit.gpu_mem 'ax80GiB'"));
  // 160 GiB over 2 GPUs is 80 GiB each: nothing left of an 80 GiB GPU.
  EXPECT_THAT(error_with(R"({ gpu_mem = "80GiB", tensor_parallel = 2, weights = "160GiB" })"),
              HasSubstr("s.toml:6:59: 'weights' split over 2 GPUs leave nothing"));
}

constexpr const char* kHashed = R"(
name = "a"
seeds = 2
[workload]
tokens = 1024
head_dim = 64
[workload.keys]
outlier_count = 2
outlier_scale = 5.0
[search]
both = ["q8_0"]
)";

TEST(SweepSpec, HashCoversTheWorkloadOnly) {
  const uint64_t h = parse(kHashed).hash;
  // Reordered keys, comments, inline tables and another name, search and budget: the same hash.
  EXPECT_EQ(parse(R"(
# a comment
seeds = 2   # two
name = "b"
[search]
both = ["q4_0", "f16"]
[budget]
max_bits = 6.0
[workload]
keys = { outlier_scale = 5.0, outlier_count = 2 }
head_dim = 64
tokens = 1024
)")
                .hash,
            h);
  std::string other = kHashed;
  other.replace(other.find("5.0"), 3, "6.0");
  EXPECT_NE(parse(other).hash, h);
  other = kHashed;
  other.replace(other.find("seeds = 2"), 9, "seeds = 3");
  EXPECT_NE(parse(other).hash, h);
  EXPECT_NE(parse(std::string(kHashed) + "[metrics]\ntopk = 4\n").hash, h);
}

// budget.confidence sets the level of the records' intervals, so it is hashed, and only when set.
TEST(SweepSpec, BudgetConfidenceIsReadRangeCheckedAndHashed) {
  const SweepSpec plain = parse(kHashed);
  EXPECT_FALSE(plain.budget.confidence);
  EXPECT_EQ(plain.budget.interval_level(), kDefaultConfidence);
  const SweepSpec judged = parse(std::string(kHashed) + "[budget]\nmax_rel_out_err = 0.05\nconfidence = 0.9\n");
  EXPECT_EQ(judged.budget.confidence, 0.9);
  EXPECT_EQ(judged.budget.interval_level(), 0.9);
  EXPECT_NE(judged.hash, plain.hash);
  EXPECT_EQ(parse(std::string(kHashed) + "[budget]\nmax_rel_out_err = 0.05\n").hash, plain.hash);
  for (const char* bad : {"1.0", "0.2", "\"95%\""}) {
    EXPECT_THAT(sweep_spec_error(std::string(kHashed) + "[budget]\nconfidence = " + bad + "\n"),
                HasSubstr("s.toml:13:14: 'confidence' must be a number in 0.5..0.999"))
        << bad;
  }
}

// [metrics] precision reaches the scenario; float32 changes the hash, float64 (the default, written
// or not) leaves it; anything else is refused with its position.
TEST(SweepSpec, MetricsPrecisionIsReadCheckedAndHashed) {
  const SweepSpec plain = parse(kHashed);
  EXPECT_EQ(plain.scenario.precision, Precision::float64);
  const SweepSpec f64 = parse(std::string(kHashed) + "[metrics]\nprecision = \"float64\"\n");
  EXPECT_EQ(f64.scenario.precision, Precision::float64);
  EXPECT_EQ(f64.hash, plain.hash);
  const SweepSpec f32 = parse(std::string(kHashed) + "[metrics]\nprecision = \"float32\"\n");
  EXPECT_EQ(f32.scenario.precision, Precision::float32);
  EXPECT_NE(f32.hash, plain.hash);
  for (const char* bad : {"\"fp32\"", "32"}) {
    EXPECT_THAT(sweep_spec_error(std::string(kHashed) + "[metrics]\nprecision = " + bad + "\n"),
                HasSubstr("s.toml:13:13: 'precision' must be one of: float64, float32"))
        << bad;
  }
}

// cpu and cuda compute the same bits; the fused kernel's rel_out_err is another computation.
TEST(SweepSpec, HashCoversOnlyTheKernelBackend) {
  const uint64_t h = parse(kHashed).hash;
  const SweepSpec cuda = parse("backend = \"cuda\"\n" + std::string(kHashed));
  EXPECT_EQ(cuda.scenario.backend, "cuda");
  EXPECT_EQ(cuda.hash, h);
  EXPECT_EQ(parse("backend = \"cpu\"\n" + std::string(kHashed)).hash, h);
  EXPECT_NE(parse("backend = \"cuda-kernel\"\n" + std::string(kHashed)).hash, h);
}

TEST(SweepSpec, ShippedDefaultParses) {
  const std::string path = std::string(KVTUNE_SOURCE_DIR) + "/sweeps/default.toml";
  const SweepSpec s = load_sweep(path, context());
  EXPECT_EQ(s.source, path);
  EXPECT_EQ(s.scenario.contexts, std::vector<int64_t>{32768});
  EXPECT_EQ(s.scenario.workload.q_per_kv, 4);
  EXPECT_EQ(s.runtime_views.size(), 7u);
  EXPECT_EQ(s.scenario.precision, Precision::float32);
  ASSERT_TRUE(s.budget.fit.has_value());
  EXPECT_FALSE(s.text.empty());
  size_t search = 0;
  for (const SweepPoint& p : s.points) search += p.origin == "search";
  std::cout << "sweeps/default.toml: " << s.k_candidates.size() << " K x " << s.v_candidates.size() << " V candidates, "
            << search << " search points + " << s.points.size() - search << " runtime points = " << s.points.size()
            << " points, " << scenario_cases(s.scenario).size() << " cases\n";
  for (const std::string& n : note_texts(s.notes)) std::cout << "  note: " << n << "\n";
  EXPECT_GT(search, 50u);
  EXPECT_LT(s.points.size(), 600u);  // keeps the default run near a minute on two cores
}

// ---- bad input: every message names file:line:col ----

TEST(SweepSpec, RefusesUnknownKeys) {
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\nparing = \"matched\"\n"),
              HasSubstr("s.toml:3:1: unknown key 'paring' in [search]; valid keys are: both"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[budget]\nmax_err = 0.1\n"),
              HasSubstr("s.toml:4:1: unknown key 'max_err' in [budget]"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[[search.grid]]\nfamily = \"int\"\nbitz = 4\n"),
              HasSubstr("s.toml:5:1: unknown key 'bitz' in [search.grid]; valid keys are: asym, axis, bits"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[search.policy]\nwindow = 4\n"),
              HasSubstr("s.toml:4:1: unknown key 'window' in [search.policy]"));
}

TEST(SweepSpec, RefusesBadSpecsAndGridValues) {
  EXPECT_THAT(sweep_spec_error("[search]\nk = [\"q8_0\", \"q9_0\"]\nv = [\"f16\"]\n"),
              HasSubstr("s.toml:2:14: unknown scheme 'q9_0'"));
  EXPECT_THAT(sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int\"\nbits = [4, 9]\n"),
              HasSubstr("s.toml:5:12: 'bits' = 9 is not valid; expected 2..8"));
  EXPECT_THAT(sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int\"\naxis = \"row\"\n"),
              HasSubstr("s.toml:5:8: 'axis' must be one of: tensor, channel, token"));
  EXPECT_THAT(sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int\"\nasym = \"yes\"\n"),
              HasSubstr("s.toml:5:8: 'asym' is a flag"));
  EXPECT_THAT(sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int8\"\n"),
              HasSubstr("s.toml:4:10: 'family' must be one of: bf16"));
  EXPECT_THAT(sweep_spec_error("[search]\nv = [\"f16\"]\n[search.policy]\nresidual_window = [0, -4]\n"),
              HasSubstr("s.toml:4:23: 'residual_window' = -4 is not valid"));
}

TEST(SweepSpec, RefusesGridCombinationsWithoutSkipInvalid) {
  EXPECT_THAT(
      sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int\"\naxis = [\"token\", \"tensor\"]\n"
                       "group = 32\n"),
      HasSubstr("s.toml:3:1: [[search.grid]] combination 'int:axis=tensor,group=32' is refused"));
  // A combination the family accepts but the workload's head_dim cannot take.
  EXPECT_THAT(
      sweep_spec_error("[search]\nv = [\"f16\"]\n[[search.grid]]\nfamily = \"int\"\naxis = \"token\"\ngroup = 48\n"),
      HasSubstr("s.toml:3:1: K candidate 'int:bits=8,axis=token,group=48': cannot take the workload "
                "(4096 tokens, head_dim 128)"));
  EXPECT_THAT(sweep_spec_error("[search]\nk = [\"q8_0\"]\nv = [\"q4_0\"]\n[workload]\nhead_dim = 48\n"),
              HasSubstr("s.toml:2:6: K candidate 'q8_0': cannot take the workload"));
  EXPECT_THAT(sweep_spec_error("[search]\nk = [\"q8_0\"]\nv = [\"q4_0\"]\n[search.k_policy]\nrope_stage = \"pre\"\n"),
              HasSubstr("s.toml:2:6: K candidate 'q8_0:rope_stage=pre': cannot take the workload"));
}

TEST(SweepSpec, RefusesBadWorkloadsAndBudgets) {
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[workload]\ntokens = [1024, 2048]\n"),
              HasSubstr("s.toml:4:10: a sweep evaluates one context length; 'tokens' lists 2"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[budget]\nmin_needle_hit = 0.9\n"),
              HasSubstr("s.toml:4:18: 'min_needle_hit' needs needles in the workload"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[budget]\nfit = { gpu_mem = \"80GiB\" }\n"),
              HasSubstr("s.toml:4:7: 'fit' needs [workload] model"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[workload]\nmodel = \"llama-3.1-8b\"\n[budget]\n"
                               "fit = { gpu_mem = \"80 GiBs\" }\n"),
              HasSubstr("s.toml:6:19: "));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[budget]\nobjective = \"min_cost\"\n"),
              HasSubstr("s.toml:4:13: 'objective' must be one of: min_bits, min_error"));
}

TEST(SweepSpec, RefusesBadRuntimes) {
  EXPECT_THAT(sweep_spec_error("runtimes = [\"vllm\", \"llama.cpp\"]\n"),
              HasSubstr("s.toml:1:21: unknown runtime 'llama.cpp'; valid ones are: llama-cpp, lmdeploy"));
  EXPECT_THAT(sweep_spec_error("runtimes = [\"vllm@banana\"]\n"), HasSubstr("s.toml:1:13: runtime 'vllm': "));
  EXPECT_THAT(sweep_spec_error("[[runtimes]]\nname = \"llama-cpp\"\nversion = \"8700\"\n"),
              HasSubstr("s.toml:1:1: runtime 'llama-cpp': "));
  EXPECT_THAT(sweep_spec_error("runtimes = [\"vllm\", \"vllm@latest\"]\n"),
              HasSubstr("s.toml:1:21: runtime 'vllm@latest' is listed twice"));
}

TEST(SweepSpec, RefusesEmptyOrUnpairableSearches) {
  EXPECT_THAT(sweep_spec_error("name = \"x\"\n"), HasSubstr("s.toml: nothing to evaluate"));
  EXPECT_THAT(sweep_spec_error("[search]\npairing = \"zip\"\nboth = [\"q8_0\"]\n"),
              HasSubstr("s.toml:2:11: 'pairing' must be one of: cartesian, matched, independent"));
  EXPECT_THAT(sweep_spec_error("[search]\npairing = \"matched\"\nk = [\"q8_0\"]\nv = [\"q4_0\"]\n"),
              HasSubstr("s.toml:2:11: pairing \"matched\" needs candidates that are both K and V candidates"));
  EXPECT_THAT(sweep_spec_error("[search]\nk = [\"q8_0\"]\n"),
              HasSubstr("s.toml:1:1: pairing \"cartesian\" needs K and V candidates"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[search.constraints]\nexclude = [\"q8_0\"]\n"),
              HasSubstr("s.toml:4:12: 'exclude' entries must be \"KSPEC/VSPEC\""));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[search.constraints]\nexclude = [\"q8_0/q7_0\"]\n"),
              HasSubstr("s.toml:4:12: 'exclude' entry: unknown scheme 'q7_0'"));
  EXPECT_THAT(sweep_spec_error("[search]\nboth = [\"q8_0\"]\n[search.constraints]\nmax_pair_bits = 4.0\n"),
              HasSubstr("s.toml: nothing to evaluate: [search.constraints] dropped every pair"));
  EXPECT_THAT(sweep_spec_error("[search]\npairing = \"independent\"\nboth = [\"q8_0\"]\n[search.constraints]\n"
                               "k_bits_at_least_v_bits = true\n"),
              HasSubstr("s.toml:4:1: [search.constraints] apply to pairs"));
}

}  // namespace
}  // namespace kvtune

namespace kvtune {
namespace {

// Issue #13: sweep files read seeds, layers and heads with the scenario reader, so a repeated
// entry is refused here too instead of weighing one case double in every record.
TEST(SweepSpec, RefusesRepeatedSeedsLayersAndHeads) {
  EXPECT_EQ(sweep_spec_error("seeds = [1, 1]\n[workload]\ntokens = 64\nhead_dim = 64\n[search]\nboth = [\"q8_0\"]\n"),
            "s.toml:1:9: 'seeds' lists 1 twice");
  EXPECT_EQ(sweep_spec_error("[workload]\ntokens = 64\nhead_dim = 64\nkv_heads = 4\nheads = [3, 3]\n[search]\n"
                             "both = [\"q8_0\"]\n"),
            "s.toml:5:9: 'heads' lists 3 twice");
  EXPECT_EQ(sweep_spec_error("[workload]\ntokens = 64\nhead_dim = 64\nnum_layers = 4\nlayers = [0, 2, 0]\n[search]\n"
                             "both = [\"q8_0\"]\n"),
            "s.toml:5:10: 'layers' lists 0 twice");
}

// [search] exempt_layers: the counts are kept, the baseline pair joins the points once, and each
// bad value is refused with its position and the valid range.
TEST(SweepSpec, ExemptLayersAddTheBaselinePairAndAreChecked) {
  const std::string head = "[workload]\ntokens = 64\nhead_dim = 64\nnum_layers = 4\nlayers = [0, 1, 3]\n[search]\n"
                           "both = [\"q8_0\"]\n";
  const SweepSpec s = parse(head + "exempt_layers = [1, 2, 1]\n");
  EXPECT_THAT(s.exemption.counts, ElementsAre(1, 2));
  EXPECT_EQ(s.exemption.spec, "bf16");
  EXPECT_THAT(pairs_of(s), ElementsAre(std::pair<std::string, std::string>{"q8_0", "q8_0"},
                                       std::pair<std::string, std::string>{"bf16", "bf16"}));
  EXPECT_EQ(s.points.back().origin, "search: the exempt layers' dtype (exempt_layers)");
  const SweepSpec f16 = parse(head + "exempt_layers = [1]\nexempt_spec = \"f16\"\n");
  EXPECT_EQ(f16.exemption.spec, "f16");
  EXPECT_EQ(f16.points.size(), 2u);
  EXPECT_EQ(sweep_spec_error(head + "exempt_layers = [3]\n"),
            "s.toml:8:18: 'exempt_layers' entries must be integers in 1..2 (layers to exempt among the 3 sampled; one "
            "must stay quantized)");
  EXPECT_EQ(sweep_spec_error(head + "exempt_layers = []\n"),
            "s.toml:8:17: 'exempt_layers' must be a non-empty array of layer counts, e.g. [1, 2]");
  EXPECT_THAT(sweep_spec_error(head + "exempt_spec = \"f16\"\n"),
              HasSubstr("s.toml:8:15: 'exempt_spec' needs [search] exempt_layers = [N, ...]"));
  EXPECT_THAT(sweep_spec_error(head + "exempt_layers = [1]\nexempt_spec = \"q9_9\"\n"), HasSubstr("s.toml:9:15:"));
  EXPECT_EQ(
      sweep_spec_error("[workload]\ntokens = 64\nhead_dim = 64\n[search]\nboth = [\"q8_0\"]\nexempt_layers = [1]\n"),
      "s.toml:6:17: 'exempt_layers' needs at least 2 sampled layers ([workload] layers lists 1): the exempt "
      "layers are chosen among the sampled ones by their damage");
}

// exempt_sliding_window: the baseline pair is added as for exempt_layers, with or without counts;
// the workload's sliding layers decide what is derived (layer_exemption_test.cpp).
TEST(SweepSpec, ExemptSlidingWindowAddsTheBaselineAndIsChecked) {
  const std::string head = "[workload]\ntokens = 128\nhead_dim = 64\nnum_layers = 4\nlayers = [0, 1]\n"
                           "sliding_window = 64\nsliding_layers = [0, 2]\n[search]\nboth = [\"q8_0\"]\n";
  const SweepSpec s = parse(head + "exempt_sliding_window = true\nexempt_spec = \"f16\"\n");
  EXPECT_TRUE(s.exemption.sliding_window);
  EXPECT_TRUE(s.exemption.counts.empty());
  EXPECT_EQ(s.exemption.spec, "f16");
  EXPECT_THAT(pairs_of(s), ElementsAre(std::pair<std::string, std::string>{"q8_0", "q8_0"},
                                       std::pair<std::string, std::string>{"f16", "f16"}));
  EXPECT_THAT(s.scenario.workload.sliding_layers, ElementsAre(0, 2));
  EXPECT_EQ(sweep_spec_error(head + "exempt_sliding_window = \"yes\"\n"),
            "s.toml:10:25: 'exempt_sliding_window' must be true or false");
  EXPECT_FALSE(parse(head).exemption.any());
}

// A sampled sliding layer's cases hold only its window: a candidate must take that length too.
TEST(SweepSpec, CandidatesMustTakeTheWindowOfSampledSlidingLayers) {
  const std::string head = "[workload]\ntokens = 128\nhead_dim = 64\nnum_layers = 2\nlayers = [0, 1]\n"
                           "sliding_window = 8\nsliding_layers = [0]\n[search]\n";
  EXPECT_THAT(
      sweep_spec_error(head + "both = [\"int:bits=4,axis=token,residual_window=16\"]\n"),
      HasSubstr("leaves nothing to quantize in 8 tokens (the 8-token window of the sampled sliding-window layers)"));
  const SweepSpec skipped = parse(head + "skip_invalid = true\nboth = [\"q8_0\", \"int:bits=4,axis=token,residual_window=16\"]\n");
  EXPECT_EQ(skipped.points.size(), 1u);
  // Not sampled, the sliding layer does not count.
  const std::string global = "[workload]\ntokens = 128\nhead_dim = 64\nnum_layers = 2\nlayers = [1]\n"
                             "sliding_window = 8\nsliding_layers = [0]\n[search]\n";
  EXPECT_EQ(parse(global + "both = [\"int:bits=4,axis=token,residual_window=16\"]\n").points.size(), 1u);
}

}  // namespace
}  // namespace kvtune
