// The plugin loader and SDK (issue #6): every refusal names what it must, and a plugin's schemes
// behave like built-ins through the registry and the conformance checks. The test plugins are in
// tests/plugins/; their paths come in as compile definitions.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvtune/conformance.h"
#include "kvtune/error.h"
#include "kvtune/plugin_abi.h"
#include "kvtune/plugin_loader.h"
#include "kvtune/scenario.h"
#include "test_support.h"

namespace kvtune {
namespace {

using testing::absolute;
using ::testing::AllOf;
using ::testing::HasSubstr;

// The InputError message of f(), or a test failure.
template <class F>
std::string refusal(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError was thrown";
  return "";
}

TEST(PluginLoader, RefusesAMissingFile) {
  Registry r;
  EXPECT_THAT(refusal([&] { load_plugin(r, "/nonexistent/libnothing.so"); }),
              AllOf(HasSubstr("/nonexistent/libnothing.so"), HasSubstr("no such file")));
}

TEST(PluginLoader, RefusesAFileThatIsNotASharedLibrary) {
  Registry r;
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_NOT_A_PLUGIN); }),
              AllOf(HasSubstr(KVTUNE_TEST_NOT_A_PLUGIN), HasSubstr("is not a loadable shared library")));
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_DATA); }), HasSubstr("is a directory"));
}

TEST(PluginLoader, RefusesALibraryWithoutTheEntryPoint) {
  Registry r;
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_NO_ENTRY_POINT); }),
              AllOf(HasSubstr(KVTUNE_TEST_NO_ENTRY_POINT), HasSubstr("no entry point 'kvtune_plugin_describe'")));
}

TEST(PluginLoader, RefusesAnotherAbiMajorNamingBothVersions) {
  Registry r;
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_WRONG_ABI); }),
              AllOf(HasSubstr(KVTUNE_TEST_WRONG_ABI), HasSubstr("built for kvtune plugin ABI 99.0"),
                    HasSubstr("this kvtune speaks ABI 1.0"), HasSubstr("major versions must match")));
}

TEST(PluginLoader, RefusesADuplicateFamilyNamingBothOriginsAndChangesNothing) {
  Registry r = builtin_registry();
  const std::vector<std::string> before = r.names();
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_DUPLICATE); }),
              AllOf(HasSubstr("scheme family 'int'"), HasSubstr(absolute(KVTUNE_TEST_DUPLICATE)),
                    HasSubstr("already registered by builtin (plugins/int/int_family.cpp:")));
  EXPECT_EQ(r.names(), before);
  // The same plugin twice is a duplicate too, with the plugin path as both origins.
  load_plugin(r, KVTUNE_TEST_C_PLUGIN);
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_C_PLUGIN); }),
              HasSubstr("'c_int8' from " + absolute(KVTUNE_TEST_C_PLUGIN) + " is already registered by " +
                        absolute(KVTUNE_TEST_C_PLUGIN)));
}

TEST(PluginLoader, RefusesAMalformedDescription) {
  Registry r;
  EXPECT_THAT(refusal([&] { load_plugin(r, KVTUNE_TEST_SHORT_DESCRIPTION); }),
              AllOf(HasSubstr("malformed description"), HasSubstr("below ABI 1.0's")));
}

TEST(PluginLoader, ReportsWhatThePluginSaysAboutItself) {
  Registry r;
  const PluginInfo info = load_plugin(r, KVTUNE_TEST_NF4);
  EXPECT_EQ(info.path, absolute(KVTUNE_TEST_NF4));
  EXPECT_EQ(info.name, "kvtune-nf4");
  EXPECT_EQ(info.version, "1.0.0");
  EXPECT_EQ(info.abi_major, uint32_t{KVTUNE_PLUGIN_ABI_MAJOR});
  EXPECT_EQ(info.families, std::vector<std::string>{"nf4"});
  const FamilyInfo* f = r.find("nf4");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->origin, info.path);
  ASSERT_EQ(f->params.size(), 2u);
  EXPECT_EQ(f->params[0].name, "group");
  EXPECT_EQ(f->params[0].examples, (std::vector<std::string>{"32", "64", "128"}));
  EXPECT_EQ(f->params[1].choices, (std::vector<std::string>{"f32", "f16"}));
}

