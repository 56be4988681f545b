// The sweep defects of issue #13, each pinned by a test: a lone failing point, refused runs that
// must change nothing, the directory lock, merge's refusals, a write failure's reason, an
// interrupt, the point limit and typed policy crossing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kvtune/error.h"
#include "kvtune/sweep_dir.h"
#include "kvtune/sweep_run.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::shared_ptr<const Registry> builtins() {
  return std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), &builtin_registry());
}

SweepSpec small_spec(const std::vector<std::pair<std::string, std::string>>& pairs) {
  SweepSpec spec;
  spec.name = "small";
  spec.source = "small.toml";
  spec.text = "name = \"small\"\n";
  spec.scenario.workload.tokens = 128;
  spec.scenario.workload.head_dim = 64;
  spec.scenario.workload.queries = 2;
  spec.scenario.contexts = {128};
  spec.scenario.seeds = {0, 1};
  for (const auto& [k, v] : pairs) spec.points.push_back(make_point(builtin_registry(), k, v, "search"));
  spec.registry = builtins();
  spec.hash = 0x1234;
  return spec;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A scheme with a bug: it throws something that is not an InputError.
class BuggyScheme final : public Scheme {
 public:
  std::string spec() const override { return "buggy"; }
  std::string family() const override { return "buggy"; }
  size_t footprint(int64_t tokens, int64_t head_dim) const override { return size_t(tokens * head_dim * 4); }
  std::vector<std::byte> quantize(ConstMatrixView, const QuantContext&) const override {
    throw std::logic_error("index out of range in buggy");
  }
  void dequantize(std::span<const std::byte>, const QuantContext&, MatrixView) const override {}
  void roundtrip(ConstMatrixView, const QuantContext&, MatrixView) const override {
    throw std::logic_error("index out of range in buggy");
  }
};

class SweepDefects : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kvtune-defects-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  SweepRunOptions options(const std::string& sub = "out", size_t batch = 4) const {
    SweepRunOptions o;
    o.out_dir = (dir_ / sub).string();
    o.threads = 1;
    o.batch_points = batch;
    return o;
  }
  fs::path dir_;
};

// Before: `if (points.size() == 1) throw;` aborted the sweep when a batch held one failing point.
TEST_F(SweepDefects, ABatchOfOneFailingPointBecomesItsErrorRecord) {
  SweepSpec spec = small_spec({{"f16", "none"}, {"q8_0", "none"}});
  spec.scenario.workload.keys.outlier_channels = {3, 40};
  spec.scenario.workload.keys.outlier_scale = 10.0;
  spec.scenario.workload.keys.scale = 1e4;  // keys beyond f16's range (65504) with the outliers x10
  const std::vector<SweepRecord> records = run_sweep(spec, options("out", 1));
  ASSERT_EQ(records.size(), 2u);
  EXPECT_FALSE(records[0].ok);
  EXPECT_THAT(records[0].error, HasSubstr("'f16'"));
  EXPECT_TRUE(records[1].ok);
}

TEST_F(SweepDefects, AnInternalErrorIsNotTurnedIntoAPointError) {
  SweepSpec spec = small_spec({{"q8_0", "none"}});
  SweepPoint p = spec.points.front();
  p.k = "buggy";
  p.k_scheme = std::make_shared<BuggyScheme>();
  spec.points.push_back(p);
  for (size_t batch : {1u, 4u}) {
    fs::remove_all(dir_);
    try {
      run_sweep(spec, options("out", batch));
      FAIL() << "a bug became a record (batch " << batch << ")";
    } catch (const InputError& e) {
      FAIL() << "a bug became an input error: " << e.what();
    } catch (const std::logic_error& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr("buggy"));
    }
  }
}

// Before: sweep.toml and resolved.json were rewritten before the refusal.
TEST_F(SweepDefects, ARefusedRunChangesNothingInTheDirectory) {
  SweepSpec spec = small_spec({{"q8_0", "q8_0"}});
  SweepRunOptions o = options();
  run_sweep(spec, o);
  const fs::path out = dir_ / "out";
  const std::string toml = read_text(out / kSweepSpecFile), resolved = read_text(out / kResolvedFile),
                    results = read_text(out / kResultsFile);
  SweepSpec other = spec;
  other.text = "name = \"other\"\n";
  other.name = "other";
  EXPECT_THROW(run_sweep(other, o), InputError);  // results.jsonl exists, no --resume
  other.hash = 0x9999;
  o.resume = true;
  EXPECT_THROW(run_sweep(other, o), InputError);  // another workload
  EXPECT_EQ(read_text(out / kSweepSpecFile), toml);
  EXPECT_EQ(read_text(out / kResolvedFile), resolved);
  EXPECT_EQ(read_text(out / kResultsFile), results);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(out)) ++entries;
  EXPECT_EQ(entries, 3u);  // the lock leaves no file behind
}

