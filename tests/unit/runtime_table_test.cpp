// Runtime capability tables (configs/runtimes/*.toml): every shipped file loads, versions select the
// right options, and bad data fails with file:line:column.
#include "kvtune/runtime_table.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>

#include "kvtune/error.h"
#include "kvtune/model_preset.h"
#include "runtime_table_support.h"
#include "test_support.h"

namespace kvtune {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

using testing::any_contains;
using testing::config_dir;
using testing::find;
using testing::has;
using testing::shipped;

// The message of the InputError that parsing `text` throws (empty when it parses).
std::string parse_error(const std::string& text) {
  try {
    parse_runtime_table(text, "rt.toml", "rt", builtin_registry());
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

const std::string kJointHeader =
    "name = \"R\"\nsource = \"https://example.org\"\nversion_scheme = \"semver\"\nkv_independent = false\n";
// One option to check entries against, and one with a CLI flag and a Python call that entries join.
const std::string kF16Option = "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\n";
const std::string kFp8Option = R"toml([[options]]
name = "fp8"
k = "fp8"
v = "fp8"
cli = ["--kv-cache-dtype fp8"]
python = "LLM(model=..., kv_cache_dtype=\"fp8\")"
)toml";

TEST(RuntimeTable, EveryShippedTableLoadsAndEverySpecResolves) {
  const std::vector<RuntimeTable> tables = load_runtime_tables(config_dir(), builtin_registry());
  std::set<std::string> names;
  for (const RuntimeTable& t : tables) {
    names.insert(t.name);
    const RuntimeView view = runtime_options(t, "latest");
    EXPECT_FALSE(view.options.empty()) << t.name;
    for (const RuntimeOption& o : view.options) {
      // Specs are stored canonical, so they read back unchanged.
      EXPECT_EQ(builtin_registry().make(o.k_spec)->spec(), o.k_spec) << t.name << ": " << o.name;
      EXPECT_EQ(builtin_registry().make(o.v_spec)->spec(), o.v_spec) << t.name << ": " << o.name;
      EXPECT_FALSE(o.settings.cli.empty() && o.settings.env.empty() && o.settings.python.empty())
          << t.name << ": " << o.name << " says nothing the user can set";
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"llama-cpp", "lmdeploy", "ollama", "sglang", "tensorrt-llm", "transformers",
                                          "vllm"}));
}

TEST(RuntimeTable, LlamaCppRotatesQuantizedTypesFromTheRotationBuild) {
  const RuntimeTable t = shipped("llama-cpp");
  ASSERT_TRUE(t.kv_independent);

  const RuntimeView before = runtime_options(t, "b8000");
  EXPECT_EQ(before.options.size(), 81u);  // 9 K types x 9 V types, one profile
  const RuntimeOption* old_pair = find(before, "q8_0/q4_0 (unrotated)");
  ASSERT_NE(old_pair, nullptr);
  EXPECT_EQ(old_pair->k_spec, "q8_0");
  EXPECT_EQ(old_pair->v_spec, "q4_0");
  EXPECT_EQ(find(before, "q8_0/q4_0 (rotated)"), nullptr);

  const RuntimeView after = runtime_options(t, "b8619");
  EXPECT_EQ(after.options.size(), 162u);  // rotated by default, and with LLAMA_ATTN_ROT_DISABLE=1
  const RuntimeOption* rotated = find(after, "q8_0/q4_0 (rotated)");
  ASSERT_NE(rotated, nullptr);
  EXPECT_EQ(rotated->k_spec, "q8_0:rotation=hadamard");
  EXPECT_EQ(rotated->v_spec, "q4_0:rotation=hadamard");
  EXPECT_TRUE(rotated->settings.env.empty());
  const RuntimeOption* disabled = find(after, "q8_0/q4_0 (rotation disabled)");
  ASSERT_NE(disabled, nullptr);
  EXPECT_EQ(disabled->k_spec, "q8_0");
  EXPECT_TRUE(has(disabled->settings.env, "LLAMA_ATTN_ROT_DISABLE=1"));
  // Unquantized types are never rotated.
  EXPECT_EQ(find(after, "f16/f16 (rotated)")->k_spec, "f16");
  EXPECT_EQ(runtime_options(t, "latest").options.size(), 162u);
}

TEST(RuntimeTable, LlamaCppPairRulesFlagFlashAttentionAndCudaBuilds) {
  const RuntimeView v = runtime_options(shipped("llama-cpp"), "b8619");
  const RuntimeOption* f16 = find(v, "f16/f16 (rotated)");
  EXPECT_FALSE(f16->settings.needs_flash_attention);
  EXPECT_TRUE(f16->settings.build.empty());

  const RuntimeOption* q8 = find(v, "q8_0/q8_0 (rotated)");
  EXPECT_TRUE(q8->settings.needs_flash_attention);  // a quantized V needs flash attention
  EXPECT_TRUE(has(q8->settings.cli, "-ctk q8_0"));
  EXPECT_TRUE(has(q8->settings.cli, "-ctv q8_0"));
  EXPECT_TRUE(has(q8->settings.cli, "-fa on"));
  EXPECT_TRUE(q8->settings.build.empty());  // a default CUDA build has this pair

  const RuntimeOption* q41 = find(v, "q4_1/q4_1 (rotated)");
  EXPECT_TRUE(any_contains(q41->settings.build, "GGML_CUDA_FA_ALL_QUANTS=ON"));
  const RuntimeOption* mixed = find(v, "q8_0/q5_0 (rotated)");
  EXPECT_TRUE(any_contains(mixed->settings.build, "GGML_CUDA_FA_ALL_QUANTS=ON"));
  const RuntimeOption* kquant_vf16 = find(v, "q4_1/f16 (rotated)");
  EXPECT_FALSE(kquant_vf16->settings.needs_flash_attention);  // only V forces flash attention
  EXPECT_TRUE(kquant_vf16->settings.build.empty());

  EXPECT_TRUE(any_contains(find(v, "q8_0/iq4_nl (rotated)")->settings.unsupported, "any build"));
  EXPECT_TRUE(any_contains(find(v, "iq4_nl/q8_0 (rotated)")->settings.unsupported, "any build"));
  EXPECT_FALSE(any_contains(find(v, "iq4_nl/f16 (rotated)")->settings.unsupported, "any build"));
}

TEST(RuntimeTable, VllmCalculateKvScalesOnlyWhereTheFlagExists) {
  const RuntimeTable t = shipped("vllm");
  ASSERT_FALSE(t.kv_independent);
  const RuntimeView old_view = runtime_options(t, "0.11.2");
  const RuntimeOption* calc = find(old_view, "fp8 (e4m3), --calculate-kv-scales");
  ASSERT_NE(calc, nullptr);
  EXPECT_TRUE(has(calc->settings.cli, "--calculate-kv-scales"));
  EXPECT_FALSE(calc->settings.verified);  // the removal release is an assumption, and says so
  EXPECT_EQ(find(old_view, "fp8_per_token_head"), nullptr);

  const RuntimeView new_view = runtime_options(t, "0.28.0");
  EXPECT_EQ(find(new_view, "fp8 (e4m3), --calculate-kv-scales"), nullptr);
  ASSERT_NE(find(new_view, "fp8_per_token_head"), nullptr);
  EXPECT_EQ(find(new_view, "fp8_per_token_head")->k_spec, "fp8:format=e4m3,scale=dynamic,granularity=token");
  EXPECT_EQ(find(new_view, "fp8 (e4m3), no checkpoint scales")->k_spec, "fp8:format=e4m3,scale=unit");
  EXPECT_EQ(find(new_view, "fp8 (e4m3), checkpoint scales")->v_spec, "fp8:format=e4m3,scale=calibrated");
  EXPECT_FALSE(new_view.beyond_checked);
  EXPECT_FALSE(new_view.not_emulated.empty());

  EXPECT_TRUE(runtime_options(t, "0.29.1").beyond_checked);
  EXPECT_EQ(runtime_options(t, "latest").version, "0.28.0");
  try {
    runtime_options(t, "0.10.0");
    FAIL() << "a version older than the table covers was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("older than this table covers (0.11.2 and later)"));
  }
  try {
    runtime_options(t, "0.x");
    FAIL() << "a malformed version was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("vLLM version '0.x' is not valid"));
  }
}

TEST(RuntimeTable, VersionsCompareNumerically) {
  EXPECT_LT(compare_runtime_versions("build", "b999", "b1000"), 0);
  EXPECT_LT(compare_runtime_versions("semver", "0.9.2", "0.10.0"), 0);
  EXPECT_EQ(compare_runtime_versions("semver", "0.11", "v0.11.0"), 0);
  EXPECT_LT(compare_runtime_versions("semver", "1.3.0rc27", "1.3.0"), 0);
  EXPECT_LT(compare_runtime_versions("semver", "1.3.0rc4", "1.3.0rc27"), 0);
  EXPECT_EQ(compare_runtime_versions("semver", "v0.30.0-rc0", "0.30.0rc0"), 0);  // a git tag's spelling
  EXPECT_LT(compare_runtime_versions("semver", "0.30.0-rc2", "0.30.0"), 0);
  EXPECT_THROW(compare_runtime_versions("semver", "0.30.0--rc2", "0.30.0"), InputError);
  EXPECT_THROW(compare_runtime_versions("build", "8607", "b1"), InputError);
  EXPECT_THROW(compare_runtime_versions("semver", "1.2.3.4.5", "1"), InputError);
  // PEP 440 post releases (SGLang's v0.5.15.post1) come after their release and before the next.
  EXPECT_LT(compare_runtime_versions("semver", "0.5.15", "0.5.15.post1"), 0);
  EXPECT_LT(compare_runtime_versions("semver", "0.5.15.post1", "v0.5.15.post2"), 0);
  EXPECT_LT(compare_runtime_versions("semver", "0.5.15.post1", "0.5.16rc0"), 0);
  EXPECT_EQ(compare_runtime_versions("semver", "0.5.15-post1", "0.5.15post1"), 0);
  for (const char* bad : {"0.5.15.post", "0.5.15.postx", "0.5.15..post1", "1.0rc1.post1", "post1"}) {
    EXPECT_THROW(compare_runtime_versions("semver", bad, "1"), InputError) << bad;
  }
}

TEST(RuntimeTable, JointRuntimeWithoutChecked_LatestMeansOpenEndedEntries) {
  const std::string text = kJointHeader +
                           "[[options]]\nname = \"old\"\nk = \"f16\"\nv = \"f16\"\ncli = [\"--a\"]\nuntil = \"1.0\"\n"
                           "[[options]]\nname = \"new\"\nk = \"q8_0\"\nv = \"q4_0\"\ncli = [\"--b\"]\nsince = \"1.0\"\n";
  const RuntimeTable t = parse_runtime_table(text, "rt.toml", "rt", builtin_registry());
  const RuntimeView latest = runtime_options(t, "latest");
  ASSERT_EQ(latest.options.size(), 1u);
  EXPECT_EQ(latest.options[0].name, "new");
  EXPECT_EQ(runtime_options(t, "0.9").options[0].name, "old");
  EXPECT_EQ(latest.options[0].origins[0], "rt.toml:11:1");
}

TEST(RuntimeTable, UnknownKeyNamesItsPosition) {
  const std::string msg =
      parse_error(kJointHeader + kF16Option + "bogus = 1\n");
  EXPECT_THAT(msg, HasSubstr("rt.toml:9:1: unknown key 'bogus' in [options]"));
  EXPECT_THAT(msg, HasSubstr("valid keys are:"));
  EXPECT_THAT(parse_error(kJointHeader + "colour = \"red\"\n[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\n"),
              HasSubstr("rt.toml:5:1: unknown key 'colour' at the top level"));
}

TEST(RuntimeTable, BadSpecNamesKeyPositionAndRegistryReason) {
  const std::string msg = parse_error(kJointHeader + "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"q9_0\"\n");
  EXPECT_THAT(msg, HasSubstr("rt.toml:8:5: 'v' = 'q9_0' is not a kvtune scheme"));
  EXPECT_THAT(msg, HasSubstr("unknown scheme 'q9_0'"));
  EXPECT_THAT(parse_error(kJointHeader + "[[options]]\nname = \"a\"\nk = \"int:bits=9\"\nv = \"f16\"\n"),
              HasSubstr("rt.toml:7:5: 'k' = 'int:bits=9' is not a kvtune scheme"));
}

TEST(RuntimeTable, BadVersionNamesKeyPositionAndSyntax) {
  EXPECT_THAT(parse_error(kJointHeader + "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\nsince = \"1.x\"\n"),
              HasSubstr("rt.toml:9:9: 'since' = '1.x' is not a version; expected a dotted version"));
  EXPECT_THAT(parse_error(kJointHeader + "checked = \"b12\"\n[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\n"),
              HasSubstr("rt.toml:5:11: 'checked' = 'b12' is not a version"));
  EXPECT_THAT(parse_error(kJointHeader +
                          "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\nsince = \"2.0\"\nuntil = \"1.0\"\n"),
              HasSubstr("rt.toml:10:9: 'until' (1.0) must be after 'since' (2.0)"));
  const std::string build =
      "name = \"R\"\nsource = \"s\"\nversion_scheme = \"build\"\nkv_independent = false\n"
      "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\nuntil = \"8607\"\n";
  EXPECT_THAT(parse_error(build), HasSubstr("rt.toml:9:9: 'until' = '8607' is not a version; expected a build number"));
}

TEST(RuntimeTable, MissingRequiredKeyNamesTheEntry) {
  EXPECT_THAT(parse_error(kJointHeader + "[[options]]\nname = \"a\"\nk = \"f16\"\n"),
              HasSubstr("rt.toml:5:1: missing key 'v' in [options] (the kvtune spec for values)"));
  EXPECT_THAT(parse_error("name = \"R\"\nversion_scheme = \"semver\"\nkv_independent = false\n"),
              HasSubstr("rt.toml:1:1: missing key 'source'"));
  const std::string independent = "name = \"R\"\nsource = \"s\"\nversion_scheme = \"build\"\nkv_independent = true\n"
                                  "[[k_types]]\nvalue = \"f16\"\n";
  EXPECT_THAT(parse_error(independent), HasSubstr("rt.toml:5:1: missing key 'spec' in [k_types]"));
}

TEST(RuntimeTable, CrossReferencesAreChecked) {
  const std::string head = "name = \"R\"\nsource = \"s\"\nversion_scheme = \"build\"\nkv_independent = true\n"
                           "[[k_types]]\nvalue = \"f16\"\nspec = \"f16\"\n"
                           "[[v_types]]\nvalue = \"f16\"\nspec = \"f16\"\n";
  EXPECT_THAT(parse_error(head + "profiles = [\"fast\"]\n"),
              HasSubstr("rt.toml:8:1: 'profiles' names 'fast', which no [[profiles]] entry defines"));
  EXPECT_THAT(parse_error(head + "[[pair_rules]]\nv = [\"q8_0\"]\n"),
              HasSubstr("rt.toml:11:1: pair rule 'v' names 'q8_0', which is not a v_types value"));
  EXPECT_THAT(parse_error(head + "[[pair_rules]]\nexcept = [\"f16-f16\"]\n"),
              HasSubstr("'except' entry 'f16-f16' must be K/V"));
  EXPECT_THAT(parse_error(kJointHeader + "[[k_types]]\nvalue = \"f16\"\nspec = \"f16\"\n[[options]]\nname = \"a\"\n"
                                         "k = \"f16\"\nv = \"f16\"\n"),
              HasSubstr("'k_types' needs kv_independent = true"));
  EXPECT_THAT(parse_error(kJointHeader + "[[options]]\nname = \"a\"\nk = \"f16\"\nv = \"f16\"\nenv = [\"NOEQUALS\"]\n"),
              HasSubstr("rt.toml:9:8: 'env' entries must be NAME=VALUE"));
}

// [[tensor_parallel]]: the version's first active entry is its multi-GPU setting; with_tensor_parallel
// fills {gpus} in its cli, env and caveats and joins its python keywords into the option's call.
TEST(RuntimeTable, TensorParallelSettingsJoinTheOptionWithTheGpuCount) {
  const RuntimeTable t = parse_runtime_table(kJointHeader + kFp8Option + R"toml([[tensor_parallel]]
name = "--tp"
cli = ["--tp {gpus}"]
until = "2.0"
[[tensor_parallel]]
name = "--tensor-parallel-size"
cli = ["--tensor-parallel-size {gpus}"]
env = ["RANKS={gpus}"]
python = "tensor_parallel_size={gpus}"
caveats = ["heads over {gpus} GPUs, {gpus} ranks"]
since = "2.0"
)toml",
                                             "rt.toml", "rt", builtin_registry());
  const RuntimeView old = runtime_options(t, "1.5");
  ASSERT_TRUE(old.tensor_parallel);
  EXPECT_EQ(old.tensor_parallel->name, "--tp");
  const RuntimeView now = runtime_options(t, "2.1");
  ASSERT_TRUE(now.tensor_parallel);
  EXPECT_EQ(now.tensor_parallel->origins, std::vector<std::string>{"rt.toml:15:1"});
  const RuntimeOption o = with_tensor_parallel(now.options.at(0), *now.tensor_parallel, 8);
  EXPECT_EQ(o.name, "fp8");
  EXPECT_EQ(o.settings.cli, (std::vector<std::string>{"--kv-cache-dtype fp8", "--tensor-parallel-size 8"}));
  EXPECT_EQ(o.settings.env, std::vector<std::string>{"RANKS=8"});
  EXPECT_EQ(o.settings.python, "LLM(model=..., kv_cache_dtype=\"fp8\", tensor_parallel_size=8)");
  EXPECT_EQ(o.settings.caveats, std::vector<std::string>{"heads over 8 GPUs, 8 ranks"});
  EXPECT_EQ(o.origins, (std::vector<std::string>{"rt.toml:5:1", "rt.toml:15:1"}));
  EXPECT_EQ(with_tensor_parallel(old.options.at(0), *old.tensor_parallel, 12).settings.cli,
            (std::vector<std::string>{"--kv-cache-dtype fp8", "--tp 12"}));
}