// A scheme written in C goes through the registry like a built-in: validation, defaults,
// canonical specs, the policy keys, quantize/dequantize and every conformance check.
TEST(PluginLoader, ACSchemeWorksLikeABuiltin) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_C_PLUGIN});
  EXPECT_NE(r.find("int"), nullptr);
  EXPECT_EQ(r.make("c_int8")->spec(), "c_int8:bits=8");
  EXPECT_EQ(r.make("c_int8:bits=4,rotation=hadamard")->spec(), "c_int8:bits=4,rotation=hadamard");
  EXPECT_THAT(refusal([&] { r.make("c_int8:bits=9"); }), HasSubstr("'bits' = '9' is not valid; expected 2..8"));

  const SchemePtr s = r.make("c_int8:bits=8");
  EXPECT_EQ(s->family(), "c_int8");
  EXPECT_EQ(s->footprint(3, 16), size_t{3 * 4 + 3 * 16});
  const Matrix x = testing::normal_matrix(3, 16, 7);
  const std::vector<std::byte> packed = s->quantize(x, {});
  Matrix y(3, 16);
  s->dequantize(packed, {}, y);
  for (int64_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y.data()[i], x.data()[i], 0.03) << i;
  EXPECT_EQ(s->calibrate(x, {}), s);  // no calibrate callback: the scheme itself
  EXPECT_FALSE(s->device_format().has_value());
  for (const conformance::Result& result : conformance::check_scheme(*s, r)) {
    EXPECT_TRUE(result.passed) << result.check << ": " << result.message;
  }
}

TEST(PluginLoader, CheckPluginPassesTheCAndNf4Plugins) {
  for (const char* path : {KVTUNE_TEST_C_PLUGIN, KVTUNE_TEST_NF4}) {
    std::ostringstream out;
    EXPECT_EQ(conformance::check_plugin(path, builtin_registry(), out), 0) << out.str();
    EXPECT_THAT(out.str(), HasSubstr("checks passed"));
    EXPECT_THAT(out.str(), ::testing::Not(HasSubstr("FAIL")));
  }
  std::ostringstream out;
  conformance::check_plugin(KVTUNE_TEST_NF4, builtin_registry(), out);
  EXPECT_THAT(out.str(), AllOf(HasSubstr("PASS nf4 nf4:group=64 footprint_equals_packed_size\n"),
                               HasSubstr("PASS nf4 nf4:group=128,scale=f16 roundtrip_equals_dequantize_of_quantize\n"),
                               HasSubstr("PASS nf4 nf4:group=64,rotation=hadamard constant_block_is_kept\n")));
}

TEST(PluginLoader, CheckPluginRefusesWhatItCannotLoad) {
  std::ostringstream out;
  EXPECT_THROW(conformance::check_plugin(KVTUNE_TEST_WRONG_ABI, builtin_registry(), out), InputError);
}

TEST(PluginLoader, ALyingFootprintFailsTheFootprintCheck) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_LYING_FOOTPRINT});
  const SchemePtr s = r.make("c_liar");
  EXPECT_THAT(conformance::run_check("footprint_equals_packed_size", *s, r),
              HasSubstr("1x16: quantize returned 20 bytes, footprint says 24"));
  std::ostringstream out;
  EXPECT_EQ(conformance::check_plugin(KVTUNE_TEST_LYING_FOOTPRINT, builtin_registry(), out), 1);
  EXPECT_THAT(out.str(), AllOf(HasSubstr("FAIL c_liar c_liar:bits=8 footprint_equals_packed_size: "),
                               HasSubstr("checks failed")));
}

TEST(PluginLoader, AnErrorStatusBecomesAnInputErrorNamingThePlugin) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_FAILING});
  const Matrix x(2, 16, 1.0f);
  EXPECT_THAT(refusal([&] { r.make("c_failing")->quantize(x, {}); }),
              AllOf(HasSubstr("plugin " + absolute(KVTUNE_TEST_FAILING) + ", family 'c_failing': "),
                    HasSubstr("c_failing refuses every block (test plugin)")));
}

