// End-to-end tests of report.html on the command line: `kvtune sweep --report`, `kvtune merge
// --report` and `kvtune report DIR [--out FILE]` write the same page with the pinned chart scripts
// inlined; a directory that is not a whole sweep's output gets merge's message word for word, exit
// status 2, and nothing written. (The page drawn in Chromium: tests/browser.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

// Runs in a fraction of a second: 3 K x 2 V candidates on 512 tokens with needles at two depths.
const char* const kSweep = R"(name = "report cli"
seeds = 2
runtimes = ["llama-cpp@b8607"]

[workload]
tokens = 512
head_dim = 128
queries = 2

[workload.needles]
depths = [0.25, 0.75]

[search]
k = ["q8_0", "q4_0", "int:bits=8,axis=channel"]
v = ["q8_0", "q4_0"]

[budget]
max_rel_out_err = 0.05
)";

// The page without its "spec: FILE" line, which names the file the sweep was read from (the
// report command reads DIR/sweep.toml).
std::string without_source(std::string page) {
  const size_t at = page.find("<p>spec: ");
  return at == std::string::npos ? page : page.erase(at, page.find("</p>", at) - at);
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class ReportCli : public ScratchDirTest {
 protected:
  void SetUp() override {
    ScratchDirTest::SetUp();
    write_text(path("sweep.toml"), kSweep);
  }
  RunResult sweep(const std::string& out, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"sweep", path("sweep.toml").string(), "--out", path(out).string(), "--jobs", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args);
  }
  // The refusal of `kvtune report DIR`, checked against `kvtune merge DIR`'s and for nothing written.
  void expect_refused_like_merge(const std::string& dir, const std::string& why) {
    const RunResult report = run({"report", path(dir).string()});
    EXPECT_EQ(report.status, 2) << report.err;
    EXPECT_THAT(report.err, HasSubstr(why));
    const RunResult merge = run({"merge", path(dir).string(), "--out", path("merged-" + dir).string()});
    EXPECT_EQ(merge.status, 2);
    EXPECT_EQ(report.err, merge.err);
    EXPECT_FALSE(report.err.starts_with("kvtune: merge:")) << report.err;  // report must not speak as merge
    EXPECT_FALSE(fs::exists(path(dir) / "report.html"));
    EXPECT_FALSE(fs::exists(path(dir) / "report-charts"));
  }
};