TEST_F(SweepDefects, ASecondRunOnALockedDirectoryIsRefusedAndAReleasedLockIsFree) {
  const SweepSpec spec = small_spec({{"q8_0", "q8_0"}});
  create_sweep_dir((dir_ / "out").string());
  {
    const SweepDirLock held((dir_ / "out").string());
    try {
      run_sweep(spec, options());
      FAIL() << "no error";
    } catch (const InputError& e) {
      EXPECT_THAT(std::string(e.what()), HasSubstr("another kvtune run is using this directory"));
    }
    EXPECT_FALSE(fs::exists(dir_ / "out" / kResultsFile));
  }
  EXPECT_EQ(run_sweep(spec, options()).size(), 1u);  // released with its holder
}

TEST_F(SweepDefects, AWriteFailureNamesTheSystemsReason) {
  const SweepSpec spec = small_spec({{"q8_0", "q8_0"}});
  create_sweep_dir((dir_ / "out").string());
  fs::create_symlink("/dev/full", dir_ / "out" / kResultsFile);
  SweepRunOptions o = options();
  o.resume = true;  // /dev/full reads as an empty results file
  try {
    run_sweep(spec, o);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("results.jsonl: write failed (No space left on device)"));
  }
}

TEST_F(SweepDefects, AnInterruptStopsBetweenBatchesAndSaysWhatWasWritten) {
  const SweepSpec spec = small_spec({{"q8_0", "q8_0"}, {"q4_0", "q4_0"}, {"q5_0", "q5_0"}});
  std::atomic<bool> cancel{false};
  SweepRunOptions o = options("out", 1);
  o.cancel = &cancel;
  o.progress = [&](size_t done, size_t) {
    if (done == 1) cancel.store(true);  // Ctrl-C while the first batch runs
  };
  try {
    run_sweep(spec, o);
    FAIL() << "no interrupt";
  } catch (const SweepInterrupted& e) {
    EXPECT_EQ(e.written, 1u);
    EXPECT_EQ(e.total, 3u);
    EXPECT_EQ(read_records(e.path).size(), 1u);
  }
  o.cancel = nullptr;
  o.progress = nullptr;
  o.resume = true;
  EXPECT_EQ(run_sweep(spec, o).size(), 3u);
}

TEST_F(SweepDefects, MergeNamesEveryMismatch) {
  const SweepSpec spec = small_spec({{"q8_0", "q8_0"}, {"q4_0", "q4_0"}});
  SweepRunOptions a = options("a"), b = options("b"), c = options("c");
  a.shards = b.shards = 2;
  b.shard = 1;
  c.shards = 3;
  run_sweep(spec, a);
  run_sweep(spec, b);
  run_sweep(spec, c);
  try {  // before: "a missing shard?"
    merge_records({(dir_ / "a").string(), (dir_ / "c").string()});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("as shard 0 of 3 but"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("as shard 0 of 2"));
  }

  // Two shards holding different records for one point: refused, not one picked.
  const std::string b_results = (dir_ / "b" / kResultsFile).string();
  std::vector<SweepRecord> first = read_records((dir_ / "a" / kResultsFile).string());
  first.front().shard = 1;
  first.front().metrics[0].mean += 0.5;
  {
    std::ofstream out(b_results, std::ios::app);
    out << record_to_json_line(first.front());
  }
  try {
    merge_records({(dir_ / "a").string(), (dir_ / "b").string()});
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("holds another result for q8_0 / q8_0"));
  }
}

TEST_F(SweepDefects, MergeRefusesAnOutputThatIsOneOfItsInputs) {
  const SweepSpec spec = small_spec({{"q8_0", "q8_0"}});
  run_sweep(spec, options("a"));
  SweepContext context;
  context.registry = &builtin_registry();
  try {
    merge_sweep({(dir_ / "a").string()}, (dir_ / "a" / ".").string(), context);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("is one of the inputs"));
  }
}

// A kernel-mode backend that fuses only f16 keys; every other pair falls back to the simulator.
class F16OnlyKernel final : public EvalBackend {
 public:
  std::string name() const override { return "fake-kernel"; }
  void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    scheme.roundtrip(x, ctx, out);
  }
  bool fuses_attention() const override { return true; }
  std::string fused_attention_gap(const Scheme& k, const Scheme&, int64_t) const override {
    return k.spec() == "f16" ? "" : "no fused kernel for '" + k.spec() + "'";
  }
  std::optional<std::vector<double>> fused_attention(const Scheme& k, const Scheme&, const Case& c) const override {
    if (k.spec() != "f16") return std::nullopt;
    return std::vector<double>(static_cast<size_t>(c.queries.rows() * c.values.cols()), 0.0);
  }
};