TEST(PluginLoader, ExceptionsInAnSdkPluginBecomeInputErrors) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_THROWING});
  const Matrix x(2, 16, 1.0f);
  const std::string where = "plugin " + absolute(KVTUNE_TEST_THROWING) + ", family 'cpp_throwing': ";
  EXPECT_THAT(refusal([&] { r.make("cpp_throwing")->quantize(x, {}); }),
              HasSubstr(where + "internal error: cpp_throwing: quantize always throws (test plugin)"));
  Matrix y(2, 16);
  EXPECT_THAT(refusal([&] { r.make("cpp_throwing")->roundtrip(x, {}, y); }), HasSubstr("quantize always throws"));
  EXPECT_THAT(refusal([&] { r.make("cpp_throwing:refuse")->quantize(x, {}); }),
              HasSubstr(where + "cpp_throwing refuses this block (test plugin)"));
  EXPECT_THAT(refusal([&] { r.make("cpp_throwing:explode"); }),
              HasSubstr(where + "internal error: cpp_throwing: the factory exploded (test plugin)"));
  // check-plugin reports the failures instead of stopping.
  std::ostringstream out;
  EXPECT_EQ(conformance::check_plugin(KVTUNE_TEST_THROWING, builtin_registry(), out), 1);
  EXPECT_THAT(out.str(), HasSubstr("FAIL cpp_throwing cpp_throwing footprint_equals_packed_size: threw: "));
}

// NF4 against its definition: codebook entries times the group's absmax, ties to the lower
// entry, two codes per byte (high nibble first) behind the scales.
TEST(PluginLoader, Nf4StoresTheQLoRaCodebook) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_NF4});
  const SchemePtr s = r.make("nf4:group=4");
  EXPECT_EQ(s->spec(), "nf4:group=4");
  EXPECT_EQ(r.make("nf4")->spec(), "nf4:group=64");
  EXPECT_DOUBLE_EQ(r.make("nf4")->bits_per_element(16, 128), 4.5);
  EXPECT_DOUBLE_EQ(r.make("nf4:group=128,scale=f16")->bits_per_element(16, 128), 4.125);
  // One row, two groups of 4 (scale 2, then 0) and a partial group of 1.
  Matrix x(1, 9);
  const float midpoint = static_cast<float>((double(0.07958029955625534f) + double(0.16093020141124725f)) / 2.0);
  const float row[9] = {2.0f, -2.0f, 0.0f, midpoint * 2.0f, 0, 0, 0, 0, -3.0f};
  std::copy(row, row + 9, x.data());
  const std::vector<std::byte> packed = s->quantize(x, {});
  ASSERT_EQ(packed.size(), size_t{3 * 4 + 5});  // three f32 scales, ceil(9 / 2) code bytes
  const auto* codes = reinterpret_cast<const uint8_t*>(packed.data()) + 12;
  EXPECT_EQ(codes[0], 0xF0);  // 1.0 -> 15, -1.0 -> 0
  // 0 -> 7; x / s is exactly the midpoint of 0.07958 (8) and 0.16093 (9) rounded to float: lower.
  EXPECT_EQ(codes[1], 0x78);
  EXPECT_EQ(codes[4], 0x00);  // -3 / 3 = -1 -> 0; an odd last element leaves the low nibble 0
  Matrix y(1, 9);
  s->dequantize(packed, {}, y);
  EXPECT_EQ(y(0, 0), 2.0f);
  EXPECT_EQ(y(0, 1), -2.0f);
  EXPECT_EQ(y(0, 3), 0.07958029955625534f * 2.0f);
  EXPECT_EQ(y(0, 8), -3.0f);
}

TEST(PluginLoader, PluginPathListsEachDirectorysSharedLibrariesSorted) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "kvtune-plugin-path-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  for (const char* f : {"a/z.so", "a/m.so", "a/readme.txt", "b/x.so"}) std::ofstream(dir / f) << "x";
  const std::string a = (dir / "a").string(), b = (dir / "b").string();
  EXPECT_EQ(plugin_path_entries(b + "::" + a),
            (std::vector<std::string>{b + "/x.so", a + "/m.so", a + "/z.so"}));
  EXPECT_TRUE(plugin_path_entries("").empty());
  EXPECT_THAT(refusal([&] { plugin_path_entries(a + ":" + (dir / "missing").string()); }),
              AllOf(HasSubstr("KVTUNE_PLUGIN_PATH"), HasSubstr("missing' is not a directory")));
  std::filesystem::remove_all(dir);
}

