// The shipped llama.cpp and Ollama tables by version: for each setting whose spelling or behaviour
// changed between releases, two versions on each side of the boundary and the settings they emit
// (configs/runtimes/llama-cpp.toml, configs/runtimes/ollama.toml; docs/runtimes.md, "every KV setting").
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "kvtune/runtime_table.h"
#include "runtime_table_support.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::any_contains;
using testing::has;
using testing::shipped;

const RuntimeOption& option(const RuntimeView& view, const std::string& name) {
  if (const RuntimeOption* o = testing::find(view, name)) return *o;
  ADD_FAILURE() << view.title << " " << view.version << " has no option '" << name << "'";
  static const RuntimeOption none;
  return none;
}

bool has_option(const RuntimeView& view, const std::string& name) { return testing::find(view, name) != nullptr; }

// ---- llama.cpp ------------------------------------------------------------------------------------

// PR #15434: -fa was a bare switch before it, and takes on|off|auto from it (b6325).
TEST(RuntimeVersionsLlama, FlashAttentionFlagIsBareBeforePr15434AndOnAfter) {
  const RuntimeTable t = shipped("llama-cpp");
  struct Case {
    const char* version;
    const char* flag;
    const char* other;
    bool verified;
  };
  // Verified on both sides: common/arg.cpp was read at the tags b6324 (bare switch) and b6325 (on|off|auto).
  for (const Case& c : {Case{"b3063", "-fa", "-fa on", true}, Case{"b6000", "-fa", "-fa on", true},
                        Case{"b6324", "-fa", "-fa on", true}, Case{"b6325", "-fa on", "-fa", true},
                        Case{"b7000", "-fa on", "-fa", true}}) {
    SCOPED_TRACE(c.version);
    const RuntimeView v = runtime_options(t, c.version);
    const RuntimeOption& q8 = option(v, "q8_0/q8_0 (unrotated)");
    EXPECT_EQ(q8.settings.cli, (std::vector<std::string>{"-ctk q8_0", "-ctv q8_0", c.flag}));
    EXPECT_FALSE(has(q8.settings.cli, c.other));
    EXPECT_TRUE(q8.settings.needs_flash_attention);
    EXPECT_EQ(q8.settings.verified, c.verified);
    // A quantized K alone needs no flash attention, in either spelling.
    const RuntimeOption& k_only = option(v, "q8_0/f16 (unrotated)");
    EXPECT_EQ(k_only.settings.cli, (std::vector<std::string>{"-ctk q8_0", "-ctv f16"}));
    EXPECT_FALSE(k_only.settings.needs_flash_attention);
  }
}

// The table starts at b3063, the first build that runs a quantized V (PR #7527; tag b3058 lacks it): an
// older build is refused rather than given flags it rejects (-fa first parses at b2771).
TEST(RuntimeVersionsLlama, BuildsBeforeQuantizedFlashAttentionAreRefused) {
  const RuntimeTable t = shipped("llama-cpp");
  EXPECT_EQ(t.oldest, "b3063");
  for (const char* version : {"b1953", "b2700", "b3062"}) {
    SCOPED_TRACE(version);
    try {
      runtime_options(t, version);
      ADD_FAILURE() << "no error";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("older than this table covers (b3063 and later)"), std::string::npos)
          << e.what();
    }
  }
  const RuntimeView v = runtime_options(t, "b3063");
  EXPECT_TRUE(has_option(v, "iq4_nl/iq4_nl (unrotated)"));
  EXPECT_FALSE(has_option(v, "bf16/bf16"));  // bf16 from b4039
}

