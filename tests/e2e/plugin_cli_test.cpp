// End-to-end tests of plugins through the command line: --plugin on a command, KVTUNE_PLUGIN_PATH,
// `kvtune schemes` naming where a family came from, `kvtune check-plugin` (exit 0 / 1 / 2), the
// loader's refusals (exit 2, a clear message), and a sweep file whose `plugins = [...]` puts a
// plugin's scheme beside the built-ins — a scheme that fails at run time fails its point only.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

class PluginCli : public ScratchDirTest {};

TEST_F(PluginCli, SchemesListsAPluginFamilyWithItsOrigin) {
  const RunResult r = run({"schemes", "--plugin", KVTUNE_TEST_NF4, "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const json families = json::parse(r.out)["families"];
  const auto nf4 = std::find_if(families.begin(), families.end(), [](const json& f) { return f["name"] == "nf4"; });
  ASSERT_NE(nf4, families.end());
  EXPECT_EQ((*nf4)["origin"], fs::canonical(KVTUNE_TEST_NF4).string());
  const auto q8 = std::find_if(families.begin(), families.end(), [](const json& f) { return f["name"] == "q8_0"; });
  ASSERT_NE(q8, families.end());
  EXPECT_THAT((*q8)["origin"].get<std::string>(), HasSubstr("builtin"));

  // The same through KVTUNE_PLUGIN_PATH: every *.so of the listed directories.
  fs::create_directories(path("plugins"));
  fs::copy_file(KVTUNE_TEST_NF4, path("plugins") / "nf4.so");
  ::setenv("KVTUNE_PLUGIN_PATH", (path("empty-entry").string() + "-absent:" + path("plugins").string()).c_str(), 1);
  const RunResult missing_dir = run({"schemes"});
  ::setenv("KVTUNE_PLUGIN_PATH", (":" + path("plugins").string()).c_str(), 1);
  const RunResult from_env = run({"schemes"});
  ::unsetenv("KVTUNE_PLUGIN_PATH");
  EXPECT_EQ(missing_dir.status, 2);
  EXPECT_THAT(missing_dir.err, HasSubstr("empty-entry-absent"));
  ASSERT_EQ(from_env.status, 0) << from_env.err;
  EXPECT_THAT(from_env.out, HasSubstr("nf4  -  "));
  EXPECT_THAT(from_env.out, HasSubstr("from " + fs::canonical(path("plugins") / "nf4.so").string()));

  // A plugin scheme works in any command, e.g. as a pair in simulate.
  write_text(path("s.toml"), "[workload]\ntokens = 256\nhead_dim = 64\n[[pairs]]\nk = \"nf4:group=32\"\nv = \"nf4\"\n");
  const RunResult sim = run({"simulate", path("s.toml").string(), "--plugin", KVTUNE_TEST_NF4, "--json"});
  ASSERT_EQ(sim.status, 0) << sim.err;
  EXPECT_DOUBLE_EQ(json::parse(sim.out)["rows"][0]["v_bits"].get<double>(), 4.5);  // 4-bit codes + an f32 scale per 64
}

TEST_F(PluginCli, CheckPluginPassesAGoodPluginAndFailsAFootprintThatLies) {
  const RunResult good = run({"check-plugin", KVTUNE_TEST_NF4});
  EXPECT_EQ(good.status, 0) << good.err;
  EXPECT_THAT(good.out, HasSubstr("PASS nf4 "));
  EXPECT_THAT(good.out, HasSubstr("checks passed"));
  EXPECT_THAT(good.out, ::testing::Not(HasSubstr("FAIL")));

  const RunResult liar = run({"check-plugin", KVTUNE_TEST_LYING_FOOTPRINT});
  EXPECT_EQ(liar.status, 1);
  EXPECT_THAT(liar.out, HasSubstr("FAIL c_liar"));
  EXPECT_THAT(liar.out, HasSubstr("footprint"));

  const RunResult throwing = run({"check-plugin", KVTUNE_TEST_THROWING});
  EXPECT_EQ(throwing.status, 1);
  EXPECT_THAT(throwing.out, HasSubstr("quantize always throws"));
}

// Every refusal: exit status 2, the path and the reason, nothing on stdout.
TEST_F(PluginCli, RefusalsNameThePathAndTheReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {path("absent.so").string(), "absent.so"},
      {KVTUNE_TEST_NOT_A_PLUGIN, "not-a-plugin.so"},
      {KVTUNE_TEST_NO_ENTRY_POINT, "kvtune_plugin_describe"},
      {KVTUNE_TEST_WRONG_ABI, "ABI 99.0, but this kvtune speaks ABI 1.0"},
      {KVTUNE_TEST_DUPLICATE, "builtin"},
  };
  for (const auto& [plugin, message] : cases) {
    SCOPED_TRACE(plugin);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"schemes", "--plugin", plugin}, std::vector<std::string>{"check-plugin", plugin}}) {
      const RunResult r = run(args);
      EXPECT_EQ(r.status, 2) << args[0];
      EXPECT_THAT(r.err, HasSubstr(message)) << args[0];
      EXPECT_EQ(r.out, "") << args[0];
    }
  }
}

