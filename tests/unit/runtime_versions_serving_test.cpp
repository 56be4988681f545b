// (Options are looked up in a named RuntimeView: find() returns a pointer into it.)
// Version boundaries of the serving-runtime tables (vLLM, SGLang, TensorRT-LLM, transformers, LMDeploy):
// each changed setting is checked on the shipped table at versions on both sides of its boundary.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kvtune/runtime_table.h"
#include "runtime_table_support.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::any_contains;
using testing::canonical;
using testing::find;
using testing::has;
using testing::shipped;

bool lists_not_emulated(const RuntimeView& view, const std::string& part) {
  return std::any_of(view.not_emulated.begin(), view.not_emulated.end(),
                     [&](const RuntimeNotEmulated& n) { return n.setting.find(part) != std::string::npos; });
}

TEST(RuntimeVersionsServing, TransformersHqqBackendSpellingSplitsAt456) {
  const RuntimeTable t = shipped("transformers");
  for (const std::string version : {"4.54.1", "4.55.4"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* hqq = find(view, "hqq nbits=4");
    ASSERT_NE(hqq, nullptr) << version;
    EXPECT_NE(hqq->settings.python.find("\"backend\": \"HQQ\""), std::string::npos) << version;
    EXPECT_EQ(hqq->settings.python.find("\"backend\": \"hqq\""), std::string::npos) << version;
    EXPECT_EQ(std::count_if(view.options.begin(), view.options.end(),
                            [](const RuntimeOption& o) { return o.name == "hqq nbits=4"; }),
              1);
  }
  for (const std::string version : {"4.56.0", "4.57.1"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* hqq = find(view, "hqq nbits=4");
    ASSERT_NE(hqq, nullptr) << version;
    EXPECT_NE(hqq->settings.python.find("\"backend\": \"hqq\""), std::string::npos) << version;
    EXPECT_EQ(hqq->settings.python.find("\"backend\": \"HQQ\""), std::string::npos) << version;
    EXPECT_EQ(hqq->k_spec, canonical("int:bits=4,axis=token,group=64,asym,residual_window=128"));
    EXPECT_FALSE(hqq->settings.verified);  // the release boundary is not confirmed from tags
    EXPECT_TRUE(lists_not_emulated(view, "\"backend\": \"hqq\", \"nbits\": 1"));
  }
  // quanto is spelled the same on both sides.
  for (const std::string version : {"4.55.4", "4.56.0"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* quanto = find(view, "quanto nbits=4 (defaults)");
    ASSERT_NE(quanto, nullptr) << version;
    EXPECT_NE(quanto->settings.python.find("\"backend\": \"quanto\""), std::string::npos) << version;
    EXPECT_NE(quanto->settings.python.find("\"axis_key\": 0"), std::string::npos) << version;
  }
}

// QuantizedCache is first in 4.42.0.dev0 (PR #30483): older versions are refused. The quanto backend goes
// through the older quanto package before 4.47 (unverified arithmetic) and needs optimum-quanto > 0.2.5 from
// 4.47 (PR #34750).
TEST(RuntimeVersionsServing, TransformersQuantizedCacheFrom442AndOptimumQuantoFrom447) {
  const RuntimeTable t = shipped("transformers");
  EXPECT_EQ(t.oldest, "4.42.0");
  EXPECT_THROW(runtime_options(t, "4.41.2"), InputError);
  for (const std::string version : {"4.42.0", "4.46.3"}) {
    const RuntimeView view = runtime_options(t, version);
    for (const char* name : {"quanto nbits=4 (defaults)", "quanto nbits=2"}) {
      const RuntimeOption* quanto = find(view, name);
      ASSERT_NE(quanto, nullptr) << version << " " << name;
      EXPECT_FALSE(quanto->settings.verified) << version;
      EXPECT_TRUE(any_contains(quanto->settings.caveats, "older quanto package")) << version;
      EXPECT_FALSE(any_contains(quanto->settings.caveats, "is_quanto_greater")) << version;
    }
  }
  for (const std::string version : {"4.47.0", "4.57.1"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* quanto = find(view, "quanto nbits=4 (defaults)");
    ASSERT_NE(quanto, nullptr) << version;
    EXPECT_TRUE(quanto->settings.verified) << version;
    EXPECT_TRUE(any_contains(quanto->settings.caveats, "Needs optimum-quanto newer than 0.2.5")) << version;
    EXPECT_EQ(std::count_if(view.options.begin(), view.options.end(),
                            [](const RuntimeOption& o) { return o.name == "quanto nbits=4 (defaults)"; }),
              1);
  }
}

// A TurboMind option runs on the PyTorch engine for a model TurboMind lacks (archs.py autoget_backend).
TEST(RuntimeVersionsServing, LmdeployTurbomindOptionsNameTheirFallback) {
  const RuntimeView view = runtime_options(shipped("lmdeploy"), "0.16.0");
  for (const char* name : {"quant-policy 8 (int8, TurboMind)", "quant-policy 4 (int4, TurboMind)"}) {
    const RuntimeOption* o = find(view, name);
    ASSERT_NE(o, nullptr) << name;
    EXPECT_TRUE(any_contains(o->settings.caveats, "Fallback to pytorch engine")) << name;
  }
}

TEST(RuntimeVersionsServing, LmdeployFp8PoliciesFrom0140OnThePytorchEngine) {
  const RuntimeTable t = shipped("lmdeploy");
  for (const std::string version : {"0.12.3", "0.13.0"}) {
    const RuntimeView view = runtime_options(t, version);
    EXPECT_EQ(find(view, "quant-policy 16 (fp8 e4m3, PyTorch engine)"), nullptr) << version;
    EXPECT_EQ(find(view, "quant-policy 17 (fp8 e5m2, PyTorch engine)"), nullptr) << version;
    EXPECT_NE(find(view, "quant-policy 8 (int8, TurboMind)"), nullptr) << version;
    EXPECT_NE(find(view, "quant-policy 8 (int8, PyTorch engine)"), nullptr) << version;
  }
  for (const std::string version : {"0.14.0", "0.16.0"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* e4m3 = find(view, "quant-policy 16 (fp8 e4m3, PyTorch engine)");
    ASSERT_NE(e4m3, nullptr) << version;
    EXPECT_EQ(e4m3->k_spec, "fp8:format=e4m3,scale=unit");
    EXPECT_EQ(e4m3->v_spec, "fp8:format=e4m3,scale=unit");
    EXPECT_TRUE(has(e4m3->settings.cli, "--quant-policy 16"));
    EXPECT_TRUE(has(e4m3->settings.cli, "--backend pytorch"));
    EXPECT_EQ(e4m3->settings.python, "PytorchEngineConfig(quant_policy=16)");
    EXPECT_TRUE(any_contains(e4m3->settings.unsupported, "TurboMind"));
    EXPECT_TRUE(e4m3->settings.verified);
    const RuntimeOption* e5m2 = find(view, "quant-policy 17 (fp8 e5m2, PyTorch engine)");
    ASSERT_NE(e5m2, nullptr) << version;
    EXPECT_EQ(e5m2->k_spec, "fp8:format=e5m2,scale=unit");
    EXPECT_TRUE(has(e5m2->settings.cli, "--quant-policy 17"));
  }
  EXPECT_FALSE(lists_not_emulated(runtime_options(t, "0.14.0"), "--quant-policy 16"));
  // int8/int4 store scales and zeros in the model dtype (f16 assumed). The PyTorch engine keeps a float
  // zero point -min/scale and rounds by trunc(v + 0.5) (fill_kv_cache.py); TurboMind keeps the minimum and
  // rounds ties to even (quantization.h).
  // The PyTorch engine takes quant_policy from v0.6.2 (commit 4126067ad, #2438); before, its
  // PytorchEngineConfig has no such field and serve passed --quant-policy to TurboMind only.
  const RuntimeView v040 = runtime_options(t, "0.4.0");
  for (const std::string version : {"0.4.0", "0.6.1"}) {
    const RuntimeView view = runtime_options(t, version);
    EXPECT_EQ(find(view, "quant-policy 8 (int8, PyTorch engine)"), nullptr) << version;
    EXPECT_EQ(find(view, "quant-policy 4 (int4, PyTorch engine)"), nullptr) << version;
  }
  const RuntimeView v062 = runtime_options(t, "0.6.2");
  EXPECT_NE(find(v062, "quant-policy 4 (int4, PyTorch engine)"), nullptr);
  const RuntimeOption* pytorch = find(v062, "quant-policy 8 (int8, PyTorch engine)");
  ASSERT_NE(pytorch, nullptr);
  EXPECT_EQ(pytorch->k_spec, canonical("tokenint:bits=8,zero=float,round=up,scale=f16"));
  EXPECT_TRUE(has(pytorch->settings.cli, "--backend pytorch"));
  EXPECT_TRUE(pytorch->settings.verified);
  const RuntimeOption* turbomind = find(v040, "quant-policy 4 (int4, TurboMind)");
  ASSERT_NE(turbomind, nullptr);
  EXPECT_EQ(turbomind->k_spec, canonical("tokenint:bits=4,zero=min,round=even,scale=f16,reciprocal"));
  EXPECT_FALSE(turbomind->settings.verified);  // its model-dtype arithmetic is not expressible
  // TurboQuant (42) is listed from 0.13.0 only.
  EXPECT_FALSE(lists_not_emulated(runtime_options(t, "0.12.3"), "--quant-policy 42"));
  EXPECT_TRUE(lists_not_emulated(runtime_options(t, "0.13.0"), "--quant-policy 42"));
  EXPECT_EQ(runtime_options(t, "latest").version, "0.16.0");
}

// --calculate-kv-scales: accepted at every tag through v0.27.1; PR #49389's removal is in none of them, so
// the first release without it (0.28.0) is assumed and the option stays unverified.
TEST(RuntimeVersionsServing, VllmCalculateKvScalesUntilItsRemoval) {
  const RuntimeTable t = shipped("vllm");
  for (const std::string version : {"0.25.1", "0.26.0", "0.27.1"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* calc = find(view, "fp8 (e4m3), --calculate-kv-scales");
    ASSERT_NE(calc, nullptr) << version;
    EXPECT_TRUE(has(calc->settings.cli, "--calculate-kv-scales"));
    EXPECT_FALSE(calc->settings.verified);
    EXPECT_TRUE(any_contains(calc->settings.caveats, "PR #49389"));
  }
  for (const std::string version : {"0.28.0", "0.29.0"}) {
    const RuntimeView view = runtime_options(t, version);
    EXPECT_EQ(find(view, "fp8 (e4m3), --calculate-kv-scales"), nullptr) << version;
    for (const RuntimeOption& o : view.options) {
      EXPECT_FALSE(has(o.settings.cli, "--calculate-kv-scales")) << version << ": " << o.name;
    }
  }
}

// Read at the tags: int8/fp8_per_token_head from v0.20.0, int4 from v0.25.0; the int8 store truncated
// its codes toward zero through v0.23.0 and rounds half away from zero from v0.24.0.
TEST(RuntimeVersionsServing, VllmPerTokenHeadModesFromTheirFirstReleases) {
  const RuntimeTable t = shipped("vllm");
  for (const std::string version : {"0.19.1", "0.11.2"}) {
    const RuntimeView view = runtime_options(t, version);
    EXPECT_EQ(find(view, "int8_per_token_head"), nullptr) << version;
    EXPECT_EQ(find(view, "fp8_per_token_head"), nullptr) << version;
    EXPECT_EQ(find(view, "int4_per_token_head"), nullptr) << version;
  }
  struct Case {
    const char* version;
    const char* round;
  };
  for (const Case& c : {Case{"0.20.0", "trunc"}, Case{"0.23.0", "trunc"}, Case{"0.24.0", "away"}, Case{"0.28.0", "away"}}) {
    SCOPED_TRACE(c.version);
    const RuntimeView view = runtime_options(t, c.version);
    const auto named = [&](const std::string& name) {
      return std::count_if(view.options.begin(), view.options.end(), [&](const RuntimeOption& o) { return o.name == name; });
    };
    EXPECT_EQ(named("int8_per_token_head"), 1);  // one of the two entries in each release
    const RuntimeOption* int8 = find(view, "int8_per_token_head");
    ASSERT_NE(int8, nullptr);
    EXPECT_EQ(int8->k_spec, canonical(std::string("tokenint:bits=8,round=") + c.round + ",min_scale=1e-6,reciprocal"));
    EXPECT_TRUE(has(int8->settings.cli, "--kv-cache-dtype int8_per_token_head"));
    EXPECT_TRUE(int8->settings.verified);
    // Truncation leaves each row's largest code to the GPU's approximate division; rounding does not.
    EXPECT_EQ(any_contains(int8->settings.caveats, "div.full.f32"), std::string(c.round) == "trunc");
    const RuntimeOption* fp8 = find(view, "fp8_per_token_head");
    ASSERT_NE(fp8, nullptr);
    EXPECT_EQ(fp8->k_spec, canonical("fp8:format=e4m3,scale=dynamic,granularity=token"));
    EXPECT_TRUE(fp8->settings.verified);  // the store's formula gives kvtune's codes (vllm_store_arithmetic_test.cpp)
    EXPECT_TRUE(any_contains(fp8->settings.caveats, "1e-6 floor"));
    EXPECT_EQ(find(view, "int4_per_token_head") != nullptr, compare_runtime_versions("semver", c.version, "0.25.0") >= 0);
  }
  for (const std::string version : {"0.25.0", "0.28.0"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* int4 = find(view, "int4_per_token_head");
    ASSERT_NE(int4, nullptr) << version;
    // vLLM's randomized Hadamard with its own signs, an integer zero point hidden in the scale's mantissa.
    const std::string spec =
        canonical("tokenint:bits=4,zero=int,round=away,min_scale=1e-6,reciprocal,zero_in_scale,rotation=rht");
    EXPECT_EQ(int4->k_spec, spec);
    EXPECT_EQ(int4->v_spec, spec);
    EXPECT_TRUE(int4->settings.verified);  // the same write kernel from v0.25.0 through v0.27.1
    EXPECT_TRUE(any_contains(int4->settings.unsupported, "power of two"));
    EXPECT_TRUE(any_contains(int4->settings.caveats, "randomized Hadamard"));
  }
}

TEST(RuntimeVersionsServing, VllmPerHeadCheckpointScalesAndNotEmulatedTypes) {
  const RuntimeTable t = shipped("vllm");
  EXPECT_EQ(find(runtime_options(t, "0.14.1"), "fp8 (e4m3), per-head checkpoint scales"), nullptr);
  EXPECT_TRUE(find(runtime_options(t, "0.15.0"), "fp8 (e4m3), per-head checkpoint scales")->settings.verified);
  for (const std::string version : {"0.25.0", "0.28.0"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* per_head = find(view, "fp8 (e4m3), per-head checkpoint scales");
    ASSERT_NE(per_head, nullptr) << version;
    EXPECT_EQ(per_head->k_spec, canonical("fp8:format=e4m3,scale=calibrated,granularity=head"));
    EXPECT_TRUE(any_contains(per_head->settings.unsupported, "FLASH_ATTN"));
    EXPECT_TRUE(any_contains(per_head->settings.unsupported, "FlashAttention is version 2"));  // FA3/FA4 only
    // Options that need a calibrated checkpoint say so; the unscaled one needs nothing.
    EXPECT_TRUE(any_contains(per_head->settings.needs, "per-head k_scale/v_scale"));
    const RuntimeOption* per_layer = find(view, "fp8 (e4m3), checkpoint scales");
    ASSERT_NE(per_layer, nullptr) << version;
    EXPECT_TRUE(any_contains(per_layer->settings.needs, "calibrated per-layer k_scale/v_scale"));
    const RuntimeOption* unit = find(view, "fp8 (e4m3), no checkpoint scales");
    ASSERT_NE(unit, nullptr) << version;
    EXPECT_TRUE(unit->settings.needs.empty());
    EXPECT_EQ(lists_not_emulated(view, "nvfp4_4over6"), version == "0.28.0");  // max/6 or max/4 per block
    // NVFP4's per-tensor scale is the layer's k_scale/v_scale as it is (kv_cache.py): 1.0 without a
    // checkpoint, else the exporter's, amax/448 from ModelOpt 0.42 and amax/(6*448) before.
    const RuntimeOption* nvfp4 = find(view, "nvfp4, no checkpoint scales");
    ASSERT_NE(nvfp4, nullptr) << version;
    EXPECT_EQ(nvfp4->k_spec, canonical("nvfp4:scale=static,value=1"));
    EXPECT_TRUE(nvfp4->settings.needs.empty());
    EXPECT_TRUE(nvfp4->settings.verified);
    const RuntimeOption* current = find(view, "nvfp4, ModelOpt 0.42+ checkpoint scales (amax/448)");
    ASSERT_NE(current, nullptr) << version;
    EXPECT_EQ(current->k_spec, "nvfp4:scale=calibrated,bound=448");
    EXPECT_TRUE(any_contains(current->settings.needs, "ModelOpt 0.42.0 or later"));
    EXPECT_FALSE(any_contains(current->settings.needs, "llm-compressor"));  // no 4-bit KV scheme from v0.24.0
    const RuntimeOption* older = find(view, "nvfp4, ModelOpt 0.41 or older checkpoint scales (amax/(6*448))");
    ASSERT_NE(older, nullptr) << version;
    EXPECT_EQ(older->k_spec, "nvfp4:scale=calibrated");
    EXPECT_FALSE(older->settings.verified);
  }
}

// gpu_memory_utilization's default, the cache share a recommendation counts sequences under: 0.9 through
// v0.19.1, 0.92 from v0.20.0 (cache.py at the tags).
TEST(RuntimeVersionsServing, VllmCacheShareFollowsItsMemoryDefault) {
  const RuntimeTable t = shipped("vllm");
  for (const auto& [version, share] : std::vector<std::pair<std::string, double>>{
           {"0.11.2", 0.9}, {"0.19.1", 0.9}, {"0.20.0", 0.92}, {"latest", 0.92}}) {
    const RuntimeView view = runtime_options(t, version);
    ASSERT_TRUE(view.context && view.context->cache_share) << version;
    EXPECT_EQ(view.context->cache_share->share, share) << version;
    EXPECT_FALSE(view.context->cache_share->of_free) << version;
  }
}

// nvfp4 is a CacheDType from v0.20.0 but runs from v0.21.0 (FlashInfer); nvfp4_4over6 and nvfp4_ds_mla
// are in no tag through v0.27.1 and are listed from 0.28.0, assumed.
TEST(RuntimeVersionsServing, VllmNvfp4FromItsFirstWorkingRelease) {
  const RuntimeTable t = shipped("vllm");
  for (const std::string version : {"0.11.2", "0.16.0", "0.20.0"}) {
    const RuntimeView view = runtime_options(t, version);
    EXPECT_EQ(find(view, "nvfp4, no checkpoint scales"), nullptr) << version;
    EXPECT_EQ(find(view, "nvfp4, ModelOpt 0.42+ checkpoint scales (amax/448)"), nullptr) << version;
  }
  for (const std::string version : {"0.21.0", "0.28.0"}) {
    const RuntimeView view = runtime_options(t, version);
    for (const char* name : {"nvfp4, no checkpoint scales", "nvfp4, ModelOpt 0.42+ checkpoint scales (amax/448)",
                             "nvfp4, ModelOpt 0.41 or older checkpoint scales (amax/(6*448))"}) {
      ASSERT_NE(find(view, name), nullptr) << name << " at " << version;
    }
  }
  for (const char* name : {"nvfp4_4over6", "nvfp4_ds_mla"}) {
    EXPECT_FALSE(lists_not_emulated(runtime_options(t, "0.27.1"), name)) << name;
    EXPECT_TRUE(lists_not_emulated(runtime_options(t, "0.28.0"), name)) << name;
  }
  EXPECT_TRUE(lists_not_emulated(runtime_options(t, "0.11.2"), "fp8_ds_mla"));
  EXPECT_FALSE(lists_not_emulated(runtime_options(t, "0.19.1"), "turboquant_k8v4"));
  EXPECT_TRUE(lists_not_emulated(runtime_options(t, "0.20.0"), "turboquant_k8v4"));
}

// --kv-cache-dtype-skip-layers is judged as a layer exemption (layer_exemption.h) from 0.19.0 (cache.py at
// the tags); before that vLLM quantizes every layer.
TEST(RuntimeVersionsServing, VllmSkipLayersIsALayerExemptionFrom0190) {
  const RuntimeTable t = shipped("vllm");
  for (const std::string version : {"0.11.2", "0.18.0"}) EXPECT_FALSE(runtime_options(t, version).layer_exemption) << version;
  for (const std::string version : {"0.19.0", "0.28.0"}) {
    const RuntimeView view = runtime_options(t, version);
    ASSERT_TRUE(view.layer_exemption) << version;
    EXPECT_EQ(view.layer_exemption->k_spec, "bf16");
    EXPECT_TRUE(view.layer_exemption->settings.verified);
    EXPECT_FALSE(lists_not_emulated(view, "--kv-cache-dtype-skip-layers")) << version;
    // cache.py @002f10e0: attention type names such as 'sliding_window' in place of indices.
    EXPECT_EQ(view.layer_exemption->attention_types, std::vector<std::string>{"sliding_window"});
    const RuntimeOption* fp8 = find(view, "fp8 (e4m3), no checkpoint scales");
    ASSERT_NE(fp8, nullptr);
    const RuntimeOption exempt = with_exempt_layers(*fp8, *view.layer_exemption, {0, 31});
    EXPECT_EQ(exempt.settings.cli, (std::vector<std::string>{"--kv-cache-dtype fp8", "--kv-cache-dtype-skip-layers 0 31"}));
    EXPECT_NE(exempt.settings.python.find("kv_cache_dtype_skip_layers=[\"0\", \"31\"]"), std::string::npos);
  }
}

TEST(RuntimeVersionsServing, SglangScalesDefaultToOneAndNewTypesAreListed) {
  const RuntimeTable t = shipped("sglang");
  const RuntimeView view = runtime_options(t, "0.5.11");
  const RuntimeOption* unscaled = find(view, "fp8_e4m3, no scales");
  ASSERT_NE(unscaled, nullptr);
  EXPECT_EQ(unscaled->k_spec, "fp8:format=e4m3,scale=unit");
  EXPECT_TRUE(unscaled->settings.verified);  // documented in quantized_kv_cache.md
  // --int8-kv-cache was PR #22004's, closed without merging: no release offers it.
  for (const std::string version : {"0.5.11", "0.5.12", "0.5.13"}) {
    for (const RuntimeOption& o : runtime_options(t, version).options) {
      EXPECT_FALSE(has(o.settings.cli, "--int8-kv-cache")) << o.name << " at " << version;
    }
  }
  // The scales file is named as kvtune calibrate writes it: a bare <placeholder> is a shell redirection.
  const RuntimeOption* json_scales = find(view, "fp8_e4m3, JSON scales");
  ASSERT_NE(json_scales, nullptr);
  EXPECT_TRUE(has(json_scales->settings.cli, "--quantization-param-path sglang_kv_scales.json"));
  // One JSON scale per layer serves K and V (models/llama.py), and only some model classes load it.
  EXPECT_TRUE(any_contains(json_scales->settings.caveats, "gives it to K and V alike"));
  EXPECT_TRUE(any_contains(json_scales->settings.unsupported, "without load_kv_cache_scales"));
  // Checkpoint scales need no flag, and no model list.
  const RuntimeOption* checkpoint = find(view, "fp8_e4m3, checkpoint scales");
  ASSERT_NE(checkpoint, nullptr);
  EXPECT_EQ(checkpoint->settings.cli, (std::vector<std::string>{"--kv-cache-dtype fp8_e4m3"}));
  EXPECT_TRUE(checkpoint->settings.unsupported.empty());
  EXPECT_TRUE(any_contains(checkpoint->settings.needs, "k_scale/v_scale"));
  // The block-scaled floats are emulated (kvtune/codecs/microscale.h). SGLang's own FP4 quantizer rounds
  // E2M1 ties away from zero (kvfp4_tensor.py). mxfp8, nvfp4 and fp4_mx_block16 are among server_args.py's
  // choices from the v0.5.16 tag, not at v0.5.15.post1; from v0.5.16 fp4_e2m1 is refused at start.
  const std::vector<std::pair<std::string, std::string>> newer = {
      {"fp4_mx_block16", "mxfp4:block=16,round=away"},
      // The global scale: 1.0 without a checkpoint, the checkpoint's otherwise, times 6 on compute
      // capability 10.x (fp4_kv_cache_quant_method.py load_scales_from_model); ModelOpt's k_scale is
      // amax/(6*448) through 0.41 and amax/448 from 0.42.
      {"nvfp4, no checkpoint scales, compute capability 10.x", canonical("nvfp4:scale=static,value=6")},
      {"nvfp4, no checkpoint scales, compute capability 12.x", canonical("nvfp4:scale=static,value=1")},
      {"nvfp4, ModelOpt 0.41 or older checkpoint scales, compute capability 10.x", "nvfp4:scale=calibrated,bound=448"},
      {"nvfp4, ModelOpt 0.42+ checkpoint scales, compute capability 10.x",
       canonical("nvfp4:scale=calibrated,bound=74.66667")},
      {"nvfp4, ModelOpt 0.41 or older checkpoint scales, compute capability 12.x", "nvfp4:scale=calibrated"},
      {"nvfp4, ModelOpt 0.42+ checkpoint scales, compute capability 12.x", "nvfp4:scale=calibrated,bound=448"},
      {"mxfp8", "mxfp8"}};
  for (const std::string version : {"0.5.11", "0.5.12", "0.5.13", "0.5.15.post1", "0.5.16", "0.5.18"}) {
    const RuntimeView v = runtime_options(t, version);
    const bool listed = version == "0.5.16" || version == "0.5.18";
    const RuntimeOption* fp4 = find(v, "fp4_e2m1");
    ASSERT_EQ(fp4 != nullptr, !listed) << version;
    if (fp4 != nullptr) {
      EXPECT_EQ(fp4->k_spec, "mxfp4:block=16,round=away");
    }
    for (const auto& [name, spec] : newer) {
      const RuntimeOption* o = find(v, name);
      ASSERT_EQ(o != nullptr, listed) << name << " at " << version;
      if (o == nullptr) continue;
      EXPECT_EQ(o->k_spec, spec);
      EXPECT_FALSE(lists_not_emulated(v, name));
    }
  }
  // fp4_mx_block16's write path and nvfp4's SM10x scale were read at v0.5.16; mxfp8's write path was not.
  const RuntimeView later = runtime_options(t, "0.5.16");
  EXPECT_TRUE(find(later, "fp4_mx_block16")->settings.verified);
  EXPECT_TRUE(find(later, "nvfp4, no checkpoint scales, compute capability 10.x")->settings.verified);
  EXPECT_FALSE(find(later, "mxfp8")->settings.verified);
  // bf16 forces a bfloat16 cache; auto follows an FP8-KV checkpoint (configure_kv_cache_dtype at v0.5.11).
  const RuntimeOption* bf16 = find(view, "bf16 (--kv-cache-dtype bf16)");
  ASSERT_NE(bf16, nullptr);
  EXPECT_EQ(bf16->k_spec, "bf16");
  EXPECT_TRUE(bf16->settings.verified);
  const RuntimeOption* fp8kv = find(view, "auto, FP8-KV checkpoint");
  ASSERT_NE(fp8kv, nullptr);
  EXPECT_EQ(fp8kv->k_spec, "fp8:format=e4m3,scale=calibrated");
  EXPECT_TRUE(fp8kv->settings.verified);
  EXPECT_TRUE(any_contains(fp8kv->settings.needs, "kv_cache_quant_algo = FP8"));
  const RuntimeOption* old_ckpt = find(later, "nvfp4, ModelOpt 0.41 or older checkpoint scales, compute capability 10.x");
  ASSERT_NE(old_ckpt, nullptr);
  EXPECT_TRUE(any_contains(old_ckpt->settings.needs, "amax / (6 * 448)"));
  EXPECT_TRUE(any_contains(old_ckpt->settings.needs, "compute capability 10.x"));
  EXPECT_TRUE(any_contains(find(later, "fp4_mx_block16")->settings.caveats, "model dtype"));
  // Before 0.5.16 fp4_e2m1 says that later releases refuse it.
  EXPECT_TRUE(any_contains(find(view, "fp4_e2m1")->settings.caveats, "fp4_e2m1 is deprecated"));
  EXPECT_FALSE(runtime_options(t, "0.5.18").beyond_checked);
  EXPECT_TRUE(runtime_options(t, "0.5.19").beyond_checked);
}

TEST(RuntimeVersionsServing, TensorrtLlmAutoFollowsTheCheckpoint) {
  const RuntimeTable t = shipped("tensorrt-llm");
  for (const std::string version : {"1.3.0rc27", "1.4.0rc4"}) {
    const RuntimeView view = runtime_options(t, version);
    const RuntimeOption* plain = find(view, "auto, checkpoint without KV quantization (model dtype)");
    ASSERT_NE(plain, nullptr) << version;
    EXPECT_EQ(plain->k_spec, "bf16");
    const RuntimeOption* fp8kv = find(view, "auto, ModelOpt FP8-KV checkpoint");
    ASSERT_NE(fp8kv, nullptr) << version;
    // The PyTorch backend keeps FP8 KV scales at 1.0 whatever the checkpoint carries (trtllm.py).
    EXPECT_EQ(fp8kv->k_spec, "fp8:format=e4m3,scale=unit");
    EXPECT_TRUE(any_contains(fp8kv->settings.caveats, "follows the checkpoint"));
    EXPECT_TRUE(any_contains(fp8kv->settings.caveats, "keeps the FP8 KV scale at 1.0"));
    EXPECT_EQ(find(view, "fp8, ModelOpt checkpoint scales"), nullptr);  // the same cache as without scales
    const RuntimeOption* nvfp4 = find(view, "nvfp4, ModelOpt NVFP4-KV checkpoint");
    ASSERT_NE(nvfp4, nullptr) << version;
    EXPECT_EQ(nvfp4->k_spec, "nvfp4:scale=calibrated,bound=448");
    EXPECT_FALSE(nvfp4->settings.needs.empty());
    EXPECT_FALSE(nvfp4->settings.verified);
    EXPECT_TRUE(any_contains(nvfp4->settings.caveats, "TensorRT-LLM's tensor scale is amax/448"));
    // FP8 without KV scales: scale 1.0, one scalar for K and V (unfusedAttentionKernels_2_template.h).
    const RuntimeOption* fp8 = find(view, "fp8, checkpoint without KV scales");
    ASSERT_NE(fp8, nullptr) << version;
    EXPECT_EQ(fp8->k_spec, "fp8:format=e4m3,scale=unit");
    EXPECT_TRUE(fp8->settings.verified);
    // dtype='nvfp4' on a checkpoint without KV scales keeps the tensor scales at 1.0 (linear.py).
    const RuntimeOption* unscaled = find(view, "nvfp4, checkpoint without KV scales");
    ASSERT_NE(unscaled, nullptr) << version;
    EXPECT_EQ(unscaled->k_spec, canonical("nvfp4:scale=static,value=1"));
    EXPECT_TRUE(unscaled->settings.needs.empty());
    EXPECT_FALSE(unscaled->settings.verified);
  }
  EXPECT_TRUE(runtime_options(t, "1.4.0").beyond_checked);
}

}  // namespace
}  // namespace kvtune
