// report.html and its charts (sweep_html.h) on hand-made specs and records: which points each chart
// holds (failed and lossless points off the log axes, the budget's band, the best and each runtime's
// pick, the lowest error per K/V bit cell), which charts a sweep's records support, that nothing in
// the data or the scripts can close its <script> element, the files written, and the chart scripts
// read from npm's layout. The page drawn in a browser is tests/browser's.
#include "kvtune/sweep_html.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

SweepRecord html_record(const std::string& k, const std::string& v, double k_bits, double v_bits, double err) {
  SweepRecord r;
  r.k = k;
  r.v = v;
  r.origin = "search";
  r.k_bits = k_bits;
  r.v_bits = v_bits;
  r.metrics[size_t(Metric::rel_out_err)] = {err, err * 2, err * 3, 16};
  r.metrics[size_t(Metric::attn_kl)] = {err / 10, err / 5, err, 16};
  return r;
}

// Budget: mean rel_out_err <= 0.05; one runtime "RT" offering the pair (a, a).
SweepSpec html_spec(const std::vector<SweepRecord>& records) {
  SweepSpec spec;
  spec.name = "unit";
  spec.source = "unit.toml";
  spec.scenario.contexts = {4096};
  spec.scenario.workload.tokens = 4096;
  for (const SweepRecord& r : records) spec.points.push_back({r.k, r.v, r.origin});
  spec.registry = std::shared_ptr<const Registry>(std::shared_ptr<const Registry>(), &builtin_registry());
  spec.budget.terms = {{Metric::rel_out_err, Statistic::mean, BoundKind::at_most, 0.05}};
  spec.runtimes = {{"rt", "latest"}};
  RuntimeView view;
  view.title = "RT";
  view.version = "1";
  view.options = {{.name = "a/a", .k_spec = "a", .v_spec = "a"}};
  spec.runtime_views = {view};
  return spec;
}

SweepRecord failed(const std::string& k) {
  SweepRecord r;
  r.k = r.v = k;
  r.ok = false;
  r.error = "refused";
  return r;
}

std::map<std::string, json> charts_by_name(const SweepSpec& spec, const std::vector<SweepRecord>& records) {
  std::map<std::string, json> out;
  for (const ChartSpec& c : sweep_charts(spec, records, analyze_sweep(spec, records))) out[c.name] = json::parse(c.vega_lite);
  return out;
}

const json& layer(const json& chart, const std::string& name) {
  for (const json& l : chart.at("layer")) {
    if (l.value("name", "") == name) return l;
  }
  throw std::runtime_error("no layer " + name);
}

// a (8 bits, 0.03) is RT's option; b (4 bits, 0.01) is search only and the best; c failed; d is
// lossless. The log axis takes a and b; the band reaches the bound; best and RT's pick are ringed.
TEST(SweepCharts, ParetoDrawsEveryRunPointWithTheBudgetAndThePicks) {
  const std::vector<SweepRecord> records = {html_record("a", "a", 8, 8, 0.03), html_record("b", "b", 4, 4, 0.01),
                                            failed("c"), html_record("d", "d", 16, 16, 0.0)};
  const SweepSpec spec = html_spec(records);
  const json pareto = charts_by_name(spec, records).at("pareto");
  EXPECT_EQ(pareto.at("$schema"), "https://vega.github.io/schema/vega-lite/v6.json");
  const json& points = pareto.at("data").at("values");
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].at("k"), "a");
  EXPECT_EQ(points[0].at("group"), "RT");
  EXPECT_EQ(points[0].at("err"), 0.03);
  EXPECT_EQ(points[0].at("status"), "feasible");
  EXPECT_EQ(points[1].at("group"), "search");
  EXPECT_EQ(points[1].at("bits"), 4.0);
  EXPECT_TRUE(points[1].at("frontier").get<bool>());
  // The budget's band ends at the bound, below the smallest error.
  const json& band = layer(pareto, "budget_region").at("data").at("values").at(0);
  EXPECT_EQ(band.at("hi"), 0.05);
  EXPECT_EQ(band.at("lo"), 0.005);
  EXPECT_EQ(layer(pareto, "budget_bound").at("data").at("values").at(0).at("bound"), 0.05);
  const json& picks = layer(pareto, "picks").at("data").at("values");
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0].at("label"), "best");
  EXPECT_EQ(picks[0].at("bits"), 4.0);
  EXPECT_EQ(picks[1].at("label"), "RT");
  EXPECT_EQ(picks[1].at("group"), "RT");
  // Colours: search grey, then the runtimes in order.
  const json& scale = layer(pareto, "points").at("encoding").at("color").at("scale");
  EXPECT_EQ(scale.at("domain"), json({"search", "RT"}));
  EXPECT_EQ(scale.at("range").size(), 2u);
}