// ABI 1.1: a handle's traits reach SchemeTraits, through the policy wrappers too; a handle of ABI
// 1.0's size loads and declares nothing, whatever lies beyond its struct_size.
TEST(PluginLoader, TraitsComeThroughTheAbiWhenTheHandleHasThem) {
  EXPECT_EQ(KVTUNE_PLUGIN_ABI_MINOR, 1);
  Registry r = builtin_registry();
  load_plugin(r, KVTUNE_TEST_TRAITS);
  load_plugin(r, KVTUNE_TEST_ABI10_HANDLE);
  load_plugin(r, KVTUNE_TEST_SDK_TRAITS);
  const SchemeTraits declared = r.make("c_traits")->traits();
  EXPECT_TRUE(declared.rotates_rows);
  EXPECT_TRUE(declared.static_scales);
  EXPECT_FALSE(declared.estimates_logits);
  EXPECT_FALSE(declared.needs_positions);
  EXPECT_FALSE(declared.needs_rope);
  EXPECT_TRUE(declared.from_plugin);
  EXPECT_TRUE(r.make("c_traits:sink_tokens=2")->traits().static_scales);

  const SchemePtr old = r.make("c_abi10");
  EXPECT_EQ(old->spec(), "c_abi10:bits=8");
  EXPECT_FALSE(old->traits().rotates_rows);
  EXPECT_FALSE(old->traits().static_scales);
  EXPECT_TRUE(old->traits().from_plugin);
  EXPECT_EQ(old->traits().plugin_origin, absolute(KVTUNE_TEST_ABI10_HANDLE));  // no origin given
  load_plugin(r, KVTUNE_TEST_C_PLUGIN);  // a 1.1 handle that declares nothing
  EXPECT_FALSE(r.make("c_int8")->traits().rotates_rows);
  EXPECT_TRUE(r.make("c_int8:rotation=hadamard")->traits().rotates_rows);  // the wrapper's own

  // The SDK passes SchemeBase::traits() on.
  EXPECT_TRUE(r.make("sdk_sketch")->traits().estimates_logits);
  EXPECT_FALSE(r.make("sdk_sketch")->traits().static_scales);
  EXPECT_TRUE(r.make("sdk_sketch:calibrated")->traits().static_scales);
}

TEST(PluginLoader, RefusalsNameWhereThePluginCameFrom) {
  Registry r = builtin_registry();
  EXPECT_THAT(refusal([&] { load_plugin(r, "/nonexistent/libnothing.so", "KVTUNE_PLUGIN_PATH"); }),
              HasSubstr("KVTUNE_PLUGIN_PATH: plugin '/nonexistent/libnothing.so': no such file"));
  EXPECT_THAT(refusal([&] { registry_with_plugins(r, {KVTUNE_TEST_DUPLICATE}, "a sweep file's plugins"); }),
              HasSubstr("a sweep file's plugins: scheme family 'int' from "));
}

TEST(PluginLoader, ACreateThatReturnsOkWithoutASchemeIsNamed) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_CREATE_NULL});
  EXPECT_THAT(refusal([&] { r.make("c_null"); }),
              AllOf(HasSubstr("plugin " + absolute(KVTUNE_TEST_CREATE_NULL) + ", family 'c_null'"),
                    HasSubstr("create returned OK but no scheme")));
}

// A scheme whose spec names another family (a built-in's) would be evaluated as that family's scheme:
// refused where it is made.
TEST(PluginLoader, ASchemeMustNameItsOwnFamily) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_SPOOF});
  EXPECT_THAT(refusal([&] { r.make("c_spoof:bits=3"); }),
              AllOf(HasSubstr("plugin " + absolute(KVTUNE_TEST_SPOOF) + ", family 'c_spoof'"),
                    HasSubstr("the scheme's spec 'int:bits=3' names family 'int', not its own")));
}