// Before: in kernel mode a pair the kernel declined got the simulator's result under the kernel's
// label; its record now says what computed it.
TEST_F(SweepDefects, KernelModeRecordsSayWhatComputedEachPoint) {
  const SweepSpec spec = small_spec({{"f16", "f16"}, {"q8_0", "f16"}});
  SweepRunOptions o = options();
  o.backend = std::make_shared<F16OnlyKernel>();
  const std::vector<SweepRecord> records = run_sweep(spec, o);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].backend, "fake-kernel");
  EXPECT_EQ(records[1].backend, "cpu (no fused kernel for this pair: no fused kernel for 'q8_0')");
  const std::vector<SweepRecord> read = read_records((dir_ / "out" / kResultsFile).string());
  EXPECT_EQ(read[1].backend, records[1].backend);
}

TEST(SweepParse, PointsAreCountedAndLimitedBeforeTheyAreMade) {
  SweepContext context;
  context.registry = &builtin_registry();
  const std::string head = "[workload]\ntokens = 256\nhead_dim = 64\n[search]\n";
  const std::string grid =
      "[[search.grid]]\nfamily = \"int\"\nbits = { from = 2, to = 8 }\naxis = \"token\"\n"
      "group = { from = 1, to = 64 }\nskip_invalid = true\n";
  try {
    parse_sweep(head + "max_points = 100\n" + grid, "big.toml", context);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("big.toml:"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("make 448 candidates or points, more than max_points = 100"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("raise [search] max_points"));
  }
  // Pairs are counted before they are paired: the valid candidates of each role, squared.
  try {
    parse_sweep(head + "max_points = 1000\n" + grid, "big.toml", context);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("pairing \"cartesian\" of 49 K and 49 V candidates would make 2401"));
    EXPECT_THAT(std::string(e.what()), HasSubstr("more than max_points = 1000"));
  }
}

// Before: rotation_seed crossed with a rotation=random policy was refused (only rotation_group
// knew to follow its rotation).
TEST(SweepParse, ARandomRotationCrossesWithItsSeeds) {
  SweepContext context;
  context.registry = &builtin_registry();
  const SweepSpec s = parse_sweep(
      "[workload]\ntokens = 256\nhead_dim = 64\n[search]\nk = [\"q4_0\"]\nv = [\"q8_0\"]\n"
      "[search.k_policy]\nrotation = [\"none\", \"random\"]\nrotation_seed = [0, 7]\n",
      "seeds.toml", context);
  std::vector<std::string> ks = s.k_candidates;
  EXPECT_THAT(ks, ::testing::UnorderedElementsAre("q4_0", "q4_0:rotation=random",
                                                  "q4_0:rotation=random,rotation_seed=7"));
  for (const SweepPoint& p : s.points) {
    ASSERT_TRUE(p.k_scheme);
    EXPECT_EQ(p.k_scheme->spec(), p.k);  // the point's scheme is the one its spec names
  }
}

TEST(SweepParse, EveryMetricCanBoundTheBudget) {
  SweepContext context;
  context.registry = &builtin_registry();
  const SweepSpec s = parse_sweep(
      "[workload]\ntokens = 256\nhead_dim = 64\n[search]\nboth = [\"q8_0\"]\npairing = \"matched\"\n"
      "[budget]\nmin_top1_agree = 0.9\nmax_shift_logit_err_p95 = 0.5\nmax_rel_out_err = 0.1\n",
      "terms.toml", context);
  ASSERT_EQ(s.budget.terms.size(), 3u);
  EXPECT_EQ(s.budget.terms[0].key(), "min_top1_agree");
  EXPECT_EQ(s.budget.terms[0].kind, BoundKind::at_least);
  EXPECT_EQ(s.budget.terms[1].metric, Metric::shift_logit_err);
  EXPECT_EQ(s.budget.terms[1].statistic, Statistic::p95);
  EXPECT_EQ(s.budget.terms[2].key(), "max_rel_out_err");
  try {
    parse_sweep("[workload]\ntokens = 256\nhead_dim = 64\n[search]\nboth = [\"q8_0\"]\npairing = \"matched\"\n"
                "[budget]\nmin_needle_mass_ratio = 0.5\n",
                "needles.toml", context);
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(std::string(e.what()), HasSubstr("needles.toml:8:25: 'min_needle_mass_ratio' needs needles"));
  }
}

}  // namespace
}  // namespace kvtune