TEST(SweepCharts, TheChartsAreThoseTheRecordsSupport) {
  std::vector<SweepRecord> records = {html_record("a", "a", 8, 8, 0.03), html_record("b", "b", 4, 4, 0.01)};
  SweepSpec spec = html_spec(records);
  std::map<std::string, json> charts = charts_by_name(spec, records);
  std::vector<std::string> names;
  for (const auto& [name, chart] : charts) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("kv_split", "pareto"));  // no needles, one layer and head, no model

  for (SweepRecord& r : records) {
    r.needle_depths = {{0.1, {1.0, 1.0, 1.0, 8}}, {0.9, {0.75, 1.0, 1.0, 8}}};
    for (int64_t l : {0, 5, 9}) {
      LayerSummary s{.layer = l};
      s.metrics[size_t(Metric::rel_out_err)] = {0.01 * double(l + 1), 0.0, 0.0, 4};
      r.layers.push_back(s);
    }
    for (int64_t h : {0, 1}) {
      HeadSummary s{.kv_head = h};
      s.metrics[size_t(Metric::rel_out_err)] = {0.02, 0.0, 0.0, 4};
      r.heads.push_back(s);
    }
  }
  charts = charts_by_name(spec, records);
  names.clear();
  for (const auto& [name, chart] : charts) names.push_back(name);
  EXPECT_THAT(names, ElementsAre("heads", "kv_split", "layers", "needles", "pareto"));
  // Two picks (best b, RT's a) x two depths; x three layers; x two heads.
  const json& cells = charts.at("needles").at("data").at("values");
  ASSERT_EQ(cells.size(), 4u);
  EXPECT_EQ(cells[0].at("pair"), "best");
  EXPECT_EQ(cells[0].at("depth"), 0.1);
  EXPECT_EQ(cells[0].at("context"), 4096);
  EXPECT_EQ(cells[1].at("needle_hit"), 0.75);
  EXPECT_EQ(charts.at("layers").at("data").at("values").size(), 6u);
  EXPECT_EQ(charts.at("layers").at("data").at("values")[2].at("value"), 0.1);
  EXPECT_EQ(charts.at("heads").at("data").at("values").size(), 4u);
}

// Bits binned to 0.01 share a cell, which keeps its lowest error; lossless pairs are left out.
TEST(SweepCharts, TheKvSplitKeepsTheLowestErrorAtEachBitWidth) {
  const std::vector<SweepRecord> records = {html_record("a", "a", 4, 8, 0.02), html_record("b", "b", 4, 8, 0.01),
                                            html_record("c", "c", 4.0001, 8, 0.005), html_record("d", "d", 8, 4, 0.04),
                                            html_record("e", "e", 16, 16, 0.0)};
  const SweepSpec spec = html_spec(records);
  const json cells = charts_by_name(spec, records).at("kv_split").at("data").at("values");
  ASSERT_EQ(cells.size(), 2u);
  EXPECT_EQ(cells[0].at("k_bits"), 4.0);
  EXPECT_EQ(cells[0].at("v_bits"), 8.0);
  EXPECT_EQ(cells[0].at("err"), 0.005);
  EXPECT_THAT(cells[0].at("pair").get<std::string>(), HasSubstr("K c"));
  EXPECT_EQ(cells[1].at("k_bits"), 8.0);
}

ChartScript script(const std::string& package, const std::string& code) {
  return {package, "1.0.0", "BSD-3-Clause", "Copyright (c) a licence with */ inside", code};
}

// A name, a spec or a script holding "</script>" cannot end its element early: the page has
// exactly one closing tag per element (three scripts, the specs, the page's own code).
TEST(SweepHtml, NothingInTheDataOrTheScriptsClosesItsElement) {
  std::vector<SweepRecord> records = {html_record("a", "a", 8, 8, 0.03),
                                      html_record("b</script><script>x()", "b", 4, 4, 0.01)};
  SweepSpec spec = html_spec(records);
  spec.name = "n</script><b>";
  const std::string page = sweep_report_html(spec, records, analyze_sweep(spec, records),
                                             {script("vega", "var s = '</script>';"), script("vega-lite", "1"),
                                              script("vega-embed", "2")});
  size_t closing = 0;
  for (size_t at = 0; (at = page.find("</script>", at)) != std::string::npos; at += 9) ++closing;
  EXPECT_EQ(closing, 5u);
  EXPECT_THAT(page, HasSubstr("var s = '<\\/script>';"));
  EXPECT_THAT(page, HasSubstr("<title>kvtune sweep n&lt;/script&gt;&lt;b&gt;</title>"));
  EXPECT_THAT(page, HasSubstr("b\\u003c/script>\\u003cscript>x()"));
  EXPECT_THAT(page, Not(HasSubstr("<script>x()")));
  // The licence header survives whole, its own "*/" defused.
  EXPECT_THAT(page, HasSubstr("/*! vega 1.0.0 (npm), BSD-3-Clause"));
  EXPECT_THAT(page, HasSubstr("a licence with * / inside"));
}