// NaN out of finite input is the plugin's fault, named as such, not "the input exceeds the
// scheme's range" (what a built-in overflowing its format gets).
TEST(PluginLoader, NonFiniteOutputIsThePluginsFault) {
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_NAN}, "--plugin");
  const SchemePtr s = r.make("c_nan");
  const Matrix x = testing::normal_matrix(3, 16, 7);
  Matrix y(3, 16);
  const std::string why = refusal([&] { s->roundtrip(x, {}, y); });
  EXPECT_THAT(why, AllOf(HasSubstr("plugin scheme 'c_nan:bits=8' (from --plugin " + absolute(KVTUNE_TEST_NAN) + ")"),
                         HasSubstr("dequantize returned NaN at [0, 0]"), HasSubstr("a fault in the plugin")));
  const EvalPlan plan = build_plan({{"", "c_nan", "f16", ""}}, r, 8);
  const Case c = case_from_tensors(testing::normal_matrix(32, 16, 1), testing::normal_matrix(32, 16, 2),
                                   testing::normal_matrix(2, 16, 3));
  const std::string in_evaluation = refusal([&] { evaluate(plan, 1, [&](size_t) { return c; }, 1); });
  EXPECT_THAT(in_evaluation, HasSubstr("a fault in the plugin"));
  EXPECT_THAT(in_evaluation, ::testing::Not(HasSubstr("exceeds the scheme's range")));
}

TEST(PluginLoader, ProbingLoadsInAChildAndReportsACrash) {
  const Registry base = builtin_registry();
  EXPECT_EQ(probe_plugin(base, KVTUNE_TEST_NF4, "--plugin"), std::nullopt);
  const std::optional<std::string> crashed = probe_plugin(base, KVTUNE_TEST_DESCRIBE_SEGFAULT, "KVTUNE_PLUGIN_PATH");
  ASSERT_TRUE(crashed.has_value());
  EXPECT_THAT(*crashed, AllOf(HasSubstr(KVTUNE_TEST_DESCRIBE_SEGFAULT), HasSubstr("(from KVTUNE_PLUGIN_PATH)"),
                              HasSubstr("crashed: SIGSEGV")));
  EXPECT_THAT(refusal([&] { probe_plugin(base, KVTUNE_TEST_WRONG_ABI, "--plugin"); }),
              AllOf(HasSubstr("--plugin: "), HasSubstr("ABI 99.0")));
}

TEST(PluginLoader, EnumerateSpecsCountsRefusedCombinations) {
  Registry r;
  FamilyInfo f;
  f.name = "picky";
  f.origin = "test";
  f.params = {{.name = "a", .kind = ParamDomain::Kind::integer, .default_value = "1", .min = 1, .max = 3,
               .in_canonical = true}};
  const Registry built = builtin_registry();
  f.make = [built](const SchemeParams& p) -> SchemePtr {
    if (p.integer("a") == 2) throw InputError("'picky:a=2': a may not be 2");
    return built.make(p.integer("a") == 1 ? "q8_0" : "q4_0");
  };
  r.add(f);
  const conformance::SpecEnumeration e = conformance::enumerate_specs(*r.find("picky"), r);
  EXPECT_THAT(e.specs, ::testing::IsSupersetOf(std::vector<std::string>{"q4_0", "q8_0"}));
  EXPECT_EQ(e.refused, 1u);  // a=2; a=1 and a=3 (and the policies around the default a=1) are made
  ASSERT_EQ(e.refused_examples.size(), 1u);
  EXPECT_THAT(e.refused_examples[0], AllOf(::testing::StartsWith("picky:a=2: "), HasSubstr("a may not be 2")));
}

std::string check_output(const char* path, int expected_status, double timeout = 30) {
  std::ostringstream out;
  conformance::CheckPluginOptions options;
  options.timeout_seconds = timeout;
  EXPECT_EQ(conformance::check_plugin(path, builtin_registry(), out, options), expected_status) << out.str();
  return out.str();
}

TEST(PluginLoader, CheckPluginReportsTheCombinationsAFamilyRefuses) {
  const std::string out = check_output(KVTUNE_TEST_PICKY, 0);
  EXPECT_THAT(out, HasSubstr("note c_picky: 1 parameter combination was refused by the family and not checked, "
                             "e.g. c_picky:bits=5: plugin " + absolute(KVTUNE_TEST_PICKY) +
                             ", family 'c_picky': c_picky refuses this bits value (test plugin)\n"));
  EXPECT_THAT(out, HasSubstr("PASS c_picky c_picky:bits=2 deterministic\n"));
}

