// Static K/V scales fitted on a capture and the files runtimes load them from
// (core/include/kvtune/kv_scale_files.h): fitted values against amax / 448 computed here, every
// writer against hand-made bytes or JSON, the checkpoint file read back, and a scenario that
// applies the loaded scales scoring exactly what the same static specs score.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "capture_fixture.h"
#include "kvtune/capture_scales.h"
#include "kvtune/error.h"
#include "kvtune/kv_scale_files.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using testing::capture_value;

class KvScales : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("kvtune-scales-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  void SetUp() override {
    fs::remove_all(dir_);
    testing::write_capture(dir_ / "cap");
  }
  void TearDown() override { fs::remove_all(dir_); }
  Capture capture() const { return open_capture((dir_ / "cap").string()); }
};

// amax over the fixture's tensor (0 = k, 1 = v) of one layer and head, all 160 tokens.
float amax(int tensor, int64_t layer, int64_t head) {
  float m = 0.0f;
  for (int64_t t = 0; t < 160; ++t) {
    for (int64_t c = 0; c < 32; ++c) m = std::max(m, std::abs(capture_value(tensor, layer, head, t, c)));
  }
  return m;
}

TEST_F(KvScales, FitsAmaxOver448PerLayerOrPerHead) {
  const SchemePtr fp8 = testing::make_scheme("fp8:format=e4m3,scale=calibrated");
  ScaleFitOptions o;
  o.granularity = ScaleGranularity::head;
  const CaptureScales s = fit_capture_scales(capture(), *fp8, *fp8, o);
  ASSERT_EQ(s.layers.size(), 2u);
  for (const LayerScales& l : s.layers) {
    ASSERT_EQ(l.k_heads.size(), 2u);
    for (int64_t h = 0; h < 2; ++h) {
      EXPECT_EQ(float(l.k_heads[size_t(h)]), amax(0, l.layer, h) / 448.0f) << l.layer << " " << h;
      EXPECT_EQ(float(l.v_heads[size_t(h)]), amax(1, l.layer, h) / 448.0f) << l.layer << " " << h;
    }
    EXPECT_EQ(l.k, std::max(l.k_heads[0], l.k_heads[1]));  // the layer's scale: its largest head's
  }
  o.granularity = ScaleGranularity::layer;
  o.margin = 2.0;
  const CaptureScales doubled = fit_capture_scales(capture(), *fp8, *fp8, o);
  EXPECT_EQ(doubled.layers[0].k, 2.0 * s.layers[0].k);
  EXPECT_TRUE(doubled.layers[0].k_heads.empty());
  o.margin = 1.0;
  o.percentile = 50.0;
  EXPECT_LT(fit_capture_scales(capture(), *fp8, *fp8, o).layers[0].k, s.layers[0].k);

  EXPECT_THAT(testing::input_error([&] { fit_capture_scales(capture(), *testing::make_scheme("fp8"), *fp8, {}); }),
              HasSubstr("--k scheme 'fp8:format=e4m3,scale=unit' has no static scales to fit"));
  o.samples = {3};
  EXPECT_THAT(testing::input_error([&] { fit_capture_scales(capture(), *fp8, *fp8, o); }), HasSubstr("sample 3 is outside"));
}

CaptureScales two_layers(ScaleGranularity g) {
  CaptureScales s;
  s.granularity = g;
  s.model_layers = 2;
  s.kv_heads = 2;
  s.layers = {{0, 0.5, 0.25, {}, {}}, {1, 2.0, 1.0, {}, {}}};
  if (g == ScaleGranularity::head) {
    s.layers[0].k_heads = {0.5, 0.125};
    s.layers[0].v_heads = {0.25, 0.25};
    s.layers[1].k_heads = {2.0, 1.5};
    s.layers[1].v_heads = {1.0, 0.75};
  }
  return s;
}

std::string bytes_text(const std::vector<std::byte>& b) { return std::string(reinterpret_cast<const char*>(b.data()), b.size()); }

