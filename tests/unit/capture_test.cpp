// Capture directories (docs/real-caches.md): the manifest and layer headers checked on open, a
// case read as one (sample, layer, KV head) slice with its GQA query heads, and `[workload] source
// = "cache"` in scenario files. The capture is written by tests/support/capture_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "capture_fixture.h"
#include "kvtune/capture.h"
#include "kvtune/error.h"
#include "kvtune/profile_fit.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::capture_value;

class CaptureDir : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("kvtune-capture-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  void SetUp() override { fs::remove_all(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_of(const std::map<std::string, std::string>& edit, const testing::CaptureSpec& spec = {}) {
    fs::remove_all(dir_);
    testing::write_capture(dir_, spec, edit);
    try {
      open_capture(dir_.string());
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(CaptureDir, ACaseIsOneSampleLayerAndHeadWithItsQueryHeads) {
  testing::write_capture(dir_);
  const Capture c = open_capture(dir_.string());
  EXPECT_EQ(c.model, "test/stand-in");
  EXPECT_EQ(c.layers, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(c.q_per_kv(), 2);
  ASSERT_EQ(c.samples.size(), 2u);
  EXPECT_EQ(c.samples[1].first, 96);

  // Sample "b" (tokens 96..159 of the files), layer 2, KV head 1: query heads 2 and 3.
  const Case whole = capture_case(c, 1, 2, 1);
  ASSERT_EQ(whole.keys.rows(), 64);
  EXPECT_EQ(whole.keys(0, 0), capture_value(0, 2, 1, 96, 0));
  EXPECT_EQ(whole.keys(63, 31), capture_value(0, 2, 1, 159, 31));
  EXPECT_EQ(whole.values(5, 7), capture_value(1, 2, 1, 101, 7));
  ASSERT_EQ(whole.queries.rows(), 2);
  // The query at position 63 is sample b's last captured row: row 8 + 7 = 15 of q.
  EXPECT_EQ(whole.query_position, 63);
  EXPECT_EQ(whole.queries(0, 3), capture_value(2, 2, 2, 15, 3));
  EXPECT_EQ(whole.queries(1, 3), capture_value(2, 2, 3, 15, 3));
  EXPECT_EQ(whole.positions.back(), 63);
  EXPECT_EQ(whole.layer, 2);
  EXPECT_EQ(whole.kv_head, 1);

  // A prefix that ends where a query was captured (position 58 of sample a is row 2): that query.
  const Case prefix = capture_case(c, 0, 0, 0, 91);
  EXPECT_EQ(prefix.keys.rows(), 91);
  EXPECT_EQ(prefix.query_position, 90);
  EXPECT_EQ(prefix.queries(0, 0), capture_value(2, 0, 0, 2, 0));
  // A shorter prefix: the earliest captured query (position 88 of sample a).
  const Case early = capture_case(c, 0, 0, 0, 40);
  EXPECT_EQ(early.query_position, 88);
  EXPECT_EQ(early.queries(1, 0), capture_value(2, 0, 1, 0, 0));

  EXPECT_THAT(testing::input_error([&] { capture_case(c, 0, 1, 0); }), HasSubstr("layer 1 was not captured"));
  EXPECT_THAT(testing::input_error([&] { capture_case(c, 2, 0, 0); }), HasSubstr("sample 2 is outside the capture's 2 samples"));
  EXPECT_THAT(testing::input_error([&] { capture_case(c, 1, 0, 0, 65); }), HasSubstr("sample 'b' has 64 tokens"));
}

// Each disagreement names the file and what disagrees.
TEST_F(CaptureDir, RefusesCapturesThatDisagreeWithThemselves) {
  EXPECT_THAT(testing::input_error([&] { open_capture((dir_ / "none").string()); }),
              HasSubstr("not a capture directory (no manifest.json; the directory does not exist)"));
  EXPECT_THAT(error_of({{"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 1"}}),
              HasSubstr("layer_000.safetensors: tensor 'k' has shape [2, 160, 32], the manifest says [1, 160, 32]"));
  EXPECT_THAT(error_of({{"\"num_key_value_heads\": 2", "\"num_key_value_heads\": 3"}}),
              HasSubstr("num_attention_heads 4 is not a multiple of num_key_value_heads 3"));
  EXPECT_THAT(error_of({{"\"tokens\": 64", "\"tokens\": 65"}}), HasSubstr("tensor 'k' has shape [2, 160, 32], the manifest says [2, 161, 32]"));
  EXPECT_THAT(error_of({{"\"tokens\": 64", "\"tokens\": 0"}}), HasSubstr("samples[1]: 'tokens' must be in 1..1099511627776 (found 0)"));
  // Bounds that keep later allocations sane, stated as bounds (not "at least 1" for a huge number).
  EXPECT_THAT(error_of({{"\"tokens\": 64", "\"tokens\": 4611686018427387904"}}),
              HasSubstr("samples[1]: 'tokens' must be in 1..1099511627776 (found 4611686018427387904)"));
  EXPECT_THAT(error_of({{"\"num_hidden_layers\": 4", "\"num_hidden_layers\": 1099511627776"}}),
              HasSubstr("config: 'num_hidden_layers' must be in 1..4096"));
  EXPECT_THAT(error_of({{"\"rope_theta\": 10000.0", "\"rope_theta\": -1"}}),
              HasSubstr("'rope_theta' must be a positive number or null"));
  EXPECT_THAT(error_of({{"\"layer_002.safetensors\"", "\".\""}}),
              HasSubstr("layer_files[1] must be a file name in the capture directory"));
  EXPECT_THAT(error_of({{"\"layer_002.safetensors\"", "\"..\""}}),
              HasSubstr("layer_files[1] must be a file name in the capture directory"));
  EXPECT_THAT(error_of({{"\"tokens\": 64", "\"tokens\": 4"}}), HasSubstr("samples[1] ('b') has 4 tokens, fewer than queries_per_sample 8"));
  EXPECT_THAT(error_of({{"\"samples\": [{\"name\": \"a\", \"tokens\": 96}, {\"name\": \"b\", \"tokens\": 64}]", "\"samples\": []"}}),
              HasSubstr("'samples' is empty"));
  EXPECT_THAT(error_of({{"layer_002.safetensors", "layer_009.safetensors"}}), HasSubstr("layer_009.safetensors: missing (the manifest lists it)"));
  EXPECT_THAT(error_of({{"\"layers\": [0, 2]", "\"layers\": [2, 0]"}}), HasSubstr("'layers' must be ascending"));
  EXPECT_THAT(error_of({{"\"layers\": [0, 2]", "\"layers\": [0, 4]"}}), HasSubstr("layers[1] must be a layer index in 0..3"));
  EXPECT_THAT(error_of({{"\"version\": 1", "\"version\": 2"}}), HasSubstr("capture format version 2"));
  EXPECT_THAT(error_of({{"\"dtype\": \"float16\"", "\"dtype\": \"bfloat16\""}}), HasSubstr("tensor 'k' is F16, the manifest says BF16"));
  EXPECT_THAT(error_of({{"\"rope_convention\": \"rotate_half\"", "\"rope_convention\": \"neox\""}}), HasSubstr("'rope_convention' must be"));
  EXPECT_THAT(error_of({{"{\n  \"format\"", "[\n  \"format\""}}), HasSubstr("manifest.json: not valid JSON"));
  // A number past double's range (found by fuzz/fuzz_capture_manifest.cpp: nlohmann throws
  // out_of_range, not parse_error, for it).
  EXPECT_THAT(error_of({{"\"rope_theta\": 10000.0", "\"rope_theta\": 1e999999"}}), HasSubstr("manifest.json: not valid JSON"));
}

// Gemma's query_pre_attn_scalar S: the model's logit is q · k / sqrt(S), so the case's queries are
// multiplied by sqrt(head_dim / S) (head_dim 32, S 128: exactly one half) and kvtune's q · k /
// sqrt(head_dim) is that logit; attn_logit_softcapping reaches the case and the workload. Both are
// optional (null or absent: head_dim and no cap), and a non-positive one is refused at the key.
TEST_F(CaptureDir, ALogitScaleAndSoftcapReachTheCases) {
  testing::write_capture(dir_);
  const Case plain = capture_case(open_capture(dir_.string()), 1, 2, 1);
  fs::remove_all(dir_);
  testing::write_capture(dir_, {}, {{"\"rope_scaling\": null", "\"rope_scaling\": null, \"query_pre_attn_scalar\": 128.0, "
                                                                "\"attn_logit_softcapping\": 50.0"}});
  const Capture gemma = open_capture(dir_.string());
  EXPECT_EQ(gemma.query_pre_attn_scalar, 128.0);
  EXPECT_EQ(capture_query_factor(gemma), 0.5);
  EXPECT_EQ(capture_shape(gemma).logit_softcap, 50.0);
  const Case scaled = capture_case(gemma, 1, 2, 1);
  EXPECT_EQ(scaled.logit_softcap, 50.0);
  EXPECT_EQ(plain.logit_softcap, 0.0);
  for (int64_t e = 0; e < 32; ++e) EXPECT_EQ(scaled.queries(1, e), 0.5f * plain.queries(1, e)) << e;
  EXPECT_EQ(scaled.keys(7, 3), plain.keys(7, 3));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": null, \"query_pre_attn_scalar\": 0"}}),
              HasSubstr("config: 'query_pre_attn_scalar' must be a positive number or null"));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": null, \"attn_logit_softcapping\": \"50\""}}),
              HasSubstr("config: 'attn_logit_softcapping' must be a positive number or null"));
}