TEST(RuntimeTable, TensorParallelEntriesAreChecked) {
  const std::string& option = kF16Option;
  EXPECT_THAT(parse_error(kJointHeader + option + "[[tensor_parallel]]\ncli = [\"--tp {gpus}\"]\n"),
              HasSubstr("rt.toml:9:1: missing key 'name' in [tensor_parallel]"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[tensor_parallel]]\nname = \"--tp\"\ncli = [\"--tp 2\"]\n"),
              HasSubstr("rt.toml:9:1: a [[tensor_parallel]] entry needs {gpus} in 'cli', 'env' or 'python'"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[tensor_parallel]]\nname = \"--tp\"\npython = \"tp({gpus})\"\n"),
              HasSubstr("rt.toml:11:10: a [[tensor_parallel]] python is keyword arguments for the option's call"));
  EXPECT_THAT(parse_error(kJointHeader + option + "python = \"LLM(model=...)  # fp8\"\n" +
                          "[[tensor_parallel]]\nname = \"--tp\"\npython = \"tp={gpus}\"\n"),
              HasSubstr("rt.toml:5:1: 'python' must end with its call's ')', with no comment, where a "
                        "[[layer_exemptions]], [[tensor_parallel]] or [[context]] entry adds its keyword arguments"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[tensor_parallel]]\nname = \"--tp\"\ncli = [\"--tp {gpus}\"]\n" +
                          "divides = [\"kv_heads\", \"layers\"]\n"),
              HasSubstr("rt.toml:12:24: 'divides' entries must be one of: q_heads, kv_heads (found 'layers')"));
  // Caveats alone: a runtime that spreads the cache without a setting says how.
  EXPECT_EQ(parse_error(kJointHeader + option + "[[tensor_parallel]]\nname = \"layers\"\ncaveats = [\"x\"]\n"), "");
}