TEST_F(PluginCli, SweepFileLoadsItsPluginsAndAFailingSchemeFailsOnlyItsPoint) {
  fs::create_directories(path("libs"));
  fs::copy_file(KVTUNE_TEST_NF4, path("libs") / "nf4.so");
  write_text(path("sweep.toml"),
             "name = \"with a plugin\"\n"
             "plugins = [\"libs/nf4.so\", \"" + std::string(KVTUNE_TEST_THROWING) + "\"]\n"
             "[workload]\ntokens = 256\nhead_dim = 64\nqueries = 2\n"
             "[workload.keys]\noutlier_count = 2\noutlier_scale = 10.0\n"
             "[search]\nk = [\"nf4\", \"q4_0\", \"cpp_throwing\"]\nv = [\"nf4\", \"q4_0\"]\n"
             "[budget]\nmax_rel_out_err = 0.5\n");
  const RunResult r = run({"sweep", path("sweep.toml").string(), "--out", path("out").string(), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  size_t ok = 0, failed = 0;
  std::istringstream lines(read_text(path("out") / "results.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const json rec = json::parse(line);
    if (rec["k"] == "cpp_throwing") {
      ++failed;
      EXPECT_EQ(rec["status"], "error");
      EXPECT_THAT(rec["error"].get<std::string>(), HasSubstr("quantize always throws"));
    } else {
      ++ok;
      EXPECT_EQ(rec["status"], "ok");
    }
  }
  EXPECT_EQ(ok, 4u);      // nf4 and q4_0 for K, each with nf4 and q4_0 for V
  EXPECT_EQ(failed, 2u);  // cpp_throwing with each V
  // resolved.json names the plugins by absolute path, so merge can load them from anywhere.
  const json resolved = json::parse(read_text(path("out") / "resolved.json"));
  EXPECT_EQ(resolved["plugins"][0], fs::absolute(path("libs") / "nf4.so").lexically_normal().string());
  const RunResult merged = run({"merge", path("out").string(), "--out", path("merged").string(), "--json"});
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_EQ(json::parse(merged.out)["best"], json::parse(r.out)["best"]);

  write_text(path("bad.toml"), "plugins = [\"libs/absent.so\"]\n[workload]\ntokens = 64\nhead_dim = 16\n"
                               "[search]\nk = [\"q8_0\"]\nv = [\"q8_0\"]\n");
  const RunResult bad = run({"sweep", path("bad.toml").string(), "--out", path("bad").string()});
  EXPECT_EQ(bad.status, 2);
  EXPECT_THAT(bad.err, HasSubstr("absent.so"));
  EXPECT_FALSE(fs::exists(path("bad")));
}

// Crashing plugins (issue #13): check-plugin runs each check in a child process, so a segfault,
// abort, exit() or endless loop is that check's FAIL and the report goes on to its summary.
TEST_F(PluginCli, CheckPluginSurvivesPluginsThatCrashExitOrHang) {
  const RunResult segv = run({"check-plugin", KVTUNE_TEST_SEGFAULT});
  EXPECT_EQ(segv.status, 1) << segv.err;
  EXPECT_THAT(segv.out, HasSubstr("PASS c_segv c_segv:bits=8 accepts_a_shape\n"));
  EXPECT_THAT(segv.out, HasSubstr("FAIL c_segv c_segv:bits=8 footprint_equals_packed_size: crashed: SIGSEGV"));
  EXPECT_THAT(segv.out, HasSubstr("checks failed"));

  const RunResult aborted = run({"check-plugin", KVTUNE_TEST_ABORT});
  EXPECT_EQ(aborted.status, 1);
  EXPECT_THAT(aborted.out, HasSubstr("crashed: SIGABRT"));

  const RunResult exited = run({"check-plugin", KVTUNE_TEST_EXIT});
  EXPECT_EQ(exited.status, 1);
  EXPECT_THAT(exited.out, HasSubstr("FAIL c_exit c_exit:bits=8 deterministic: exited with status 3"));
  EXPECT_EQ(exited.out.find("plugin "), exited.out.rfind("plugin "));  // nothing printed twice

  const RunResult endless = run({"check-plugin", KVTUNE_TEST_ENDLESS, "--timeout", "0.5"});
  EXPECT_EQ(endless.status, 1);
  EXPECT_THAT(endless.out, HasSubstr("FAIL c_endless c_endless:bits=5 deterministic: timed out after 0.5 s"));
  EXPECT_THAT(endless.out, HasSubstr("PASS c_endless c_endless:bits=8 deterministic\n"));

  const RunResult bad_timeout = run({"check-plugin", KVTUNE_TEST_NF4, "--timeout", "-1"});
  EXPECT_EQ(bad_timeout.status, 2);
  EXPECT_EQ(bad_timeout.out, "");

  // A describe that crashes: the plugin cannot be loaded (exit status 2, nothing on stdout).
  const RunResult describe = run({"check-plugin", KVTUNE_TEST_DESCRIBE_SEGFAULT});
  EXPECT_EQ(describe.status, 2);
  EXPECT_THAT(describe.err, HasSubstr(KVTUNE_TEST_DESCRIBE_SEGFAULT));
  EXPECT_THAT(describe.err, HasSubstr("crashed: SIGSEGV"));
  EXPECT_EQ(describe.out, "");
}

TEST_F(PluginCli, CheckPluginSkipsWhatDoesNotApply) {
  const RunResult r = run({"check-plugin", KVTUNE_TEST_SDK_TRAITS});
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("SKIP sdk_sketch sdk_sketch constant_block_is_kept: a score estimator"));
  EXPECT_THAT(r.out, HasSubstr("SKIP sdk_sketch sdk_sketch device_format_matches_packed_layout: no device_format"));
  EXPECT_THAT(r.out, HasSubstr("skipped: not applicable)"));

  // A combination the family refuses is not checked, but counted and shown.
  const RunResult picky = run({"check-plugin", KVTUNE_TEST_PICKY});
  EXPECT_EQ(picky.status, 0) << picky.out;
  EXPECT_THAT(picky.out, HasSubstr("note c_picky: 1 parameter combination was refused by the family and not "
                                   "checked, e.g. c_picky:bits=5: "));
  EXPECT_THAT(picky.out, HasSubstr("c_picky refuses this bits value (test plugin)"));
  EXPECT_THAT(picky.out, ::testing::Not(HasSubstr("c_picky:bits=5 ")));
}

// simulate evaluates plugin schemes in a child: a crash is an error naming the scheme, the
// plugin and its origin, and the signal (exit status 2), not a crash of kvtune.
TEST_F(PluginCli, SimulateReportsACrashingPluginScheme) {
  write_text(path("s.toml"), "[workload]\ntokens = 128\nhead_dim = 32\n[[pairs]]\nk = \"c_segv\"\nv = \"q8_0\"\n");
  const RunResult r = run({"simulate", path("s.toml").string(), "--plugin", KVTUNE_TEST_SEGFAULT});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plugin scheme 'c_segv:bits=8' (from --plugin " +
                               fs::absolute(KVTUNE_TEST_SEGFAULT).lexically_normal().string() + ") crashed: SIGSEGV"));

  write_float32_matrix(path("k.npy"), 64, 16);
  write_float32_matrix(path("v.npy"), 64, 16, 0.5f);
  write_float32_matrix(path("q.npy"), 2, 16, 0.25f);
  const RunResult tensors = run({"simulate", "--plugin", KVTUNE_TEST_EXIT, "--k", path("k.npy").string(), "--v",
                                 path("v.npy").string(), "--q", path("q.npy").string(), "--pair", "f16/c_exit"});
  EXPECT_EQ(tensors.status, 2) << tensors.err;
  EXPECT_THAT(tensors.err, HasSubstr("plugin scheme 'c_exit:bits=8'"));
  EXPECT_THAT(tensors.err, HasSubstr("exited with status 3"));

  // NaN from finite input is the plugin's fault, not "the input exceeds the scheme's range".
  write_text(path("nan.toml"), "[workload]\ntokens = 128\nhead_dim = 32\n[[pairs]]\nk = \"c_nan\"\nv = \"q8_0\"\n");
  const RunResult nan = run({"simulate", path("nan.toml").string(), "--plugin", KVTUNE_TEST_NAN});
  EXPECT_EQ(nan.status, 2);
  EXPECT_THAT(nan.err, HasSubstr("plugin scheme 'c_nan:bits=8' (from --plugin "));
  EXPECT_THAT(nan.err, HasSubstr("a fault in the plugin"));
  EXPECT_THAT(nan.err, ::testing::Not(HasSubstr("exceeds the scheme's range")));
}

// A plugin installed in KVTUNE_PLUGIN_PATH whose describe crashes is skipped with a warning, so a
// command that uses none of its schemes still runs; named with --plugin, it is an error.
TEST_F(PluginCli, ACrashingEnvironmentPluginIsSkippedWithAWarning) {
  fs::create_directories(path("plugins"));
  fs::copy_file(KVTUNE_TEST_DESCRIBE_SEGFAULT, path("plugins") / "crashes.so");
  fs::copy_file(KVTUNE_TEST_NF4, path("plugins") / "nf4.so");
  ::setenv("KVTUNE_PLUGIN_PATH", path("plugins").string().c_str(), 1);
  const RunResult schemes = run({"schemes"});
  const RunResult memory = run({"memory", "--model", "llama-3.1-8b", "--ctx", "1024", "--k", "nf4", "--v", "q8_0"});
  ::unsetenv("KVTUNE_PLUGIN_PATH");
  ASSERT_EQ(schemes.status, 0) << schemes.err;
  EXPECT_THAT(schemes.err, HasSubstr("kvtune: warning: skipping plugin '" + (path("plugins") / "crashes.so").string() +
                                     "' (from KVTUNE_PLUGIN_PATH) crashed: SIGSEGV"));
  EXPECT_THAT(schemes.out, HasSubstr("nf4  -  "));
  EXPECT_EQ(memory.status, 0) << memory.err;
  EXPECT_THAT(memory.err, HasSubstr("crashes.so"));

  const RunResult named = run({"schemes", "--plugin", KVTUNE_TEST_DESCRIBE_SEGFAULT});
  EXPECT_EQ(named.status, 2);
  EXPECT_THAT(named.err, HasSubstr("(from --plugin) crashed: SIGSEGV"));
  EXPECT_EQ(named.out, "");
}

// Where no child process isolates a plugin call (create everywhere, quantize in `quantize`), a crash
// or exit() still ends the command, but with a message naming the plugin, its family and the call,
// and exit status 2 (core/src/plugin_guard.h); nothing is left half-written.
TEST_F(PluginCli, ACrashOutsideAChildIsNamedWithStatus2) {
  write_float32_matrix(path("k.npy"), 64, 16);
  struct Case {
    const char* plugin;
    const char* family;
    const char* how;
  };
  for (const Case& c : {Case{KVTUNE_TEST_SEGFAULT, "c_segv", "crashed: SIGSEGV (Segmentation fault) in quantize"},
                        Case{KVTUNE_TEST_ABORT, "c_abort", "crashed: SIGABRT (Aborted) in quantize"},
                        Case{KVTUNE_TEST_EXIT, "c_exit", "called exit() in quantize"}}) {
    SCOPED_TRACE(c.family);
    const RunResult r = run({"quantize", "--plugin", c.plugin, "--scheme", c.family, "--in", path("k.npy").string(),
                             "--out", path("q.npy").string()});
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_THAT(r.err, HasSubstr("kvtune: plugin family '" + std::string(c.family) + "' (from --plugin " +
                                 fs::absolute(c.plugin).lexically_normal().string() + ") " + c.how));
    EXPECT_FALSE(fs::exists(path("q.npy")));
  }
  const std::vector<std::string> memory = {"memory", "--layers", "2", "--kv-heads", "1", "--head-dim", "128",
                                           "--ctx", "1024", "--v", "f16", "--plugin"};
  std::vector<std::string> args = memory;
  args.insert(args.end(), {KVTUNE_TEST_CREATE_SEGFAULT, "--k", "c_create_segv:bits=3"});
  RunResult r = run(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plugin family 'c_create_segv' (from --plugin "));
  EXPECT_THAT(r.err, HasSubstr("crashed: SIGSEGV (Segmentation fault) in create"));
  args = memory;
  args.insert(args.end(), {KVTUNE_TEST_CREATE_EXIT, "--k", "c_create_exit:bits=3"});
  r = run(args);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plugin family 'c_create_exit' (from --plugin "));
  EXPECT_THAT(r.err, HasSubstr("called exit() in create"));
  // A sweep creates its schemes before it writes anything.
  write_text(path("create.toml"), "plugins = [\"" + std::string(KVTUNE_TEST_CREATE_SEGFAULT) +
                                      "\"]\n[workload]\ntokens = 128\nhead_dim = 32\n"
                                      "[search]\nk = [\"c_create_segv:bits=3\", \"f16\"]\nv = [\"f16\"]\n");
  r = run({"sweep", path("create.toml").string(), "--out", path("out").string()});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("plugin family 'c_create_segv' (from a sweep file's plugins "));
  EXPECT_FALSE(fs::exists(path("out")));
}

// A footprint no format could need is the plugin's fault, said where it is read, not a failed
// allocation ("internal error") later: an input error in `quantize`, a failed point in a sweep.
TEST_F(PluginCli, AnAbsurdFootprintIsThePluginsFault) {
  write_float32_matrix(path("k.npy"), 64, 16);
  const RunResult q = run({"quantize", "--plugin", KVTUNE_TEST_HUGE_FOOTPRINT, "--scheme", "c_huge", "--in",
                           path("k.npy").string(), "--out", path("q.npy").string()});
  EXPECT_EQ(q.status, 2) << q.err;
  EXPECT_THAT(q.err, HasSubstr("family 'c_huge': footprint says 18446744073709551615 bytes for a [64, 16] block, "
                               "more than 64 bytes per element: a fault in the plugin"));
  EXPECT_FALSE(fs::exists(path("q.npy")));
  write_text(path("huge.toml"), "plugins = [\"" + std::string(KVTUNE_TEST_HUGE_FOOTPRINT) +
                                    "\"]\n[workload]\ntokens = 128\nhead_dim = 32\nqueries = 2\n"
                                    "[search]\nk = [\"c_huge\", \"f16\"]\nv = [\"f16\"]\n");
  const RunResult r = run({"sweep", path("huge.toml").string(), "--out", path("out").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream lines(read_text(path("out") / "results.jsonl"));
  size_t failed = 0;
  for (std::string line; std::getline(lines, line);) {
    const json rec = json::parse(line);
    if (rec["k"] != "c_huge:bits=8") continue;
    ++failed;
    EXPECT_EQ(rec["status"], "error");
    EXPECT_THAT(rec["error"].get<std::string>(), HasSubstr("more than 64 bytes per element"));
  }
  EXPECT_EQ(failed, 1u);
}

}  // namespace
}  // namespace kvtune::e2e

namespace kvtune::e2e {
namespace {

// A sweep evaluates plugin schemes in a child process per batch: a segfaulting scheme fails its
// points with the signal and the sweep goes on.
TEST_F(PluginCli, ASweepGoesOnPastACrashingPluginScheme) {
  write_text(path("crash.toml"),
             "plugins = [\"" + std::string(KVTUNE_TEST_SEGFAULT) + "\"]\n"
             "[workload]\ntokens = 128\nhead_dim = 32\nqueries = 2\n"
             "[search]\nk = [\"c_segv\", \"q8_0\"]\nv = [\"q8_0\", \"q4_0\"]\n");
  const RunResult r = run({"sweep", path("crash.toml").string(), "--out", path("out").string()});
  ASSERT_EQ(r.status, 0) << r.err;
  size_t crashed = 0, ok = 0;
  std::istringstream lines(read_text(path("out") / "results.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    const json rec = json::parse(line);
    if (rec["k"] == "c_segv:bits=8") {
      ++crashed;
      EXPECT_EQ(rec["status"], "error");
      EXPECT_THAT(rec["error"].get<std::string>(), HasSubstr("crashed: SIGSEGV"));
      EXPECT_THAT(rec["error"].get<std::string>(), HasSubstr("a sweep file's plugins"));
    } else {
      ++ok;
      EXPECT_EQ(rec["status"], "ok");
    }
  }
  EXPECT_EQ(crashed, 2u);
  EXPECT_EQ(ok, 2u);
}

}  // namespace
}  // namespace kvtune::e2e