std::string f32s(std::initializer_list<float> values) {
  std::string out;
  for (float f : values) out.append(reinterpret_cast<const char*>(&f), 4);
  return out;
}

TEST(KvScaleFiles, CheckpointTensorsAreLlmCompressorsNamesAndShapes) {
  // The header as the writer must produce it (nlohmann's sorted keys), padded to a multiple of 8.
  std::string header =
      R"({"__metadata__":{"format":"pt","producer":"kvtune calibrate"},)"
      R"("model.layers.0.self_attn.k_scale":{"data_offsets":[0,4],"dtype":"F32","shape":[1]},)"
      R"("model.layers.0.self_attn.v_scale":{"data_offsets":[4,8],"dtype":"F32","shape":[1]},)"
      R"("model.layers.1.self_attn.k_scale":{"data_offsets":[8,12],"dtype":"F32","shape":[1]},)"
      R"("model.layers.1.self_attn.v_scale":{"data_offsets":[12,16],"dtype":"F32","shape":[1]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string expected(8, '\0');
  for (int i = 0; i < 8; ++i) expected[size_t(i)] = char((header.size() >> (8 * i)) & 0xFF);
  expected += header + f32s({0.5f, 0.25f, 2.0f, 1.0f});
  EXPECT_EQ(bytes_text(checkpoint_kv_scales(two_layers(ScaleGranularity::layer))), expected);

  const std::string heads = bytes_text(checkpoint_kv_scales(two_layers(ScaleGranularity::head)));
  EXPECT_THAT(heads, HasSubstr(R"("model.layers.1.self_attn.v_scale":{"data_offsets":[24,32],"dtype":"F32","shape":[2,1,1]})"));
  EXPECT_EQ(heads.substr(heads.size() - 32), f32s({0.5f, 0.125f, 0.25f, 0.25f, 2.0f, 1.5f, 1.0f, 0.75f}));
}

TEST(KvScaleFiles, QuantizationConfigAndSglangJsonAreTheSchemasTheRuntimesRead) {
  EXPECT_EQ(checkpoint_quantization_config(two_layers(ScaleGranularity::layer)),
            "{\n  \"quantization_config\": {\n    \"config_groups\": {},\n    \"kv_cache_scheme\": {\n"
            "      \"dynamic\": false,\n      \"num_bits\": 8,\n      \"strategy\": \"tensor\",\n"
            "      \"symmetric\": true,\n      \"type\": \"float\"\n    },\n"
            "    \"quant_method\": \"compressed-tensors\"\n  }\n}\n");
  EXPECT_THAT(checkpoint_quantization_config(two_layers(ScaleGranularity::head)), HasSubstr("\"strategy\": \"attn_head\""));
  std::string why;
  EXPECT_EQ(sglang_quantization_params(two_layers(ScaleGranularity::layer), "llama", 2, why).value_or(why),
            "{\n  \"kv_cache\": {\n    \"dtype\": \"float8_e4m3fn\",\n    \"scaling_factor\": {\n"
            "      \"0\": {\n        \"0\": 0.5,\n        \"1\": 2.0\n      },\n"
            "      \"1\": {\n        \"0\": 0.5,\n        \"1\": 2.0\n      }\n    }\n  },\n"
            "  \"model_type\": \"llama\"\n}\n");
  EXPECT_FALSE(sglang_quantization_params(two_layers(ScaleGranularity::head), "llama", 1, why));
  EXPECT_THAT(why, HasSubstr("per KV head"));
  CaptureScales partial = two_layers(ScaleGranularity::layer);
  partial.model_layers = 4;
  EXPECT_FALSE(sglang_quantization_params(partial, "llama", 1, why));
  EXPECT_THAT(why, HasSubstr("every one of the model's 4 layers; the capture has 2"));
  EXPECT_FALSE(sglang_quantization_params(two_layers(ScaleGranularity::layer), "", 1, why));
  EXPECT_THAT(why, HasSubstr("--model-type"));
}