// The head counts a runtime splits over its GPUs: the count divides the attention heads, and the
// KV heads and the count divide one into the other (more GPUs than KV heads replicate them).
TEST(RuntimeTable, GpuCountsARuntimeCannotSplitAModelInto) {
  const std::vector<std::string> both = {"q_heads", "kv_heads"};
  EXPECT_THAT(broken_gpu_divisions(both, 64, 8, 3), ::testing::ElementsAre("q_heads", "kv_heads"));
  for (int64_t gpus : {2, 4, 8, 16, 32, 64}) EXPECT_THAT(broken_gpu_divisions(both, 64, 8, gpus), ::testing::IsEmpty()) << gpus;
  EXPECT_THAT(broken_gpu_divisions(both, 64, 8, 128), ::testing::ElementsAre("q_heads"));
  EXPECT_THAT(broken_gpu_divisions(both, 48, 12, 8), ::testing::ElementsAre("kv_heads"));  // 12 and 8
  EXPECT_THAT(broken_gpu_divisions({"kv_heads"}, 48, 12, 24), ::testing::IsEmpty());       // 24 = 2 x 12
  EXPECT_THAT(broken_gpu_divisions({}, 64, 8, 3), ::testing::IsEmpty());
  EXPECT_THAT(broken_gpu_divisions(both, 0, 0, 3), ::testing::IsEmpty());  // counts not known
  EXPECT_EQ(runtime_options(shipped("vllm"), "latest").tensor_parallel->divides, both);
  // SGLang's QKVParallelLinear divides both (linear.py at v0.5.11 and v0.5.18).
  for (const std::string version : {"0.5.11", "latest"}) {
    EXPECT_EQ(runtime_options(shipped("sglang"), version).tensor_parallel->divides, both) << version;
  }
}