// The checkpoint's class reaches the capture's model, where the runtime tables' rules read it.
TEST_F(CaptureDir, TheArchitectureReachesTheCapturesModel) {
  testing::write_capture(dir_);
  EXPECT_EQ(capture_model(open_capture(dir_.string())).architecture, "");  // a manifest without one
  fs::remove_all(dir_);
  const std::string vl = "\"rope_scaling\": null, \"architecture\": \"Gemma3ForConditionalGeneration\"";
  testing::write_capture(dir_, {}, {{"\"rope_scaling\": null", vl}});
  EXPECT_EQ(capture_model(open_capture(dir_.string())).architecture, "Gemma3ForConditionalGeneration");
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": null, \"architecture\": \"\""}}),
              HasSubstr("config: 'architecture' must be a class name or null, not empty"));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": null, \"architecture\": [\"A\"]"}}),
              HasSubstr("config: 'architecture' must be"));
}

// rope_scaling as the capture tool writes it (the config's, "rope_type" or the older "type"): linear
// and llama3 are read back for inverse RoPE; a type kvtune does not reproduce leaves RoPE off, as an
// unknown convention does, and says which; bad parameters are refused at the key.
TEST_F(CaptureDir, RopeScalingIsReadBackOrNamedAsNotReproduced) {
  auto open_with = [&](const std::string& scaling) {
    fs::remove_all(dir_);
    testing::write_capture(dir_, {}, {{"\"rope_scaling\": null", "\"rope_scaling\": " + scaling}});
    return open_capture(dir_.string());
  };
  const Capture llama3 = open_with(
      "{\"rope_type\": \"llama3\", \"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": 4.0, "
      "\"original_max_position_embeddings\": 8192}");
  EXPECT_EQ(llama3.rope.scaling, (RopeScaling{RopeScalingType::llama3, 8.0, 1.0, 4.0, 8192.0}));
  EXPECT_TRUE(llama3.rope.enabled);
  EXPECT_EQ(llama3.rope_unmodelled, "");
  const Capture linear = open_with("{\"type\": \"linear\", \"factor\": 2.0}");
  EXPECT_EQ(linear.rope.scaling.type, RopeScalingType::linear);
  EXPECT_EQ(linear.rope.scaling.factor, 2.0);
  EXPECT_EQ(open_with("{\"rope_type\": \"default\"}").rope.scaling.type, RopeScalingType::none);
  const Capture yarn =
      open_with("{\"rope_type\": \"yarn\", \"factor\": 4.0, \"original_max_position_embeddings\": 32768}");
  EXPECT_FALSE(yarn.rope.enabled);
  EXPECT_EQ(yarn.rope_unmodelled, "yarn");
  const FittedProfile as_cached = fit_profile(yarn);
  EXPECT_FALSE(as_cached.keys_derotated);
  EXPECT_THAT(profile_toml(as_cached, "p"),
              HasSubstr("kvtune cannot undo its RoPE (its rope_scaling (yarn) is not reproduced): the keys were measured "
                        "as cached, after RoPE"));
  EXPECT_TRUE(yarn.rope_unknown);
  // Without a rope_theta there is no RoPE to undo (ALiBi, NoPE): nothing is said.
  fs::remove_all(dir_);
  testing::write_capture(dir_, {}, {{"\"rope_theta\": 10000.0", "\"rope_theta\": null"}});
  const Capture no_rope = open_capture(dir_.string());
  EXPECT_FALSE(no_rope.rope_unknown);
  const FittedProfile plain = fit_profile(no_rope);
  EXPECT_FALSE(plain.keys_as_cached);
  EXPECT_THAT(profile_toml(plain, "p"), ::testing::Not(HasSubstr("cannot undo")));
  EXPECT_THAT(profile_toml(fit_profile(llama3), "p"),
              HasSubstr("recovered by inverse RoPE (theta 1e+04, rope_scaling llama3 factor 8.0)."));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": \"llama3\""}}),
              HasSubstr("config: 'rope_scaling' must be an object"));
  // transformers 5's per-layer-type rope_parameters (Gemma 3): not reproduced, not refused.
  const Capture per_type = open_with(
      "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}, "
      "\"sliding_attention\": {\"rope_type\": \"chunked\"}}");
  EXPECT_TRUE(per_type.rope_unknown);
  EXPECT_EQ(per_type.rope_unmodelled, "per layer type");
  EXPECT_EQ(open_with("{\"chunked_attention\": {\"rope_type\": \"default\"}}").rope_unmodelled, "per layer type");
  EXPECT_EQ(open_with("{\"full_attention\": {\"factor\": 8.0}}").rope_unmodelled, "per layer type");
  // transformers 5 keeps the base inside rope_parameters too: no rope_theta, still RoPE.
  fs::remove_all(dir_);
  testing::write_capture(dir_, {},
                         {{"\"rope_theta\": 10000.0", "\"rope_theta\": null"},
                          {"\"rope_scaling\": null", "\"rope_scaling\": {\"full_attention\": {\"rope_type\": \"default\"}}"}});
  EXPECT_TRUE(open_capture(dir_.string()).rope_unknown);
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": 3}"}}),
              HasSubstr("config.rope_scaling: 'rope_type' must be a string"));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"llama3\", \"factor\": 8.0}"}}),
              HasSubstr("config.rope_scaling: no 'low_freq_factor'"));
  EXPECT_THAT(error_of({{"\"rope_scaling\": null", "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 0.5}"}}),
              HasSubstr("config.rope_scaling: rope_scaling 'linear': 'factor' must be in [1, 1e6]"));
}