TEST_F(ReportCli, SweepReportAndTheReportCommandWriteOnePageWithThePinnedScripts) {
  const RunResult r = sweep("out", {"--report"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("report.md report.html report-charts/"));
  const std::string page = read_text(path("out") / "report.html");
  // The versions web/package.json pins, each inlined with its licence.
  const json pins = json::parse(read_text(fs::path(KVTUNE_SOURCE_DIR) / "web" / "package.json")).at("dependencies");
  for (const char* package : {"vega", "vega-lite", "vega-embed"}) {
    EXPECT_TRUE(contains(page, std::string("/*! ") + package + " " + pins.at(package).get<std::string>() +
                                   " (npm), BSD-3-Clause"))
        << package;
  }
  EXPECT_TRUE(contains(page, "University of Washington Interactive Data Lab"));
  EXPECT_TRUE(contains(page, "id=\"chart-needles\""));
  for (const char* chart : {"pareto", "needles", "kv_split"}) {
    const json spec = json::parse(read_text(path("out") / "report-charts" / (std::string(chart) + ".vl.json")));
    EXPECT_EQ(spec.at("$schema"), "https://vega.github.io/schema/vega-lite/v6.json") << chart;
  }

  // The report command, elsewhere: the same page, its charts beside it.
  const RunResult again = run({"report", path("out").string(), "--out", path("page.html").string()});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_THAT(again.out, HasSubstr("page.html"));
  const std::string other = read_text(path("page.html"));
  EXPECT_TRUE(contains(other, "<p>spec: " + (path("out") / "sweep.toml").string()));
  EXPECT_TRUE(without_source(other) == without_source(page)) << "the two pages differ beyond the spec's file";
  EXPECT_EQ(read_text(path("page-charts") / "pareto.vl.json"), read_text(path("out") / "report-charts" / "pareto.vl.json"));

  // A page written over one of the sweep's own files is refused and the file kept (the HTML had
  // replaced results.jsonl with exit status 0).
  for (const char* name : {"results.jsonl", "sweep.toml", "summary.json"}) {
    const std::string before = read_text(path("out") / name);
    const RunResult over = run({"report", path("out").string(), "--out", (path("out") / "." / name).string()});
    EXPECT_EQ(over.status, 2) << name;
    EXPECT_THAT(over.err, HasSubstr("is also an input")) << name;
    EXPECT_EQ(read_text(path("out") / name), before) << name;
  }
  // Any other file that is not a page is refused too (a sweep file had been replaced by HTML).
  write_text(path("base.toml"), "[workload]\n");
  const RunResult toml = run({"report", path("out").string(), "--out", path("base.toml").string()});
  EXPECT_EQ(toml.status, 2);
  EXPECT_THAT(toml.err, HasSubstr("base.toml: a report page ends in .html"));
  EXPECT_EQ(read_text(path("base.toml")), "[workload]\n");
}

TEST_F(ReportCli, MergeReportWritesThePageOfTheWholeSweep) {
  for (const char* shard : {"0/2", "1/2"}) {
    const std::string name = std::string("s") + shard[0];
    const RunResult r = sweep(name, {"--shard", shard, "--report"});
    ASSERT_EQ(r.status, 0) << r.err;
    // A shard has part of the points: its page comes with the merge.
    EXPECT_THAT(r.err, HasSubstr("kvtune merge DIR... --report (a shard alone has no report.html)"));
    EXPECT_FALSE(fs::exists(path(name) / "report.html"));
  }
  // One shard alone is not a sweep: merge's words for it.
  expect_refused_like_merge("s0", "points have no record in the given directories");
  const RunResult merged = run({"merge", path("s0").string(), path("s1").string(), "--out", path("m").string(), "--report"});
  ASSERT_EQ(merged.status, 0) << merged.err;
  ASSERT_EQ(sweep("whole").status, 0);
  ASSERT_EQ(run({"report", path("whole").string()}).status, 0);
  // The merged page shows the unsharded sweep's results; only provenance (host, time) may differ,
  // and the page shows none of it.
  EXPECT_EQ(read_text(path("m") / "report-charts" / "pareto.vl.json"),
            read_text(path("whole") / "report-charts" / "pareto.vl.json"));
}

TEST_F(ReportCli, ADirectoryThatIsNotAWholeSweepGetsMergesMessageAndNothingIsWritten) {
  fs::create_directories(path("empty"));
  expect_refused_like_merge("empty", "empty: not a kvtune sweep's output directory (it has no sweep.toml;");

  ASSERT_EQ(sweep("half").status, 0);
  std::string results = read_text(path("half") / "results.jsonl");
  write_text(path("half") / "results.jsonl", results.substr(0, results.size() - 40));
  expect_refused_like_merge("half", "the last line is incomplete");

  ASSERT_EQ(sweep("other").status, 0);
  results = read_text(path("other") / "results.jsonl");
  const size_t second = results.find('\n') + 1;
  const size_t commit = results.find("\"git_commit\":\"", second) + 14;
  results.replace(commit, results.find('"', commit) - commit, "0123456789ab");
  write_text(path("other") / "results.jsonl", results);
  expect_refused_like_merge("other", "shards must come from one build");

  const RunResult missing = run({"report", path("nowhere").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_THAT(missing.err, HasSubstr("nowhere: no such directory"));
  EXPECT_FALSE(fs::exists(path("nowhere")));
}

}  // namespace
}  // namespace kvtune::e2e