// Every shipped runtime says how it runs on several GPUs, with nothing left unfilled.
TEST(RuntimeTable, EveryShippedRuntimeSaysHowItUsesSeveralGpus) {
  for (const RuntimeTable& t : load_runtime_tables(config_dir(), builtin_registry())) {
    const RuntimeView view = runtime_options(t, "latest");
    ASSERT_TRUE(view.tensor_parallel) << t.name;
    const RuntimeOption o = with_tensor_parallel(view.options.at(0), *view.tensor_parallel, 4);
    const RuntimeSettings& s = o.settings;
    for (const std::vector<std::string>* list : {&s.cli, &s.env, &s.caveats}) {
      for (const std::string& text : *list) EXPECT_THAT(text, Not(HasSubstr("{gpus}"))) << t.name;
    }
    EXPECT_THAT(s.python, Not(HasSubstr("{gpus}"))) << t.name;
    EXPECT_TRUE(any_contains(s.cli, " 4") || any_contains(s.caveats, " 4 GPUs")) << t.name;
  }
}

// [[context]]: the version's first active entry sizes the cache for the fit's sequences; with_context
// fills {ctx}, {seqs} and {tokens} (their product) and joins its python keywords into the option's call.
TEST(RuntimeTable, ContextSettingsFillTheServingShape) {
  const RuntimeTable t = parse_runtime_table(kJointHeader + kFp8Option + R"toml([[context]]
name = "num_ctx"
caveats = ["set num_ctx {ctx} for {seqs} sequences"]
until = "2.0"
[[context]]
name = "-c / -np"
cache_share = 0.9
share_of = "free"
cli = ["-c {tokens}", "-np {seqs}"]
env = ["CONTEXT={ctx}"]
python = "max_model_len={ctx}"
caveats = ["{seqs} slots of {ctx} tokens, {tokens} in all"]
since = "2.0"
)toml",
                                             "rt.toml", "rt", builtin_registry());
  const RuntimeView old = runtime_options(t, "1.5");
  ASSERT_TRUE(old.context);
  EXPECT_EQ(old.context->name, "num_ctx");
  EXPECT_FALSE(old.context->cache_share);
  const RuntimeView now = runtime_options(t, "2.1");
  ASSERT_TRUE(now.context);
  ASSERT_TRUE(now.context->cache_share);
  EXPECT_DOUBLE_EQ(now.context->cache_share->share, 0.9);
  EXPECT_TRUE(now.context->cache_share->of_free);
  EXPECT_EQ(now.context->origins, std::vector<std::string>{"rt.toml:15:1"});
  const RuntimeOption o = with_context(now.options.at(0), *now.context, 32768, 3);
  EXPECT_EQ(o.name, "fp8");
  EXPECT_EQ(o.settings.cli, (std::vector<std::string>{"--kv-cache-dtype fp8", "-c 98304", "-np 3"}));
  EXPECT_EQ(o.settings.env, std::vector<std::string>{"CONTEXT=32768"});
  EXPECT_EQ(o.settings.python, "LLM(model=..., kv_cache_dtype=\"fp8\", max_model_len=32768)");
  EXPECT_EQ(o.settings.caveats, std::vector<std::string>{"3 slots of 32768 tokens, 98304 in all"});
  EXPECT_EQ(o.origins, (std::vector<std::string>{"rt.toml:5:1", "rt.toml:15:1"}));
  const RuntimeOption before = with_context(old.options.at(0), *old.context, 131072, 1);
  EXPECT_EQ(before.settings.cli, std::vector<std::string>{"--kv-cache-dtype fp8"});
  EXPECT_EQ(before.settings.caveats, std::vector<std::string>{"set num_ctx 131072 for 1 sequences"});
}