// The q8_0/q4_0 pair: no tag through b10573 compiles it in a default CUDA build, so the flag stays listed.
TEST(RuntimeVersionsLlama, KQ80VQ40KeepsTheCudaBuildFlag) {
  const RuntimeTable t = shipped("llama-cpp");
  for (const char* version : {"b10000", "b10573"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    const RuntimeOption& o = option(v, "q8_0/q4_0 (rotated)");
    EXPECT_EQ(o.settings.build, (std::vector<std::string>{"GGML_CUDA_FA_ALL_QUANTS=ON (CUDA builds)"}));
    EXPECT_TRUE(any_contains(o.settings.caveats, "Default CUDA builds through b10573"));
    EXPECT_FALSE(any_contains(o.settings.caveats, "Newer sources"));
  }
}

// PR #25871 (build b10206, read at the tags b10205 and b10217): -fa auto turns flash attention on for a
// quantized V from it, and may leave it off before. -fa on is printed in every range.
TEST(RuntimeVersionsLlama, FlashAttentionAutoWithQuantizedVBeforeAndAfterPr25871) {
  const RuntimeTable t = shipped("llama-cpp");
  struct Case {
    const char* version;
    const char* caveat;
  };
  for (const Case& c : {Case{"b9000", "may leave flash attention off"}, Case{"b9840", "may leave flash attention off"},
                        Case{"b10205", "may leave flash attention off"},
                        Case{"b10206", "From b10206 -fa auto also turns flash attention on"},
                        Case{"b10900", "From b10206 -fa auto also turns flash attention on"}}) {
    SCOPED_TRACE(c.version);
    const RuntimeView v = runtime_options(t, c.version);
    const RuntimeOption& o = option(v, "q4_0/q4_0 (rotated)");
    EXPECT_EQ(o.settings.cli, (std::vector<std::string>{"-ctk q4_0", "-ctv q4_0", "-fa on"}));
    EXPECT_TRUE(any_contains(o.settings.caveats, c.caveat));
    // Exactly one of the two -fa auto caveats applies.
    const int ranges = any_contains(o.settings.caveats, "may leave flash attention off") +
                       any_contains(o.settings.caveats, "From b10206");
    EXPECT_EQ(ranges, 1);
  }
}

// PR #28079: GGML_CUDA_FA_ALL_QUANTS (unsupported pairs run attention on the CPU) until b10820; a
// transition range while the first build is unknown; GGML_CUDA_FA_QUANTS (f16 conversion on the GPU)
// from b10970.
TEST(RuntimeVersionsLlama, CudaFlashAttentionBuildFlagBeforeAndAfterPr28079) {
  const RuntimeTable t = shipped("llama-cpp");
  for (const char* version : {"b10000", "b10819"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    const RuntimeOption& mixed = option(v, "q8_0/q5_1 (rotated)");
    EXPECT_EQ(mixed.settings.build, (std::vector<std::string>{"GGML_CUDA_FA_ALL_QUANTS=ON (CUDA builds)"}));
    EXPECT_TRUE(any_contains(mixed.settings.unsupported, "falls back to the CPU"));
    EXPECT_TRUE(mixed.settings.verified);  // PR #15434's -fa on (b6325) and this flag's range read at tags
  }
  for (const char* version : {"b10820", "b10969"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    const RuntimeOption& mixed = option(v, "q8_0/q5_1 (rotated)");
    ASSERT_EQ(mixed.settings.build.size(), 1u);
    EXPECT_TRUE(any_contains(mixed.settings.build, "GGML_CUDA_FA_ALL_QUANTS=ON"));
    EXPECT_TRUE(any_contains(mixed.settings.build, "alias of GGML_CUDA_FA_QUANTS=all"));
    EXPECT_FALSE(mixed.settings.verified);  // the first build with PR #28079 is not known
  }
  for (const char* version : {"b10970", "b11500", "latest"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    const RuntimeOption& mixed = option(v, "q8_0/q5_1 (rotated)");
    ASSERT_EQ(mixed.settings.build.size(), 1u);
    // The pair's own types, filled in (a literal "<K>-<V>" had been printed).
    EXPECT_TRUE(any_contains(mixed.settings.build, "GGML_CUDA_FA_QUANTS=\"q8_0-q5_1\""));
    EXPECT_FALSE(any_contains(mixed.settings.build, "{k}"));
    EXPECT_FALSE(any_contains(mixed.settings.build, "GGML_CUDA_FA_ALL_QUANTS"));
    // f32 is not one of the flag's type names: =all, one build requirement.
    const RuntimeOption& f32 = option(v, "f32/q4_1 (rotated)");
    ASSERT_EQ(f32.settings.build.size(), 1u);
    EXPECT_TRUE(any_contains(f32.settings.build, "GGML_CUDA_FA_QUANTS=all"));
    EXPECT_TRUE(mixed.settings.unsupported.empty());  // converted to f16 on the GPU, not moved to the CPU
    EXPECT_TRUE(any_contains(mixed.settings.caveats, "convert K and V to f16"));
    EXPECT_FALSE(mixed.settings.verified);
  }
  // Default builds have these pairs in every range: no build flag, nothing unsupported.
  for (const char* version : {"b10000", "b10900", "b10970"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    for (const char* pair : {"q8_0/q8_0 (rotated)", "q4_0/q4_0 (rotated)", "f16/f16 (rotated)", "bf16/bf16 (rotated)"}) {
      EXPECT_TRUE(option(v, pair).settings.build.empty()) << pair;
      EXPECT_TRUE(option(v, pair).settings.unsupported.empty()) << pair;
    }
  }
  // iq4_nl has no CUDA kernel before or after, and no build flag helps it.
  for (const char* version : {"b10819", "b10970"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    for (const char* pair : {"q8_0/iq4_nl (rotated)", "iq4_nl/q8_0 (rotated)", "iq4_nl/iq4_nl (rotated)"}) {
      EXPECT_TRUE(any_contains(option(v, pair).settings.unsupported, "any build")) << pair;
      EXPECT_TRUE(option(v, pair).settings.build.empty()) << pair;
    }
  }
}

// PR #21038: from b8619 (read at the tags b8611 and b8624) quantized types are rotated by default (per
// cache and role), with LLAMA_ATTN_ROT_DISABLE=1 as a second profile; before, one unrotated profile.
TEST(RuntimeVersionsLlama, RotatedSpecsFromTheRotationBuild) {
  const RuntimeTable t = shipped("llama-cpp");
  for (const char* version : {"b8000", "b8618"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    EXPECT_EQ(v.options.size(), 81u);
    const RuntimeOption& o = option(v, "q5_1/q4_0 (unrotated)");
    EXPECT_EQ(o.k_spec, "q5_1");
    EXPECT_EQ(o.v_spec, "q4_0");
    EXPECT_TRUE(o.settings.env.empty());
    EXPECT_FALSE(has_option(v, "q5_1/q4_0 (rotated)"));
  }
  for (const char* version : {"b8619", "b9000"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    EXPECT_EQ(v.options.size(), 162u);
    EXPECT_FALSE(has_option(v, "q5_1/q4_0 (unrotated)"));
    const RuntimeOption& rotated = option(v, "q5_1/q4_0 (rotated)");
    EXPECT_EQ(rotated.k_spec, "q5_1:rotation=hadamard");
    EXPECT_EQ(rotated.v_spec, "q4_0:rotation=hadamard");
    EXPECT_TRUE(any_contains(rotated.settings.caveats, "multiple of 64"));  // the head-size condition
    const RuntimeOption& disabled = option(v, "q5_1/q4_0 (rotation disabled)");
    EXPECT_EQ(disabled.k_spec, "q5_1");
    EXPECT_EQ(disabled.settings.env, (std::vector<std::string>{"LLAMA_ATTN_ROT_DISABLE=1"}));
    // Per role: an unquantized role is never rotated, the quantized one is.
    const RuntimeOption& k_only = option(v, "q8_0/f16 (rotated)");
    EXPECT_EQ(k_only.k_spec, "q8_0:rotation=hadamard");
    EXPECT_EQ(k_only.v_spec, "f16");
  }
}

// The rotation's first build (b8619), bf16's (b4039) and PR #15434's (b6325) are read from tags: the types
// are verified on both sides of the rotation and in every profile; only the CUDA build-flag rules after
// b10820 (PR #28079, first build approximate) leave a pair unverified. Before b4039 there is no bf16 cache.
TEST(RuntimeVersionsLlama, TypesAreVerifiedOnBothSidesOfTheRotation) {
  const RuntimeTable t = shipped("llama-cpp");
  for (const char* version : {"b8000", "b8618", "b8619", "b10970"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    const bool rotated = compare_runtime_versions(t.version_scheme, version, "b8619") >= 0;
    for (const char* profile : {"unrotated", "rotated", "rotation disabled"}) {
      if ((std::string(profile) == "unrotated") == rotated) continue;  // the profiles of this build
      const std::string tail = std::string(" (") + profile + ")";
      for (const char* pair : {"f16/f16", "f32/f16", "f16/f32", "bf16/bf16", "bf16/f16", "q8_0/f16"}) {
        EXPECT_TRUE(option(v, pair + tail).settings.verified) << pair << tail;
      }
      // A quantized V takes -fa on (from b6325, read at the tags b6324 and b6325).
      EXPECT_TRUE(option(v, "q8_0/q8_0" + tail).settings.verified) << tail;
      // K != V with a quantized V also needs a CUDA build flag, whose rules after b10820 are approximate.
      const bool before_pr28079 = compare_runtime_versions(t.version_scheme, version, "b10820") < 0;
      EXPECT_EQ(option(v, "f16/q8_0" + tail).settings.verified, before_pr28079) << tail;
    }
  }
  EXPECT_FALSE(has_option(runtime_options(t, "b4038"), "bf16/f16 (unrotated)"));
  EXPECT_TRUE(has_option(runtime_options(t, "b4039"), "bf16/f16 (unrotated)"));
}

TEST(RuntimeVersionsLlama, CheckedBuildIsLatestAndNewerBuildsAreFlagged) {
  const RuntimeTable t = shipped("llama-cpp");
  EXPECT_EQ(t.checked, "b10970");
  EXPECT_FALSE(runtime_options(t, "b10970").beyond_checked);
  EXPECT_TRUE(runtime_options(t, "b10971").beyond_checked);
  EXPECT_EQ(runtime_options(t, "latest").version, "b10970");
}

// ---- Ollama ---------------------------------------------------------------------------------------

// Up to 0.24.x (and 0.25.0-rc0): vendored llama.cpp without rotation, OLLAMA_FLASH_ATTENTION=1 needed
// for the llama.cpp runner. From 0.30.0-rc0: upstream llama-server, rotated unless
// LLAMA_ATTN_ROT_DISABLE=1, a refusal to start instead of a silent f16.
TEST(RuntimeVersionsLlama, OllamaBundledLlamaCppUpTo024AndLlamaServerFrom030) {
  const RuntimeTable t = shipped("ollama");
  EXPECT_FALSE(t.kv_independent);
  for (const char* version : {"0.20.3", "0.24.0", "0.25.0rc0"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    EXPECT_EQ(v.options.size(), 3u);
    const RuntimeOption& q8 = option(v, "q8_0");
    EXPECT_EQ(q8.k_spec, "q8_0");
    EXPECT_EQ(q8.v_spec, "q8_0");
    EXPECT_EQ(q8.settings.env, (std::vector<std::string>{"OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"}));
    EXPECT_TRUE(q8.settings.needs_flash_attention);
    EXPECT_TRUE(q8.settings.verified);
    EXPECT_TRUE(any_contains(q8.settings.caveats, "OLLAMA_FLASH_ATTENTION must be enabled"));  // llama.cpp runner
    EXPECT_TRUE(any_contains(q8.settings.caveats, "quantized kv cache requested but flash attention disabled"));
    EXPECT_EQ(option(v, "q4_0").v_spec, "q4_0");
    EXPECT_FALSE(has_option(v, "q8_0 (rotated)"));
    EXPECT_EQ(option(v, "f16 (default)").settings.env, (std::vector<std::string>{"OLLAMA_KV_CACHE_TYPE=f16"}));
  }
  for (const char* version : {"0.30.0rc0", "0.30.0", "0.32.15", "latest"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    EXPECT_EQ(v.options.size(), 5u);
    EXPECT_FALSE(has_option(v, "q8_0"));
    const RuntimeOption& q8 = option(v, "q8_0 (rotated)");
    EXPECT_EQ(q8.k_spec, "q8_0:rotation=hadamard");
    EXPECT_EQ(q8.v_spec, "q8_0:rotation=hadamard");  // K and V still one type
    EXPECT_EQ(q8.settings.env, (std::vector<std::string>{"OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"}));
    EXPECT_TRUE(any_contains(q8.settings.caveats, "--flash-attn auto"));
    EXPECT_TRUE(any_contains(q8.settings.caveats, "refuses to start"));
    EXPECT_FALSE(any_contains(q8.settings.caveats, "OLLAMA_FLASH_ATTENTION must be enabled"));
    EXPECT_EQ(option(v, "q4_0 (rotated)").k_spec, "q4_0:rotation=hadamard");
    const RuntimeOption& plain = option(v, "q4_0 (rotation disabled)");
    EXPECT_EQ(plain.k_spec, "q4_0");
    EXPECT_EQ(plain.v_spec, "q4_0");
    EXPECT_TRUE(has(plain.settings.env, "LLAMA_ATTN_ROT_DISABLE=1"));
    EXPECT_EQ(option(v, "f16 (default)").k_spec, "f16");  // f16 is never rotated
  }
}

// OLLAMA_KV_CACHE_TYPE first exists at v0.5.0 (v0.4.7 has none): older versions keep f16 whatever is set.
TEST(RuntimeVersionsLlama, OllamaQuantizedCacheFrom050) {
  const RuntimeTable t = shipped("ollama");
  for (const char* version : {"0.1.39", "0.4.7"}) {
    SCOPED_TRACE(version);
    const RuntimeView v = runtime_options(t, version);
    EXPECT_EQ(v.options.size(), 1u);
    EXPECT_EQ(option(v, "f16 (default)").k_spec, "f16");
  }
  const RuntimeView v = runtime_options(t, "0.5.0");
  EXPECT_EQ(v.options.size(), 3u);
  EXPECT_EQ(option(v, "q8_0").settings.env,
            (std::vector<std::string>{"OLLAMA_FLASH_ATTENTION=1", "OLLAMA_KV_CACHE_TYPE=q8_0"}));
  // The llama.cpp pins before PR #25871 (b10206) run to 0.32.5 (b10091), not only 0.30.x and 0.31.x.
  const RuntimeView v0325 = runtime_options(t, "0.32.5");
  EXPECT_TRUE(any_contains(option(v0325, "q8_0 (rotated)").settings.caveats, "the pins of 0.30.x to 0.32.5"));
}

TEST(RuntimeVersionsLlama, OllamaCheckedAtTheNewestTag) {
  const RuntimeTable t = shipped("ollama");
  EXPECT_EQ(t.checked, "0.33.0rc2");
  EXPECT_FALSE(runtime_options(t, "0.32.15").beyond_checked);
  EXPECT_TRUE(runtime_options(t, "0.33.0").beyond_checked);
}

}  // namespace
}  // namespace kvtune
