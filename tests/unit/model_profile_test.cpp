// Model profiles (configs/profiles): the key/value statistics a scenario takes with
// `[workload] profile = "NAME"` — read beneath the scenario's own settings, errors named at the
// profile's own file:line:column, and every shipped profile readable with its model's preset.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kvtune/error.h"
#include "kvtune/model_preset.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

const fs::path kConfigs = testing::config_dir();

// A profile file of `text` in a fresh temporary folder; the lookup resolves every name to it.
class ProfileFile {
 public:
  explicit ProfileFile(const std::string& text) {
    dir_ = fs::temp_directory_path() / ("kvtune-profile-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
                                        "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream(dir_ / "mine.toml") << text;
  }
  ~ProfileFile() { fs::remove_all(dir_); }
  ProfileLookup lookup() const {
    return [p = dir_ / "mine.toml"](const std::string&) { return p; };
  }
  std::string path() const { return (dir_ / "mine.toml").string(); }

 private:
  fs::path dir_;
};

constexpr const char* kProfile = R"(name = "mine"
source = "a test"
[keys]
outlier_count = 2
outlier_pairs = true
outlier_band = [0.5, 1.0]
outlier_offset = 12.0
[queries_profile]
outlier_scale = 2.0
[sinks]
count = 3
key_norm = 1.5
[[overrides]]
layers = [1]
[overrides.sinks]
count = 0
)";

std::string scenario(const std::string& workload) {
  return "[workload]\ntokens = 256\nhead_dim = 32\nnum_layers = 4\nprofile = \"mine\"\n" + workload +
         "[[pairs]]\nk = \"none\"\nv = \"none\"\n";
}

TEST(ModelProfile, GivesTheStatisticsBeneathTheScenariosOwn) {
  const ProfileFile file(kProfile);
  const Scenario sc = parse_scenario(scenario("[workload.keys]\noutlier_offset = 30.0\n[[workload.overrides]]\n"
                                              "layers = [2]\nsinks = { count = 1 }\n"),
                                     "s.toml", {}, file.lookup());
  EXPECT_EQ(sc.profile, "mine");
  const WorkloadConfig& w = sc.workload;
  EXPECT_EQ(w.keys.outlier_count, 2);
  EXPECT_TRUE(w.keys.outlier_pairs);
  EXPECT_EQ(w.keys.outlier_band_low, 0.5);
  EXPECT_EQ(w.keys.outlier_offset, 30.0);  // the scenario's own value wins
  EXPECT_EQ(w.query.outlier_scale, 2.0);
  EXPECT_EQ(w.sinks.count, 3);
  EXPECT_EQ(w.sinks.key_norm, 1.5);
  EXPECT_EQ(w.sinks.mass, SinkProfile{}.mass);  // neither file sets it: the default
  ASSERT_EQ(w.overrides.size(), 2u);            // the profile's first, then the scenario's
  EXPECT_EQ(layer_config(w, 1).sinks.count, 0);
  EXPECT_EQ(layer_config(w, 2).sinks.count, 1);
  EXPECT_EQ(layer_config(w, 3).sinks.count, 3);

  // The scenario's explicit channels replace the profile's drawn ones.
  const Scenario own = parse_scenario(scenario("[workload.keys]\noutlier_channels = [1]\n"), "s.toml", {}, file.lookup());
  EXPECT_EQ(own.workload.keys.outlier_channels, (std::vector<int64_t>{1}));
  EXPECT_EQ(own.workload.keys.outlier_count, 0);
}

TEST(ModelProfile, NoProfileKeepsTheGenericStatistics) {
  const Scenario sc = parse_scenario(
      "[workload]\ntokens = 256\nhead_dim = 32\n[[pairs]]\nk = \"none\"\nv = \"none\"\n", "s.toml");
  EXPECT_EQ(sc.profile, "");
  EXPECT_EQ(sc.workload.keys.outlier_offset, 0.0);
  EXPECT_FALSE(sc.workload.keys.outlier_pairs);
  EXPECT_EQ(sc.workload.query.outlier_scale, 1.0);
}

std::string profile_error(const std::string& profile, const std::string& workload = "") {
  const ProfileFile file(profile);
  try {
    parse_scenario(scenario(workload), "s.toml", {}, file.lookup());
  } catch (const InputError& e) {
    return std::string(e.what()) + " [" + file.path() + "]";
  }
  return "no error";
}