// [[context]] cell rounding (slot_pad, sliding_extra, sliding_extra_above, sliding_pad): read into
// the entry, carried by the version's context setting, checked key by key.
TEST(RuntimeTable, ContextEntriesDeclareHowTheyRoundCells) {
  const RuntimeTable t = parse_runtime_table(kJointHeader + kFp8Option + R"toml([[context]]
name = "-c / -np"
cli = ["-c {tokens}", "-np {seqs}"]
slot_pad = 256
sliding_extra = 512
sliding_extra_above = [[4096, 1024], [32768, 2048]]
sliding_pad = 256
since = "2.0"
[[context]]
name = "-c / -np"
cli = ["-c {tokens}", "-np {seqs}"]
until = "2.0"
)toml",
                                             "rt.toml", "rt", builtin_registry());
  const RuntimeView now = runtime_options(t, "2.1");
  ASSERT_TRUE(now.context && now.context->cells);
  EXPECT_EQ(*now.context->cells, (CellAllocation{256, 512, {{4096, 1024}, {32768, 2048}}, 256}));
  EXPECT_FALSE(runtime_options(t, "1.5").context->cells);
  const RuntimeTable partial = parse_runtime_table(
      kJointHeader + kFp8Option + "[[context]]\nname = \"c\"\ncli = [\"-c {ctx}\"]\nslot_pad = 256\n", "rt.toml", "rt",
      builtin_registry());
  EXPECT_EQ(*runtime_options(partial, "latest").context->cells, (CellAllocation{256, 0, {}, 1}));

  const std::string head = kJointHeader + kF16Option + "[[context]]\nname = \"len\"\ncli = [\"-c {ctx}\"]\n";
  EXPECT_THAT(parse_error(head + "slot_pad = 0\n"), HasSubstr("rt.toml:12:12: 'slot_pad' must be an integer in 1..1048576"));
  EXPECT_THAT(parse_error(head + "sliding_extra = -1\n"),
              HasSubstr("rt.toml:12:17: 'sliding_extra' must be an integer in 0..16777216"));
  const std::string steps = "'sliding_extra_above' must be an array of [tokens, extra] pairs, tokens ascending";
  EXPECT_THAT(parse_error(head + "sliding_extra_above = 4096\n"), HasSubstr("rt.toml:12:23: " + steps));
  EXPECT_THAT(parse_error(head + "sliding_extra_above = [[4096]]\n"), HasSubstr("rt.toml:12:24: " + steps));
  EXPECT_THAT(parse_error(head + "sliding_extra_above = [[4096, 1024], [4096, 2048]]\n"),
              HasSubstr("rt.toml:12:38: " + steps));
  EXPECT_THAT(parse_error(head + "sliding_extra_above = [[4096, \"big\"]]\n"), HasSubstr("rt.toml:12:24: " + steps));
  const RuntimeTable whole =
      parse_runtime_table(head + "sliding_full = true\n", "rt.toml", "rt", builtin_registry());
  EXPECT_EQ(*runtime_options(whole, "latest").context->cells, (CellAllocation{1, 0, {}, 1, true}));
  const RuntimeTable grouped =
      parse_runtime_table(head + "pad_layer_groups = true\n", "rt.toml", "rt", builtin_registry());
  EXPECT_EQ(*runtime_options(grouped, "latest").context->cells, (CellAllocation{1, 0, {}, 1, false, true}));
  const RuntimeTable some =
      parse_runtime_table(head + "sliding_full = true\nfor_architectures = [\"Gemma2ForCausalLM\"]\n", "rt.toml", "rt",
                          builtin_registry());
  EXPECT_EQ(runtime_options(some, "latest").context->cells->for_architectures,
            std::vector<std::string>{"Gemma2ForCausalLM"});
  const RuntimeTable others =
      parse_runtime_table(head + "sliding_full = true\nexcept_architectures = [\"A\", \"B\"]\n", "rt.toml", "rt",
                          builtin_registry());
  EXPECT_EQ(runtime_options(others, "latest").context->cells->except_architectures, (std::vector<std::string>{"A", "B"}));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nfor_architectures = [2]\n"),
              HasSubstr("rt.toml:13:22: 'for_architectures' entries must be strings"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nfor_architectures = []\n"),
              HasSubstr("rt.toml:13:21: 'for_architectures' must name at least one class"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nexcept_architectures = [\"A\", \" \"]\n"),
              HasSubstr("rt.toml:13:30: 'except_architectures' entries must be distinct class names"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nfor_architectures = [\"A\", \"A\"]\n"),
              HasSubstr("rt.toml:13:27: 'for_architectures' entries must be distinct class names"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nfor_architectures = [\"A\"]\nexcept_architectures = [\"B\"]\n"),
              HasSubstr("rt.toml:14:24: 'except_architectures' and 'for_architectures' exclude each other"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\npad_layer_groups = true\n"),
              HasSubstr("rt.toml:13:20: 'pad_layer_groups' groups layers that keep a window, which 'sliding_full' "
                        "leaves out"));
  EXPECT_THAT(parse_error(head + "pad_layer_groups = \"yes\"\n"),
              HasSubstr("rt.toml:12:20: 'pad_layer_groups' must be true or false"));
  EXPECT_THAT(parse_error(head + "sliding_full = 1\n"),
              HasSubstr("rt.toml:12:16: 'sliding_full' must be true or false"));
  EXPECT_THAT(parse_error(head + "sliding_full = true\nsliding_pad = 256\n"),
              HasSubstr("rt.toml:13:15: 'sliding_pad' sizes a sliding layer's window, which 'sliding_full' "
                        "leaves out"));
  EXPECT_THAT(parse_error(head + "sliding_extra = 512\nsliding_full = true\n"),
              HasSubstr("rt.toml:12:17: 'sliding_extra' sizes a sliding layer's window"));
  EXPECT_THAT(parse_error(kJointHeader + kF16Option + "[[tensor_parallel]]\nname = \"--tp\"\ncli = [\"--tp {gpus}\"]\n" +
                          "slot_pad = 256\n"),
              HasSubstr("rt.toml:12:1: unknown key 'slot_pad' in [tensor_parallel]"));

  // The shipped tables: llama-server from b6975, and Ollama from 0.30.0-rc0, which runs it.
  const CellAllocation llama = {256, 512, {}, 256};
  EXPECT_EQ(runtime_options(shipped("llama-cpp"), "latest").context->cells, llama);
  EXPECT_FALSE(runtime_options(shipped("llama-cpp"), "b6974").context->cells);
  // Before the iSWA cache (b5429) every layer held the whole slot.
  EXPECT_EQ(runtime_options(shipped("llama-cpp"), "b5428").context->cells, (CellAllocation{1, 0, {}, 1, true}));
  EXPECT_FALSE(runtime_options(shipped("llama-cpp"), "b5429").context->cells);
  EXPECT_EQ(runtime_options(shipped("ollama"), "latest").context->cells,
            (CellAllocation{256, 512, {{4096, 1024}, {32768, 2048}}, 256}));
  // Before llama-server, Gemma 2 ran on Ollama's vendored llama.cpp, which keeps sliding layers whole.
  const CellAllocation gemma2_whole = {1, 0, {}, 1, true, false, {"Gemma2ForCausalLM"}};
  EXPECT_EQ(runtime_options(shipped("ollama"), "0.24.0").context->cells, gemma2_whole);
  EXPECT_EQ(runtime_options(shipped("ollama"), "0.3.0").context->cells, gemma2_whole);
  EXPECT_FALSE(runtime_options(shipped("ollama"), "0.1.30").context->cells);
  // SGLang keeps Gemma's sliding layers whole (its SWA pool is off for them, v0.5.11 .. v0.5.18).
  // SGLang keeps sliding layers whole but for the classes with its separate sliding-window pool.
  const std::optional<CellAllocation> sglang = runtime_options(shipped("sglang"), "0.5.11").context->cells;
  ASSERT_TRUE(sglang);
  EXPECT_TRUE(sglang->sliding_full);
  EXPECT_TRUE(cell_rule_applies(*sglang, "Gemma3ForConditionalGeneration"));
  EXPECT_TRUE(cell_rule_applies(*sglang, "Gemma2ForCausalLM"));
  EXPECT_TRUE(cell_rule_applies(*sglang, ""));
  EXPECT_FALSE(cell_rule_applies(*sglang, "GptOssForCausalLM"));
  EXPECT_FALSE(cell_rule_applies(*sglang, "Llama4ForConditionalGeneration"));
  // TensorRT-LLM without max_attention_window: every layer holds max_seq_len. LMDeploy from 0.10.0:
  // Gemma 3's multimodal class keeps the whole context on every layer; before, no rule.
  EXPECT_EQ(runtime_options(shipped("tensorrt-llm"), "latest").context->cells, (CellAllocation{32, 0, {}, 1, true}));
  EXPECT_EQ(runtime_options(shipped("lmdeploy"), "0.10.0").context->cells,
            (CellAllocation{1, 0, {}, 1, true, false, {"Gemma3ForConditionalGeneration"}}));
  EXPECT_FALSE(runtime_options(shipped("lmdeploy"), "0.9.2").context->cells);
  // vLLM's blocks of 16, a sliding layer's window plus one, its layers padded into groups.
  const CellAllocation vllm = {16, 16, {}, 16, false, true};
  EXPECT_EQ(runtime_options(shipped("vllm"), "0.11.2").context->cells, vllm);
  EXPECT_EQ(runtime_options(shipped("vllm"), "latest").context->cells, vllm);
  // transformers' QuantizedCache: a quantized layer for every layer, sliding ones whole.
  EXPECT_EQ(runtime_options(shipped("transformers"), "latest").context->cells, (CellAllocation{1, 0, {}, 1, true}));
}

TEST(RuntimeTable, ContextEntriesAreChecked) {
  const std::string& option = kF16Option;
  EXPECT_THAT(parse_error(kJointHeader + option + "[[context]]\ncli = [\"-c {tokens}\"]\n"),
              HasSubstr("rt.toml:9:1: missing key 'name' in [context]"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[context]]\nname = \"-c\"\ncli = [\"-c 4096\"]\n"),
              HasSubstr("rt.toml:9:1: a [[context]] entry needs {ctx}, {seqs} or {tokens} in 'cli', 'env' or "
                        "'python'"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[context]]\nname = \"-c\"\ncli = [\"-c {gpus}\"]\n"),
              HasSubstr("rt.toml:9:1: a [[context]] entry needs {ctx}, {seqs} or {tokens}"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[context]]\nname = \"len\"\npython = \"Config({ctx})\"\n"),
              HasSubstr("rt.toml:11:10: a [[context]] python is keyword arguments for the option's call"));
  EXPECT_THAT(parse_error(kJointHeader + option + "python = \"LLM(model=...)  # f16\"\n" +
                          "[[context]]\nname = \"len\"\npython = \"max_model_len={ctx}\"\n"),
              HasSubstr("rt.toml:5:1: 'python' must end with its call's ')', with no comment"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[context]]\nname = \"len\"\ncli = [\"-c {ctx}\"]\ndivides = [\"q_heads\"]\n"),
              HasSubstr("rt.toml:12:1: unknown key 'divides' in [context]"));
  const std::string share = "[[context]]\nname = \"len\"\ncli = [\"-c {ctx}\"]\n";
  EXPECT_THAT(parse_error(kJointHeader + option + share + "cache_share = 0.9\n"),
              HasSubstr("rt.toml:9:1: missing key 'share_of' in [context] (what cache_share is a share of: \"gpu\" or "
                        "\"free\" (after the weights))"));
  EXPECT_THAT(parse_error(kJointHeader + option + share + "share_of = \"gpu\"\n"),
              HasSubstr("rt.toml:9:1: missing key 'cache_share' in [context]"));
  EXPECT_THAT(parse_error(kJointHeader + option + share + "cache_share = 1.5\nshare_of = \"gpu\"\n"),
              HasSubstr("rt.toml:12:15: 'cache_share' must be a number in 0.01..1"));
  EXPECT_THAT(parse_error(kJointHeader + option + share + "cache_share = 0.9\nshare_of = \"total\"\n"),
              HasSubstr("rt.toml:13:12: 'share_of' must be one of: gpu, free"));
  EXPECT_THAT(parse_error(kJointHeader + option + "[[tensor_parallel]]\nname = \"--tp\"\ncli = [\"--tp {gpus}\"]\n" +
                          "cache_share = 0.9\n"),
              HasSubstr("rt.toml:12:1: unknown key 'cache_share' in [tensor_parallel]"));
  // Caveats alone: a runtime whose cache grows says so.
  EXPECT_EQ(parse_error(kJointHeader + option + "[[context]]\nname = \"grows\"\ncaveats = [\"x\"]\n"), "");
}

