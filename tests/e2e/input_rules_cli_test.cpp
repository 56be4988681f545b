// End-to-end tests of the input rules of issue #13: one range rule for `quantize` and `simulate`,
// repeated seeds/layers/heads, rotation=hadamard without a group, the per-pair backend label, and
// write errors that carry the OS's reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using ::testing::HasSubstr;

class InputRules : public ScratchDirTest {
 protected:
  // A float32 [4, 32] tensor of ones with 1e38 at [1, 7]: finite as float32, beyond f16 and beyond
  // a q8_0 block scale (stored f16).
  void write_huge(const fs::path& file) const {
    std::vector<float> values(4 * 32, 1.0f);
    values[1 * 32 + 7] = 1e38f;
    write_text(file, npy_bytes("<f4", "(4, 32)", raw_bytes(values)));
  }
  static void expect_input_error(const RunResult& r) {
    EXPECT_EQ(r.status, 2) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("kvtune: ")) << r.err;
  }
};

// `quantize` used to write an all-inf .npy and exit 0 where `simulate` refused the same input.
TEST_F(InputRules, QuantizeAndSimulateRefuseTheSameOutOfRangeInput) {
  write_huge(path("big.npy"));
  const std::string big = path("big.npy").string();
  for (const std::string scheme : {"f16", "q8_0"}) {
    SCOPED_TRACE(scheme);
    const RunResult q = run({"quantize", "--scheme", scheme, "--in", big, "--out", path("out.npy")});
    expect_input_error(q);
    const std::string at = scheme == "f16" ? "[1, 7]" : "[1, 0]";  // q8_0: the whole block overflows
    EXPECT_EQ(q.err, "kvtune: " + big + ": keys through '" + scheme + "' are not finite at " + at +
                         ": the input value 1e+38 at [1, 7] exceeds the scheme's range\n");
    EXPECT_FALSE(fs::exists(path("out.npy")));

    const RunResult v = run({"quantize", "--scheme", scheme, "--role", "v", "--in", big, "--out", path("out.npy")});
    expect_input_error(v);
    EXPECT_THAT(v.err, HasSubstr(big + ": values through '" + scheme + "'"));

    write_text(path("q.npy"), npy_bytes("<f4", "(32,)", raw_bytes(std::vector<float>(32, 0.5f))));
    const RunResult s = run({"simulate", "--k", big, "--v", big, "--q", path("q.npy"), "--pair", scheme + "/none"});
    expect_input_error(s);
    EXPECT_EQ(s.err, q.err);  // one rule, one message
  }
  // A tensor within range still round-trips.
  std::vector<float> fine(4 * 32, 1.0f);
  fine[39] = 6e4f;
  write_text(path("fine.npy"), npy_bytes("<f4", "(4, 32)", raw_bytes(fine)));
  const RunResult ok = run({"quantize", "--scheme", "f16", "--in", path("fine.npy"), "--out", path("out.npy")});
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(read_float32_npy(path("out.npy")).values[39], 60000.0f);
}

TEST_F(InputRules, RepeatedSeedsAreRefusedWithFileLineAndColumn) {
  write_text(path("dup.toml"), "seeds = [1, 1]\n[workload]\ntokens = 64\nhead_dim = 16\n"
                               "[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult r = run({"simulate", path("dup.toml")});
  expect_input_error(r);
  EXPECT_EQ(r.err, "kvtune: " + path("dup.toml").string() + ":1:9: 'seeds' lists 1 twice\n");

  write_text(path("heads.toml"), "[workload]\ntokens = 64\nhead_dim = 16\nkv_heads = 2\nheads = [1, 0, 1]\n"
                                 "[[pairs]]\nk = \"none\"\nv = \"none\"\n");
  const RunResult h = run({"simulate", path("heads.toml")});
  expect_input_error(h);
  EXPECT_EQ(h.err, "kvtune: " + path("heads.toml").string() + ":5:9: 'heads' lists 1 twice\n");
}

// rotation=hadamard at head_dim 32 used to rotate nothing while the spec still named it.
TEST_F(InputRules, HadamardWithoutAGroupForTheHeadDimIsRefused) {
  write_float32_matrix(path("x.npy"), 4, 32);
  const RunResult r =
      run({"quantize", "--scheme", "q4_0:rotation=hadamard", "--in", path("x.npy"), "--out", path("out.npy")});
  expect_input_error(r);
  EXPECT_THAT(r.err, HasSubstr(path("x.npy").string() + ": 'q4_0:rotation=hadamard': rotation=hadamard has no "
                               "rotation group for head_dim 32"));
  EXPECT_THAT(r.err, HasSubstr("give rotation_group=N, N one of 2, 4, 8, 16, 32"));
  const RunResult ok = run({"quantize", "--scheme", "q4_0:rotation=hadamard,rotation_group=32", "--in",
                            path("x.npy"), "--out", path("out.npy")});
  EXPECT_EQ(ok.status, 0) << ok.err;
}

// Every JSON row says what computed its attention output (the CPU here; in cuda-kernel mode a pair
// the fused kernel declines reads "cpu (no fused kernel for this pair: ...)").
TEST_F(InputRules, SimulateJsonNamesTheBackendOfEveryPair) {
  write_text(path("two.toml"), "[workload]\ntokens = 64\nhead_dim = 32\n[[pairs]]\nk = \"q8_0\"\nv = \"q8_0\"\n"
                               "[[pairs]]\nk = \"int:bits=4,axis=channel\"\nv = \"f16\"\n");
  const RunResult r = run({"simulate", path("two.toml"), "--json"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_EQ(doc["rows"].size(), 2u);
  for (const auto& row : doc["rows"]) EXPECT_EQ(row["backend_used"], "cpu") << row.dump();
  // The console table has no per-pair note when every pair ran where the header says.
  const RunResult table = run({"simulate", path("two.toml")});
  ASSERT_EQ(table.status, 0) << table.err;
  EXPECT_THAT(table.out, ::testing::Not(HasSubstr("attention by")));
}

// A full disk used to say "write failed" without the reason. /dev/full fails every write (ENOSPC).
TEST_F(InputRules, WriteFailuresCarryTheReason) {
  ASSERT_TRUE(fs::exists("/dev/full")) << "the test needs Linux's /dev/full (every write fails with ENOSPC)";
  write_float32_matrix(path("x.npy"), 4, 32);
  const RunResult r = run({"quantize", "--scheme", "f16", "--in", path("x.npy"), "--out", "/dev/full"});
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_EQ(r.err, "kvtune: /dev/full: write failed (No space left on device)\n");

  // Standard output too: a table that never reached the disk is not a success.
  const std::string command = shell_quote(KVTUNE_BINARY) + " schemes >/dev/full 2>" +
                              shell_quote(path("err.txt").string());
  const int raw = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(raw));
  EXPECT_EQ(WEXITSTATUS(raw), 2);
  EXPECT_EQ(read_text(path("err.txt")), "kvtune: standard output: write failed (No space left on device)\n");
}

}  // namespace
}  // namespace kvtune::e2e