TEST(SweepHtml, ThePageHoldsEveryPointTheChartsAndTheRuntimeSettings) {
  const std::vector<SweepRecord> records = {html_record("a", "a", 8, 8, 0.03), html_record("b", "b", 4, 4, 0.01),
                                            failed("c")};
  const SweepSpec spec = html_spec(records);
  const std::string page = sweep_report_html(spec, records, analyze_sweep(spec, records), {});
  for (const char* id : {"chart-pareto", "chart-kv_split", "points-table", "kvtune-charts", "section-report"}) {
    EXPECT_THAT(page, HasSubstr(std::string("id=\"") + id + "\"")) << id;
  }
  size_t rows = 0;
  const size_t body = page.find("<tbody>", page.find("id=\"points-table\""));
  for (size_t at = body; (at = page.find("<tr class=", at)) != std::string::npos && at < page.find("</tbody>", body); ++at) ++rows;
  EXPECT_EQ(rows, 3u);
  EXPECT_THAT(page, HasSubstr("<tr class=\"failed\">"));
  EXPECT_THAT(page, HasSubstr("<td class=\"num\" data-v=\"0.029999999999999999\">0.03</td>"));
}

class SweepHtmlFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("kvtune-html-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  static std::string text(const fs::path& p) {
    const std::vector<std::byte> b = read_file(p.string());
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  fs::path dir_;
};

TEST_F(SweepHtmlFiles, WritesThePageAndEachChartBesideIt) {
  const std::vector<SweepRecord> records = {html_record("a", "a", 8, 8, 0.03), html_record("b", "b", 4, 4, 0.01)};
  const SweepSpec spec = html_spec(records);
  const SweepAnalysis analysis = analyze_sweep(spec, records);
  write_sweep_html((dir_ / "page.html").string(), spec, records, analysis, {});
  EXPECT_EQ(text(dir_ / "page.html"), sweep_report_html(spec, records, analysis, {}));
  for (const ChartSpec& c : sweep_charts(spec, records, analysis)) {
    const fs::path file = dir_ / "page-charts" / (c.name + ".vl.json");
    ASSERT_TRUE(fs::exists(file)) << file;
    EXPECT_EQ(json::parse(text(file)), json::parse(c.vega_lite));
  }
}

TEST_F(SweepHtmlFiles, ChartScriptsComeFromNpmsLayoutWithoutTheirSourceMaps) {
  for (const char* package : kChartPackages) {
    const fs::path p = dir_ / package;
    fs::create_directories(p / "build");
    std::ofstream(p / "package.json") << R"({"name": ")" << package << R"(", "version": "6.1.2", "license": "BSD-3-Clause"})";
    std::ofstream(p / "LICENSE") << "Copyright " << package;
    std::ofstream(p / "build" / (std::string(package) + ".min.js")) << "var x=1;\n//# sourceMappingURL=x.min.js.map";
  }
  const std::vector<ChartScript> scripts = load_chart_scripts(dir_);
  ASSERT_EQ(scripts.size(), 3u);
  EXPECT_EQ(scripts[1].package, "vega-lite");
  EXPECT_EQ(scripts[1].version, "6.1.2");
  EXPECT_EQ(scripts[1].license, "BSD-3-Clause");
  EXPECT_EQ(scripts[1].license_text, "Copyright vega-lite");
  EXPECT_EQ(scripts[1].code, "var x=1;\n");

  fs::remove(dir_ / "vega-embed" / "build" / "vega-embed.min.js");
  try {
    load_chart_scripts(dir_);
    FAIL() << "a missing script was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("vega-embed.min.js"));
  }
  std::ofstream(dir_ / "vega" / "package.json") << "{\"name\": \"vega\"}";
  try {
    load_chart_scripts(dir_);
    FAIL() << "a package.json without a version was accepted";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), HasSubstr("vega/package.json: not an npm package.json with a version"));
  }
}

}  // namespace
}  // namespace kvtune