// Every shipped runtime says how it holds the fit's sequences, with nothing left unfilled.
// [[key_layout]]: the classes whose keys a runtime stores in another channel order, applied to
// every option's key spec, its caveat and origin joining the option's.
TEST(RuntimeTable, AKeyLayoutPutsTheKeysOfTheClassesItNamesInItsOrder) {
  // f16 keys (channel_order_invariant: the same values in any order) are left as they are.
  const std::string head = kJointHeader + kF16Option + "[[options]]\nname = \"q\"\nk = \"q4_0\"\nv = \"q8_0\"\n";
  const std::string rule = "[[key_layout]]\nname = \"converter\"\npair_order = \"adjacent\"\n"
                           "caveats = [\"stored in pairs\"]\n";
  RuntimeView view =
      runtime_options(parse_runtime_table(head + rule + "for_architectures = [\"LlamaForCausalLM\"]\nsince = \"2.0\"\n",
                                          "rt.toml", "rt", builtin_registry()),
                      "2.0");
  ASSERT_EQ(view.key_layouts.size(), 1u);
  EXPECT_EQ(*view.key_layouts[0].key_layout, (KeyLayout{"adjacent", {"LlamaForCausalLM"}, {}}));
  EXPECT_EQ(key_layout_for(view, "Qwen2ForCausalLM"), nullptr);
  EXPECT_EQ(key_layout_for(view, ""), nullptr);
  const RuntimeOption* layout = key_layout_for(view, "LlamaForCausalLM");
  ASSERT_NE(layout, nullptr);
  EXPECT_EQ(view.key_order, "");
  apply_key_layout(view, *layout, builtin_registry());
  EXPECT_EQ(view.key_order, "adjacent");
  EXPECT_EQ(view.options[0].k_spec, "f16");
  EXPECT_TRUE(view.options[0].settings.caveats.empty());
  EXPECT_EQ(view.options[1].k_spec, "q4_0:pair_order=adjacent");
  EXPECT_EQ(view.options[1].v_spec, "q8_0");
  EXPECT_EQ(view.options[1].settings.caveats, std::vector<std::string>{"stored in pairs"});
  EXPECT_THAT(view.options[1].origins, ::testing::ElementsAre(HasSubstr("rt.toml:9:1"), HasSubstr("rt.toml:13:1")));
  apply_key_layout(view, *layout, builtin_registry());  // already in that order: nothing is added twice
  EXPECT_EQ(view.options[1].settings.caveats.size(), 1u);
  EXPECT_EQ(in_key_order("q4_0:pair_order=adjacent,rotation=hadamard", "adjacent", builtin_registry()),
            "q4_0:rotation=hadamard,pair_order=adjacent");
  EXPECT_TRUE(runtime_options(parse_runtime_table(head + rule + "since = \"2.0\"\n", "rt.toml", "rt", builtin_registry()),
                              "1.0").key_layouts.empty());
  const RuntimeView others = runtime_options(
      parse_runtime_table(head + rule + "except_architectures = [\"A\"]\n", "rt.toml", "rt", builtin_registry()), "latest");
  EXPECT_NE(key_layout_for(others, ""), nullptr);
  EXPECT_EQ(key_layout_for(others, "A"), nullptr);

  EXPECT_THAT(parse_error(head + "[[key_layout]]\nname = \"c\"\ncaveats = [\"x\"]\n"),
              HasSubstr("rt.toml:13:1: missing key 'pair_order' in [key_layout]"));
  EXPECT_THAT(parse_error(head + "[[key_layout]]\nname = \"c\"\npair_order = \"adjacent\"\n"),
              HasSubstr("rt.toml:13:1: missing key 'caveats' in [key_layout]"));
  EXPECT_THAT(parse_error(head + "[[key_layout]]\nname = \"c\"\npair_order = \"halves\"\ncaveats = [\"x\"]\n"),
              HasSubstr("rt.toml:15:14: 'pair_order' must be one of: adjacent"));
  EXPECT_THAT(parse_error(head + rule + "for_architectures = [\"A\"]\nexcept_architectures = [\"B\"]\n"),
              HasSubstr("rt.toml:18:24: 'except_architectures' and 'for_architectures' exclude each other"));
  EXPECT_THAT(parse_error(head + rule + "for_architectures = []\n"),
              HasSubstr("rt.toml:17:21: 'for_architectures' must name at least one class"));
  EXPECT_THAT(parse_error(head + rule + "slot_pad = 16\n"), HasSubstr("rt.toml:17:1: unknown key 'slot_pad'"));
  EXPECT_THAT(parse_error(head + rule + "cli = [\"--x\"]\n"),
              HasSubstr("rt.toml:17:1: unknown key 'cli' in [key_layout]; valid keys are: caveats, "
                        "except_architectures, for_architectures, name, pair_order, since, until, verified"));
}