// A bad value in the profile is named in the profile, at its line and column.
TEST(ModelProfile, RefusesBadProfilesNamingTheirFile) {
  EXPECT_THAT(profile_error("[keys]\noutlier_offset = \"big\"\n"),
              HasSubstr("mine.toml:2:18: 'outlier_offset' must be a number"));
  EXPECT_THAT(profile_error("[keys]\noutlier_band = [0.9, 0.1]\n"),
              HasSubstr("mine.toml:2:16: 'outlier_band' must be [low, high]"));
  EXPECT_THAT(profile_error("[needles]\ndepths = [0.5]\n"),
              HasSubstr("mine.toml:1:2: unknown key 'needles' at the top level"));
  EXPECT_THAT(profile_error("[keys]\noutlier_cont = 2\n"),
              HasSubstr("mine.toml:2:1: unknown key 'outlier_cont' in [keys]"));
  EXPECT_THAT(profile_error("[[overrides]]\nlayers = [9]\n"),
              HasSubstr("mine.toml:2:11: 'layers' entries must be integers in 0..3"));
  EXPECT_THAT(profile_error("[keys\n"), HasSubstr("mine.toml:1:"));
  EXPECT_THAT(profile_error("[keys]\noutlier_count = 3\noutlier_pairs = true\n"),
              HasSubstr("outlier_pairs needs an even outlier_count"));
  // More sinks than the workload's 256 tokens can hold: named at `profile`, with what to do (the
  // message had said only "[workload]"); a workload that lowers the count is fine.
  EXPECT_THAT(profile_error("[sinks]\ncount = 300\n"),
              HasSubstr("s.toml:5:11: the profile's [sinks] count 300 does not fit this workload's 256 tokens"));
  EXPECT_EQ(profile_error("[sinks]\ncount = 300\n", "[workload.sinks]\ncount = 2\n"), "no error");
  EXPECT_THAT(profile_error("fitted_key_order = \"sideways\"\n"),
              HasSubstr("mine.toml:1:20: 'fitted_key_order' must be one of: as_computed, adjacent"));
}

TEST(ModelProfile, RefusesAProfileThatCannotBeFound) {
  using P = std::string;
  const auto error = [](const std::string& text, const ProfileLookup& lookup) {
    try {
      parse_scenario(text, "s.toml", {}, lookup);
    } catch (const InputError& e) {
      return P(e.what());
    }
    return P("no error");
  };
  const std::string named = "[workload]\ntokens = 256\nprofile = \"nope\"\n[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  EXPECT_THAT(error(named, {}), HasSubstr("s.toml:3:11: model profiles are not available here"));
  EXPECT_THAT(error(named, [](const std::string& n) { return find_model_profile(kConfigs, n); }),
              HasSubstr("s.toml:3:11: unknown model profile 'nope'; the model profiles in"));
  EXPECT_THAT(error(named, [](const std::string& n) { return find_model_profile(kConfigs, n); }), HasSubstr("qwen3"));
  const std::string number = "[workload]\ntokens = 256\nprofile = 3\n[[pairs]]\nk = \"none\"\nv = \"none\"\n";
  EXPECT_THAT(error(number, {}), HasSubstr("s.toml:3:11: 'profile' must be a model profile name"));
  EXPECT_THAT(error(named, [](const std::string&) { return fs::path("/nonexistent/x.toml"); }),
              HasSubstr("/nonexistent/x.toml"));
}

// Every shipped profile reads with the presets it is written for, and says where it comes from.
TEST(ModelProfile, EveryShippedProfileReadsWithItsModels) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> uses = {
      {"llama", {"llama-2-7b", "llama-3.1-8b", "llama-3.2-1b"}},
      {"qwen3", {"qwen3-8b", "qwen3-30b-a3b"}},
      {"qwen3-0.6b", {"qwen3-0.6b"}}};
  EXPECT_EQ(model_profile_names(kConfigs), (std::vector<std::string>{"llama", "qwen3", "qwen3-0.6b"}));
  for (const auto& [name, models] : uses) {
    for (const std::string& model : models) {
      const Scenario sc = parse_scenario(
          "[workload]\nmodel = \"" + model + "\"\nprofile = \"" + name + "\"\ntokens = 512\n[[pairs]]\nk = \"none\"\nv = \"none\"\n",
          "s.toml", [](const std::string& n) { return find_model_preset(kConfigs, n); },
          [](const std::string& n) { return find_model_profile(kConfigs, n); });
      EXPECT_EQ(sc.profile, name);
      EXPECT_EQ(sc.profile_fitted_key_order, "as_computed") << name;  // fitted to llama.cpp in that order
      EXPECT_GT(sc.workload.keys.outlier_offset, 0.0) << name;
      EXPECT_TRUE(sc.workload.keys.outlier_pairs) << name;
    }
  }
}

}  // namespace
}  // namespace kvtune