TEST(PluginLoader, CheckPluginReportsACrashAsThatChecksFailureAndGoesOn) {
  const std::string segv = check_output(KVTUNE_TEST_SEGFAULT, 1);
  EXPECT_THAT(segv, AllOf(HasSubstr("PASS c_segv c_segv:bits=8 accepts_a_shape\n"),
                          HasSubstr("FAIL c_segv c_segv:bits=8 footprint_equals_packed_size: crashed: SIGSEGV"),
                          HasSubstr("FAIL c_segv c_segv:bits=8,rotation=hadamard deterministic: crashed: SIGSEGV"),
                          HasSubstr("checks failed")));
  EXPECT_THAT(check_output(KVTUNE_TEST_ABORT, 1),
              HasSubstr("FAIL c_abort c_abort:bits=8 deterministic: crashed: SIGABRT"));
  const std::string exited = check_output(KVTUNE_TEST_EXIT, 1);
  EXPECT_THAT(exited, HasSubstr("FAIL c_exit c_exit:bits=8 deterministic: exited with status 3"));
  // Flushed before each fork: the child's exit() repeats nothing of the report.
  EXPECT_EQ(exited.find("plugin "), exited.rfind("plugin "));
}

TEST(PluginLoader, CheckPluginTimesOutAnEndlessCheck) {
  const std::string out = check_output(KVTUNE_TEST_ENDLESS, 1, 0.5);
  EXPECT_THAT(out, AllOf(HasSubstr("FAIL c_endless c_endless:bits=5 footprint_equals_packed_size: timed out after 0.5 s"),
                         HasSubstr("PASS c_endless c_endless:bits=8 footprint_equals_packed_size\n"),
                         HasSubstr("PASS c_endless c_endless:bits=5 accepts_a_shape\n")));
}

TEST(PluginLoader, CheckPluginRefusesAPluginWhoseDescribeCrashes) {
  std::ostringstream out;
  try {
    conformance::check_plugin(KVTUNE_TEST_DESCRIBE_SEGFAULT, builtin_registry(), out);
    ADD_FAILURE() << "no PluginFault";
  } catch (const PluginFault& e) {
    EXPECT_THAT(std::string(e.what()), AllOf(HasSubstr(KVTUNE_TEST_DESCRIBE_SEGFAULT), HasSubstr("crashed: SIGSEGV")));
  }
  EXPECT_EQ(out.str(), "");
}

// Checks that do not apply are SKIPs with the reason, counted apart, decided by traits().
TEST(PluginLoader, CheckPluginSkipsWhatDoesNotApply) {
  const std::string nf4 = check_output(KVTUNE_TEST_NF4, 0);
  EXPECT_THAT(nf4, AllOf(HasSubstr("SKIP nf4 nf4:group=64 device_format_matches_packed_layout: no device_format"),
                         HasSubstr("all 144 checks passed (24 skipped: not applicable)")));
  const std::string sketch = check_output(KVTUNE_TEST_SDK_TRAITS, 0);
  EXPECT_THAT(sketch, AllOf(HasSubstr("SKIP sdk_sketch sdk_sketch constant_block_is_kept: a score estimator"),
                            HasSubstr("SKIP sdk_sketch sdk_sketch requantizing_is_a_fixed_point: a score estimator"),
                            HasSubstr("PASS sdk_sketch sdk_sketch footprint_equals_packed_size\n")));
  const Registry r = registry_with_plugins(builtin_registry(), {KVTUNE_TEST_SDK_TRAITS});
  const conformance::Result skipped = conformance::check_one("constant_block_is_kept", *r.make("sdk_sketch"), r);
  EXPECT_EQ(skipped.outcome, conformance::Outcome::skip);
  // Under a token policy the plugin's declared trait still holds (it has no logits callback).
  const SchemePtr wrapped = r.make("sdk_sketch:rotation=hadamard,sink_tokens=2,block_tokens=2");
  EXPECT_TRUE(wrapped->traits().estimates_logits);
  EXPECT_EQ(conformance::check_one("constant_block_is_kept", *wrapped, r).outcome, conformance::Outcome::skip);
  EXPECT_TRUE(skipped.passed);
  EXPECT_EQ(conformance::check_one("constant_block_is_kept", *r.make("q8_0"), r).outcome, conformance::Outcome::pass);
  EXPECT_EQ(conformance::skip_reason("device_format_matches_packed_layout", *r.make("q8_0")), "");
}

}  // namespace
}  // namespace kvtune