// llama.cpp and Ollama store a Llama or Mistral model's keys with each RoPE pair adjacent (their
// converters permute k_proj); Qwen and Gemma keys, and every other runtime's, keep the checkpoint's order.
TEST(RuntimeTable, TheShippedKeyLayoutsHoldForTheLlamaAndMistralPresetsOnly) {
  const std::set<std::string> llama_family = {"llama-2-7b",  "llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b",
                                              "llama-3.2-1b", "llama-3.2-3b", "mistral-7b"};
  for (const RuntimeTable& t : load_runtime_tables(config_dir(), builtin_registry())) {
    const RuntimeView view = runtime_options(t, "latest");
    for (const auto& file : std::filesystem::directory_iterator(config_dir() / "models")) {
      const ModelPreset preset = load_model_preset(file.path());
      const bool stores_pairs = t.name == "llama-cpp" || t.name == "ollama";
      const RuntimeOption* layout = key_layout_for(view, preset.architecture);
      EXPECT_EQ(layout != nullptr, llama_family.count(preset.name) == 1 && stores_pairs) << t.name << " " << preset.name;
      if (layout != nullptr) {
        EXPECT_EQ(layout->key_layout->pair_order, "adjacent");
      }
    }
  }  // Ollama's GGUF models are converted as llama.cpp's: its list repeats llama.cpp's, and must stay it.
  const auto layout_of = [](const std::string& name) {
    return *runtime_options(load_runtime_table(config_dir() / "runtimes" / (name + ".toml"), builtin_registry()), "latest")
                .key_layouts.at(0)
                .key_layout;
  };
  EXPECT_EQ(layout_of("ollama"), layout_of("llama-cpp"));
}