TEST_F(KvScales, CheckpointFilesReadBackAndBadOnesAreNamed) {
  const std::string path = (dir_ / "s.safetensors").string();
  auto write = [&](const std::vector<std::byte>& b) {
    std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  };
  write(checkpoint_kv_scales(two_layers(ScaleGranularity::head)));
  const LoadedKvScales heads = read_checkpoint_kv_scales(path);
  EXPECT_EQ(heads.k(0, 1), 0.125);
  EXPECT_EQ(heads.v(1, 1), 0.75);
  EXPECT_THAT(testing::input_error([&] { heads.k(5, 0); }), HasSubstr("no scales for layer 5"));
  write(checkpoint_kv_scales(two_layers(ScaleGranularity::layer)));
  EXPECT_EQ(read_checkpoint_kv_scales(path).k(1, 1), 2.0);  // one scale for every head
  write(safetensors_image({{"model.layers.0.self_attn.k_scale", "F32", {1}, std::vector<std::byte>(4)}}));  // 0.0
  EXPECT_THAT(testing::input_error([&] { read_checkpoint_kv_scales(path); }), HasSubstr("not > 0"));
  const std::string one = f32s({0.5f});
  std::vector<std::byte> half(4);
  std::memcpy(half.data(), one.data(), 4);
  write(safetensors_image({{"model.layers.0.self_attn.k_scale", "F32", {1}, half}}));
  EXPECT_THAT(testing::input_error([&] { read_checkpoint_kv_scales(path); }), HasSubstr("layer 0 has a k_scale but no v_scale"));
  write(safetensors_image({{"other", "F32", {1}, half}}));
  EXPECT_THAT(testing::input_error([&] { read_checkpoint_kv_scales(path); }), HasSubstr("no model.layers.N.self_attn.k_scale"));
}

// A scenario that loads the scales applies them as a runtime would: its fp8 scale=calibrated pair
// scores exactly what fp8 scale=static with the same value scores.
TEST_F(KvScales, AScenarioAppliesLoadedScalesLikeStaticSpecs) {
  const SchemePtr fp8 = testing::make_scheme("fp8:format=e4m3,scale=calibrated");
  const CaptureScales s = fit_capture_scales(capture(), *fp8, *fp8, {});
  const std::vector<std::byte> file = checkpoint_kv_scales(s);
  std::ofstream(dir_ / "kv_scales.safetensors", std::ios::binary)
      .write(reinterpret_cast<const char*>(file.data()), std::streamsize(file.size()));
  auto run = [&](const std::string& scales, const std::string& spec) {
    const std::string text = "[workload]\nsource = \"cache\"\npath = \"cap\"\nlayers = [2]\n" + scales + "[[pairs]]\nk = \"" +
                             spec + "\"\nv = \"" + spec + "\"\n";
    return evaluate_scenario(parse_scenario(text, (dir_ / "s.toml").string()), builtin_registry()).at(0);
  };
  const EvalResult loaded = run("scales = \"kv_scales.safetensors\"\n", "fp8:format=e4m3,scale=calibrated");
  char exact[64];
  std::snprintf(exact, sizeof exact, "%.9g", s.layers[1].k);
  ASSERT_EQ(s.layers[1].k, s.layers[1].v);  // the fixture's K and V share one amax: one static spec serves both
  const EvalResult fixed = run("", std::string("fp8:format=e4m3,scale=static,value=") + exact);
  EXPECT_EQ(loaded.pairs[0].samples[size_t(Metric::rel_out_err)], fixed.pairs[0].samples[size_t(Metric::rel_out_err)]);
  EXPECT_THAT(testing::input_error([&] { run("scales = \"nope.safetensors\"\n", "fp8"); }), HasSubstr("s.toml:5:10:"));
}

}  // namespace
}  // namespace kvtune