// A directory where a file belongs is named as such (it was an internal error for the manifest, and an
// unchecked read of the layer file's header length).
TEST_F(CaptureDir, RefusesDirectoriesWhereFilesBelong) {
  testing::write_capture(dir_);
  fs::remove(dir_ / "layer_002.safetensors");
  fs::create_directory(dir_ / "layer_002.safetensors");
  EXPECT_THAT(testing::input_error([&] { open_capture(dir_.string()); }),
              HasSubstr("layer_002.safetensors: is a directory, expected a safetensors file"));
  fs::remove(dir_ / "manifest.json");
  fs::create_directory(dir_ / "manifest.json");
  EXPECT_THAT(testing::input_error([&] { open_capture(dir_.string()); }),
              HasSubstr("manifest.json: is a directory, expected a file"));
}

// `kvtune profile` on a capture with a layer of zero keys: refused, naming the layer, not a profile
// with NaN in it that kvtune's own reader then refuses.
TEST_F(CaptureDir, AProfileRefusesALayerOfZeroKeys) {
  testing::CaptureSpec spec;
  spec.zero_keys_layer = 2;
  testing::write_capture(dir_, spec);
  const Capture c = open_capture(dir_.string());
  ProfileFitOptions o;
  o.layers = {0};
  EXPECT_NO_THROW(fit_profile(c, o));
  o.layers = {0, 2};
  EXPECT_THAT(testing::input_error([&] { fit_profile(c, o); }),
              HasSubstr("layer_002.safetensors: layer 2, KV head 0, sample 'a': most of its keys are zero rows"));
}