TEST(RuntimeTable, EveryShippedRuntimeSaysHowItHoldsTheSequences) {
  for (const RuntimeTable& t : load_runtime_tables(config_dir(), builtin_registry())) {
    for (const std::string& version : {std::string("latest"), t.oldest.empty() ? std::string("latest") : t.oldest}) {
      const RuntimeView view = runtime_options(t, version);
      ASSERT_TRUE(view.context) << t.name << " " << version;
      const RuntimeOption o = with_context(view.options.at(0), *view.context, 32768, 3);
      const RuntimeSettings& s = o.settings;
      for (const std::vector<std::string>* list : {&s.cli, &s.env, &s.caveats}) {
        for (const std::string& text : *list) {
          for (const char* p : kContextPlaceholders) EXPECT_THAT(text, Not(HasSubstr(p))) << t.name;
        }
      }
      for (const char* p : kContextPlaceholders) EXPECT_THAT(s.python, Not(HasSubstr(p))) << t.name;
      EXPECT_TRUE(any_contains(s.cli, "32768") || any_contains(s.env, "32768") || any_contains(s.caveats, "32768"))
          << t.name;
      // The sequences' setting casts no doubt on the option's emulation.
      EXPECT_EQ(s.verified, view.options.at(0).settings.verified) << t.name;
    }
  }
  // The runtimes that allocate slots up front are told the whole: llama-server's -c is all slots' tokens.
  const RuntimeView llama = runtime_options(shipped("llama-cpp"), "latest");
  EXPECT_THAT(with_context(llama.options.at(0), *llama.context, 32768, 3).settings.cli,
              ::testing::IsSupersetOf({"-c 98304", "-np 3"}));
  const RuntimeView ollama = runtime_options(shipped("ollama"), "latest");
  EXPECT_THAT(with_context(ollama.options.at(0), *ollama.context, 32768, 3).settings.env,
              ::testing::IsSupersetOf({"OLLAMA_CONTEXT_LENGTH=32768", "OLLAMA_NUM_PARALLEL=3"}));
  EXPECT_EQ(runtime_options(shipped("ollama"), "0.5.12").context->settings.env,
            std::vector<std::string>{"OLLAMA_NUM_PARALLEL={seqs}"});
  EXPECT_THAT(runtime_options(shipped("ollama"), "0.1.20").context->settings.env, ::testing::IsEmpty());
  // The runtimes that keep memory back from the cache by default say how much.
  for (const auto& [name, share, of_free] : {std::tuple{"vllm", 0.92, false}, std::tuple{"tensorrt-llm", 0.9, true},
                                             std::tuple{"lmdeploy", 0.8, true}}) {
    const std::optional<CacheShare> c = runtime_options(shipped(name), "latest").context->cache_share;
    ASSERT_TRUE(c) << name;
    EXPECT_DOUBLE_EQ(c->share, share) << name;
    EXPECT_EQ(c->of_free, of_free) << name;
  }
  EXPECT_FALSE(llama.context->cache_share);
  // A keyword lands in the outer call of a nested snippet (TensorRT-LLM's KvCacheConfig).
  const RuntimeView trt = runtime_options(shipped("tensorrt-llm"), "latest");
  const RuntimeOption* fp8 = find(trt, "fp8, checkpoint without KV scales");
  ASSERT_NE(fp8, nullptr);
  EXPECT_THAT(with_context(*fp8, *trt.context, 32768, 3).settings.python,
              ::testing::EndsWith("kv_cache_config=KvCacheConfig(dtype='fp8'), max_seq_len=32768)"));
}

}  // namespace
}  // namespace kvtune