// A sample or layer given twice would weigh twice in a fit: refused, by index.
TEST_F(CaptureDir, FitsRefuseASampleOrLayerGivenTwice) {
  testing::write_capture(dir_);
  const Capture c = open_capture(dir_.string());
  EXPECT_EQ(capture_samples(c, {}), (std::vector<int64_t>{0, 1}));
  EXPECT_THAT(testing::input_error([&] { capture_samples(c, {1, 0, 1}); }), HasSubstr(": sample 1 is given twice"));
  EXPECT_THAT(testing::input_error([&] { capture_samples(c, {2}); }),
              HasSubstr(": sample 2 is outside the capture's 2 samples"));
  ProfileFitOptions o;
  o.layers = {0, 0};
  EXPECT_THAT(testing::input_error([&] { fit_profile(c, o); }), HasSubstr(": layer 0 is given twice"));
}

Scenario cache_scenario(const fs::path& dir, const std::string& workload) {
  const std::string text = "[workload]\nsource = \"cache\"\npath = \"cap\"\n" + workload +
                           "[[pairs]]\nk = \"f16\"\nv = \"f16\"\n[[pairs]]\nk = \"q4_0\"\nv = \"q8_0\"\n";
  return parse_scenario(text, (dir / "s.toml").string());
}

TEST_F(CaptureDir, AScenarioReadsItsCasesFromACapture) {
  testing::write_capture(dir_ / "cap");
  const Scenario sc = cache_scenario(dir_, "");
  ASSERT_TRUE(sc.capture.has_value());
  EXPECT_EQ(sc.layers, (std::vector<int64_t>{0, 2}));    // the captured layers
  EXPECT_EQ(sc.heads, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(sc.seeds, (std::vector<uint64_t>{0, 1}));    // the samples
  EXPECT_EQ(sc.contexts, (std::vector<int64_t>{0}));     // each sample whole
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);
  EXPECT_EQ(r.cases, 8);             // 2 samples x 2 layers x 2 heads
  EXPECT_EQ(r.queries_per_case, 2);  // one query per query head of the group
  EXPECT_LT(r.pairs[0].summary(Metric::rel_out_err).mean, 1e-3);  // f16 of f16 values: exact up to the float64 reference
  EXPECT_GT(r.pairs[1].summary(Metric::rel_out_err).mean, r.pairs[0].summary(Metric::rel_out_err).mean);

  const Scenario picked = cache_scenario(dir_, "layers = [2]\nheads = [1]\nsamples = [1]\ntokens = [32, 64]\n");
  EXPECT_EQ(picked.contexts, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(evaluate_scenario(picked, builtin_registry()).size(), 2u);

  auto error = [&](const std::string& w) { return testing::input_error([&] { cache_scenario(dir_, w); }); };
  EXPECT_THAT(error("layers = [1]\n"), HasSubstr("s.toml:4:10: layer 1 was not captured (the capture has layers 0, 2)"));
  EXPECT_THAT(error("tokens = 65\n"), HasSubstr("a prefix of 65 tokens is longer than the shortest selected sample (64 tokens)"));
  EXPECT_THAT(error("samples = [2]\n"), HasSubstr("'samples' entries must be integers in 0..1"));
  EXPECT_THAT(error("[workload.keys]\noutlier_count = 2\n"), HasSubstr("'keys' describes a synthetic workload"));
  EXPECT_THAT(error("model = \"llama-3.1-8b\"\n"), HasSubstr("'model' describes a synthetic workload"));
  EXPECT_THAT(testing::input_error([&] {
                parse_scenario("[workload]\nsource = \"cache\"\npath = \"nope\"\n[[pairs]]\nk = \"f16\"\nv = \"f16\"\n",
                               (dir_ / "s.toml").string());
              }),
              HasSubstr("s.toml:3:8:"));
  EXPECT_THAT(testing::input_error([&] {
                parse_scenario("[workload]\nsamples = [0]\n[[pairs]]\nk = \"f16\"\nv = \"f16\"\n", "s.toml");
              }),
              HasSubstr("'samples' is for source = \"cache\""));
}

// Needles go into a capture's keys as into a synthetic case's: each query row's needle holds the
// stated share of its reference attention, never on the first token (the model's sink).
TEST_F(CaptureDir, NeedlesArePlantedIntoTheRealKeys) {
  testing::write_capture(dir_ / "cap");
  const Scenario sc = cache_scenario(dir_, "[workload.needles]\ndepths = [0.0, 0.5]\nmass = 0.6\n");
  const Case c = scenario_case(sc, scenario_cases(sc).front(), 0);
  ASSERT_EQ(c.needles.size(), 2u);  // one per query row (2 query heads), depths alternating
  EXPECT_EQ(c.needles[0].token, 1);  // depth 0 moves past the protected first token
  EXPECT_EQ(c.needles[1].token, 48);  // depth 0.5 of 96 tokens: round(0.5 * 95)
  for (const Needle& n : c.needles) {
    const float* q = c.queries.row(n.query);
    std::vector<double> l(size_t(c.keys.rows()));
    double mx = -INFINITY;
    for (int64_t j = 0; j < c.keys.rows(); ++j) {
      double d = 0.0;
      for (int64_t e = 0; e < c.keys.cols(); ++e) d += double(q[e]) * c.keys(j, e);
      mx = std::max(mx, l[j] = d / std::sqrt(double(c.keys.cols())));
    }
    double z = 0.0;
    for (double v : l) z += std::exp(v - mx);
    EXPECT_NEAR(std::exp(l[n.token] - mx) / z, 0.6, 1e-4) << "query row " << n.query;
  }
  const EvalResult r = evaluate_scenario(sc, builtin_registry()).at(0);
  EXPECT_EQ(r.pairs[0].samples[size_t(Metric::needle_hit)].size(), 16u);  // 8 cases x 2 rows
  EXPECT_EQ(r.pairs[0].summary(Metric::needle_hit).mean, 1.0);
  EXPECT_THAT(testing::input_error([&] { cache_scenario(dir_, "tokens = 2\n[workload.needles]\ndepths = [0.5]\n"); }),
              HasSubstr("1 needle(s) per query need 3 tokens; the cases have 2"));
  // The capture's samples are its cases: a top-level seeds list has nothing to select.
  EXPECT_THAT(testing::input_error([&] {
                parse_scenario("seeds = 2\n[workload]\nsource = \"cache\"\npath = \"cap\"\n[[pairs]]\nk = \"f16\"\nv = \"f16\"\n",
                               (dir_ / "s.toml").string());
              }),
              HasSubstr("s.toml:1:9: a capture's cases are its samples"));
}

// A sliding layer of the capture attends to its last sliding_window tokens: its case keeps those
// rows (with their positions and the same query); the other captured layer keeps the whole prefix.
TEST_F(CaptureDir, ASlidingLayerKeepsTheLastWindowOfThePrefix) {
  testing::write_capture(dir_, {}, {{"\"rope_convention\": \"rotate_half\"}",
                                     "\"rope_convention\": \"rotate_half\", \"sliding_window\": 16, "
                                     "\"sliding_layers\": [2]}"}});
  const Capture c = open_capture(dir_.string());
  const Case windowed = capture_case(c, 1, 2, 1);  // sample b: tokens 96..159 of the files
  ASSERT_EQ(windowed.keys.rows(), 16);
  EXPECT_EQ(windowed.keys(0, 0), capture_value(0, 2, 1, 96 + 48, 0));
  EXPECT_EQ(windowed.values(15, 7), capture_value(1, 2, 1, 159, 7));
  EXPECT_EQ(windowed.positions.front(), 48);
  EXPECT_EQ(windowed.query_position, 63);
  EXPECT_EQ(windowed.queries(0, 3), capture_value(2, 2, 2, 15, 3));
  EXPECT_EQ(capture_case(c, 1, 0, 1).keys.rows(), 64);  // layer 0 does not slide
  EXPECT_EQ(capture_case(c, 1, 2, 1, 12).keys.rows(), 12);  // a prefix inside the window is whole
}

// Gemma 3's RoPE per layer type (transformers 5's rope_parameters, each type with its own base; the
// capture tool writes 4.x's Gemma 3 with the global base outside): the full layers' type and base
// become the capture's RoPE, the plain sliding layers' base their own, so inverse RoPE turns each
// captured layer back by the base that turned it.
TEST_F(CaptureDir, GemmaThreesRopePerLayerTypeIsReadBackPerLayer) {
  const std::string sliding = "\"rope_convention\": \"rotate_half\", \"sliding_window\": 16, \"sliding_layers\": [0]}";
  for (const auto& [theta, per_type] :
       {std::pair<std::string, std::string>{"null", "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0, "
                                                    "\"rope_theta\": 1000000.0}, \"sliding_attention\": "
                                                    "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}}"},
        {"1000000.0", "{\"full_attention\": {\"rope_type\": \"linear\", \"factor\": 8.0}, \"sliding_attention\": "
                      "{\"rope_type\": \"default\", \"rope_theta\": 10000.0}}"}}) {
    fs::remove_all(dir_);
    testing::write_capture(dir_, {},
                           {{"\"rope_theta\": 10000.0", "\"rope_theta\": " + theta},
                            {"\"rope_scaling\": null", "\"rope_scaling\": " + per_type},
                            {"\"rope_convention\": \"rotate_half\"}", sliding}});
    const Capture c = open_capture(dir_.string());
    EXPECT_FALSE(c.rope_unknown) << theta;
    EXPECT_TRUE(c.rope.enabled) << theta;
    EXPECT_EQ(c.rope.theta, 1e6) << theta;
    EXPECT_EQ(c.rope.scaling, (RopeScaling{RopeScalingType::linear, 8.0})) << theta;
    EXPECT_EQ(c.sliding_rope_theta, 1e4) << theta;
    const RopeConfig local = capture_layer_rope(c, 0), global = capture_layer_rope(c, 2);
    EXPECT_EQ(local.theta, 1e4);
    EXPECT_EQ(local.scaling.type, RopeScalingType::none);
    EXPECT_EQ(global.theta, 1e6);
    EXPECT_EQ(global.scaling.type, RopeScalingType::linear);
    EXPECT_EQ(capture_shape(c).sliding_rope_theta, 1e4);
    EXPECT_EQ(capture_model(c).sliding_rope_theta, 1e4);
    EXPECT_THAT(profile_toml(fit_profile(c), "p"), HasSubstr("rope_scaling linear factor 8.0; the sliding layers' theta 1e+04)."));
  }
  // One typed rope_scaling with its base inside (transformers 5's flat rope_parameters).
  fs::remove_all(dir_);
  testing::write_capture(dir_, {}, {{"\"rope_theta\": 10000.0", "\"rope_theta\": null"},
                                    {"\"rope_scaling\": null",
                                     "\"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2.0, \"rope_theta\": 500000.0}"}});
  const Capture flat = open_capture(dir_.string());
  EXPECT_TRUE(flat.rope.enabled);
  EXPECT_EQ(flat.rope.theta, 5e5);
  EXPECT_EQ(flat.rope.scaling, (RopeScaling{RopeScalingType::linear, 2.0}));
  // A sliding layer's scaling, or no base anywhere, is not reproduced.
  fs::remove_all(dir_);
  testing::write_capture(dir_, {}, {{"\"rope_scaling\": null",
                                     "\"rope_scaling\": {\"sliding_attention\": {\"rope_type\": \"linear\", \"factor\": 2.0}}"}});
  EXPECT_EQ(open_capture(dir_.string()).rope_unmodelled, "per layer type");
}

// The captured model as a preset: the shape the memory model needs, from the manifest.
TEST_F(CaptureDir, TheCapturedModelGivesTheMemoryShape) {
  testing::write_capture(dir_ / "cap", {}, {{"\"rope_convention\": \"rotate_half\"}",
                                             "\"rope_convention\": \"rotate_half\", \"sliding_window\": 16, "
                                             "\"sliding_layers\": [1, 3]}"}});
  const ModelPreset p = capture_model(open_capture((dir_ / "cap").string()));
  EXPECT_EQ(p.name, "test/stand-in");
  EXPECT_EQ(p.shape.layers, 4);
  EXPECT_EQ(p.shape.kv_heads, 2);
  EXPECT_EQ(p.shape.head_dim, 32);
  EXPECT_EQ(p.shape.sliding_window, 16);
  EXPECT_EQ(p.shape.sliding_layers, 2);
  EXPECT_EQ(p.q_heads, 4);
  EXPECT_THAT(error_of({{"\"rope_convention\": \"rotate_half\"}",
                        "\"rope_convention\": \"rotate_half\", \"sliding_window\": 16, \"sliding_layers\": [7]}"}}),
              HasSubstr("config: 'sliding_layers' must hold layer indices in 0..3"));
  EXPECT_THAT(error_of({{"\"rope_convention\": \"rotate_half\"}", "\"rope_convention\": \"rotate_half\", \"sliding_layers\": [1]}"}}),
              HasSubstr("'sliding_layers' are given but 'sliding_window' is null"));
}

}  // namespace
}  // namespace kvtune
