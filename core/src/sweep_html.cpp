// report.html (sweep_html.h): the report document (report_doc.h) rendered as HTML around the charts
// and the table of every point, with the chart libraries and the specifications inline.

#include "kvtune/sweep_html.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "kvtune/memory.h"
#include "kvtune/runtime_table.h"
#include "kvtune/sweep_report.h"
#include "figure_text.h"
#include "report_doc.h"

namespace kvtune {
namespace fs = std::filesystem;
namespace {

using namespace detail;  // the report document's types

std::string escape(std::string_view text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += ch;
    }
  }
  return out;
}

// Text inside a <script> element must not close it: JSON spells '<' as \u003c, and code that
// holds "</script" (none of the pinned builds does) gets "<\/script", the same string to JavaScript.
std::string json_for_script(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == '<' ? std::string("\\u003c") : std::string(1, ch);
  return out;
}

std::string code_for_script(std::string code) {
  for (size_t at = 0; (at = code.find("</", at)) != std::string::npos; at += 3) {
    if (code.compare(at + 2, 6, "script") == 0 || code.compare(at + 2, 6, "SCRIPT") == 0) code.insert(at + 1, "\\");
  }
  return code;
}

std::string number_cell(double v, const char* spec = "%.4g") {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

std::string line_html(const Line& line) {
  std::string out;
  for (const Span& s : line) out += s.code ? "<code>" + escape(s.text) + "</code>" : escape(s.text);
  return out;
}

std::string table_html(const Table& t) {
  std::string out = "<div class=\"table-wrap\"><table class=\"sortable\"><thead><tr>";
  for (size_t c = 0; c < t.header.size(); ++c) {
    out += std::string("<th") + (c < t.text_columns ? "" : " class=\"num\"") + ">" + escape(t.header[c]) + "</th>";
  }
  out += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    out += "<tr>";
    for (size_t c = 0; c < row.size(); ++c) {
      out += c < t.text_columns ? "<td><code>" + escape(row[c]) + "</code></td>" : "<td class=\"num\">" + escape(row[c]) + "</td>";
    }
    out += "</tr>\n";
  }
  return out + "</tbody></table></div>\n";
}

// Blocks [from, to) of the report document; a code block (settings to paste) gets a copy button.
std::string doc_html(const Doc& doc, size_t from, size_t to) {
  std::string out;
  bool in_list = false;
  for (size_t i = from; i < to; ++i) {
    const Block& b = doc[i];
    if (in_list && b.kind != Block::item) {
      out += "</ul>\n";
      in_list = false;
    }
    switch (b.kind) {
      case Block::heading1: out += "<h1>" + line_html(b.line) + "</h1>\n"; break;
      case Block::heading2: out += "<h2>" + line_html(b.line) + "</h2>\n"; break;
      case Block::heading3: out += "<h3>" + line_html(b.line) + "</h3>\n"; break;
      case Block::text: out += "<p>" + line_html(b.line) + "</p>\n"; break;
      case Block::item:
        if (!in_list) out += "<ul>\n";
        in_list = true;
        out += "<li>" + line_html(b.line) + "</li>\n";
        break;
      case Block::code:
        out += "<div class=\"snippet\"><button type=\"button\" class=\"copy\">copy</button><pre>" + escape(b.body) +
               "</pre></div>\n";
        break;
      case Block::table: out += table_html(b.grid); break;
    }
  }
  if (in_list) out += "</ul>\n";
  return out;
}

// One table cell with the value it sorts by.
std::string cell(const std::string& text, double sort_value) {
  return "<td class=\"num\" data-v=\"" +
         (std::isfinite(sort_value) ? number_cell(sort_value, "%.17g") : std::string("")) + "\">" + escape(text) +
         "</td>";
}

// A figure with its interval, more digits where fewer would print it equal to a bound (figure_text.h).
std::string interval_cell(const SweepBudget& budget, const SweepRecord& r, Metric m, Statistic st) {
  const Summary& s = r.metric(m);
  const double v = st == Statistic::mean ? s.mean : s.p95;
  if (s.count == 0 || !std::isfinite(v)) return cell("-", NAN);
  return cell(figure_text(s, st, bounds_on(budget, m, st), 4, 3), v);
}

std::string points_table(const SweepBudget& budget, const std::vector<SweepRecord>& records,
                         const SweepAnalysis& analysis) {
  std::string out =
      "<table class=\"sortable\" id=\"points-table\"><thead><tr><th class=\"num\">#</th><th>K</th><th>V</th>"
      "<th>origin</th><th class=\"num\">bits</th><th class=\"num\">K bits</th><th class=\"num\">V bits</th>"
      "<th class=\"num\">rel_out_err</th><th class=\"num\">rel_out_err p95</th><th class=\"num\">attn_kl p95</th>"
      "<th class=\"num\">needle_hit</th><th class=\"num\">memory/seq</th><th>status</th><th>violations</th>"
      "</tr></thead><tbody>\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const SweepRecord& r = records[i];
    const RecordVerdict& v = analysis.verdicts[i];
    const char* status = !r.ok ? "failed" : v.feasible ? "feasible" : v.undecided ? "undecided" : "infeasible";
    std::string origin = r.origin;
    if (r.derived()) origin = "layers " + format_layers(r.exempt_layers) + " kept at " + r.exempt;
    std::string violations;
    for (const std::string& t : violation_texts(v)) violations += (violations.empty() ? "" : "; ") + t;
    out += "<tr class=\"" + std::string(status) + "\">" + cell(std::to_string(i), double(i)) + "<td><code>" +
           escape(r.k) + "</code></td><td><code>" + escape(r.v) + "</code></td><td>" + escape(origin) + "</td>" +
           cell(number_cell(r.bits()), r.bits()) + cell(number_cell(r.k_bits), r.k_bits) +
           cell(number_cell(r.v_bits), r.v_bits) + interval_cell(budget, r, Metric::rel_out_err, Statistic::mean) +
           interval_cell(budget, r, Metric::rel_out_err, Statistic::p95) +
           interval_cell(budget, r, Metric::attn_kl, Statistic::p95) +
           interval_cell(budget, r, Metric::needle_hit, Statistic::mean) +
           (v.memory ? cell(format_bytes(double(v.memory->total_bytes), 2), double(v.memory->total_bytes))
                     : cell("-", NAN)) +
           "<td>" + status + "</td><td>" + escape(violations) + "</td></tr>\n";
  }
  return out + "</tbody></table>\n";
}

constexpr const char* kStyle = R"(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 0 auto; max-width: 1180px; padding: 0 24px 48px; color: #1d1d1f; }
h1 { font-size: 24px; margin: 24px 0 8px; } h2 { font-size: 19px; margin: 28px 0 6px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 16px; margin: 20px 0 4px; }
header p { margin: 3px 0; color: #333; }
nav a { margin-right: 14px; }
code, pre { font: 12.5px/1.4 ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; }
p.about { color: #555; margin: 2px 0 8px; max-width: 900px; }
.snippet { position: relative; margin: 6px 0 10px; }
.snippet pre { background: #f5f5f7; border: 1px solid #ddd; border-radius: 4px; padding: 8px 10px; margin: 0; white-space: pre-wrap; }
.snippet button.copy { position: absolute; right: 6px; top: 6px; font-size: 11px; }
table.sortable { border-collapse: collapse; font-size: 12.5px; margin: 6px 0; }
table.sortable th { cursor: pointer; background: #f0f0f2; position: sticky; top: 0; user-select: none; }
table.sortable th.asc::after { content: " \25B2"; } table.sortable th.desc::after { content: " \25BC"; }
table.sortable th, table.sortable td { border: 1px solid #ddd; padding: 3px 6px; text-align: left; vertical-align: top; }
table.sortable .num { text-align: right; white-space: nowrap; }
#points-table tr.feasible td:nth-last-child(2) { color: #1a7f37; font-weight: 600; }
#points-table tr.undecided td:nth-last-child(2) { color: #9a6700; }
#points-table tr.failed td { color: #b42318; }
.table-wrap { max-height: 560px; overflow: auto; border: 1px solid #eee; margin: 6px 0; }
table.sortable td code { overflow-wrap: anywhere; }
table.sortable td:has(> code) { min-width: 200px; max-width: 320px; }
#points-table td:last-child { font-size: 11.5px; min-width: 260px; max-width: 420px; }
.chart-error { color: #b42318; }
)";

// Draws every chart, then records the outcome on <body data-charts> ("drawn" or "failed") and the
// views on window.kvtuneViews, so a test (or a reader's console) can inspect what was drawn.
constexpr const char* kPageScript = R"(
(function () {
  'use strict';
  var specs = JSON.parse(document.getElementById('kvtune-charts').textContent);
  var views = {};
  var failed = [];
  window.kvtuneViews = views;
  var jobs = Object.keys(specs).map(function (name) {
    var el = document.getElementById('chart-' + name);
    return vegaEmbed(el, specs[name], {
      renderer: 'svg',
      actions: {export: true, source: false, compiled: false, editor: false}
    }).then(function (result) {
      views[name] = result.view;
    }).catch(function (error) {
      failed.push(name);
      el.className += ' chart-error';
      el.textContent = 'This chart could not be drawn: ' + error;
      console.error('kvtune chart ' + name + ': ' + error);
    });
  });
  Promise.all(jobs).then(function () {
    document.body.setAttribute('data-charts', failed.length ? 'failed' : 'drawn');
  });

  // Sortable tables: a click on a heading sorts by that column (numbers by their data-v value).
  Array.prototype.forEach.call(document.querySelectorAll('table.sortable'), function (table) {
    var heads = table.querySelectorAll('th');
    Array.prototype.forEach.call(heads, function (th, column) {
      th.addEventListener('click', function () {
        var descending = th.classList.contains('asc');
        Array.prototype.forEach.call(heads, function (h) { h.classList.remove('asc', 'desc'); });
        th.classList.add(descending ? 'desc' : 'asc');
        var body = table.tBodies[0];
        var rows = Array.prototype.slice.call(body.rows);
        var key = function (row) {
          var c = row.cells[column];
          if (c.hasAttribute('data-v')) {
            var v = c.getAttribute('data-v');
            return v === '' ? Infinity : parseFloat(v);
          }
          return c.textContent;
        };
        rows.sort(function (a, b) {
          var x = key(a), y = key(b);
          var order = typeof x === 'number' && typeof y === 'number' ? x - y : String(x).localeCompare(String(y));
          return descending ? -order : order;
        });
        rows.forEach(function (row) { body.appendChild(row); });
      });
    });
  });

  // Copy buttons: the settings block beside them, to paste into a shell or a config.
  Array.prototype.forEach.call(document.querySelectorAll('button.copy'), function (button) {
    button.addEventListener('click', function () {
      var text = button.parentNode.querySelector('pre').textContent;
      var done = function () {
        button.textContent = 'copied';
        setTimeout(function () { button.textContent = 'copy'; }, 1500);
      };
      if (navigator.clipboard && window.isSecureContext) {
        navigator.clipboard.writeText(text).then(done, function () { button.textContent = 'select and copy'; });
      } else {
        var range = document.createRange();
        range.selectNodeContents(button.parentNode.querySelector('pre'));
        var selection = window.getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
        button.textContent = document.execCommand('copy') ? 'copied' : 'selected: press Ctrl+C';
      }
    });
  });
})();
)";

// The page around charts already made (write_sweep_html writes them beside it too).
std::string page_html(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis,
                      const std::vector<ChartSpec>& charts, const std::vector<ChartScript>& scripts) {
  const Doc doc = build_sweep_document(spec, records, analysis);
  size_t header_end = 0;
  while (header_end < doc.size() && doc[header_end].kind != Block::heading2) ++header_end;

  std::ostringstream out;
  out << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      << "<meta name=\"generator\" content=\"kvtune\">\n"
      << "<title>kvtune sweep " << escape(spec.name) << "</title>\n<style>" << kStyle << "</style>\n";
  for (const ChartScript& s : scripts) {
    std::string licence = s.license_text;
    for (size_t at = 0; (at = licence.find("*/", at)) != std::string::npos;) licence.replace(at, 2, "* /");
    out << "<script>/*! " << s.package << " " << s.version << " (npm), " << s.license
        << "; it bundles its dependencies, each under its own licence (see its package.json)\n"
        << licence << "\n*/\n"
        << code_for_script(s.code) << "\n</script>\n";
  }
  out << "</head>\n<body>\n<header>\n" << doc_html(doc, 0, header_end) << "<nav>";
  for (const ChartSpec& c : charts) out << "<a href=\"#section-" << c.name << "\">" << escape(c.title) << "</a>";
  out << "<a href=\"#section-points\">every point</a><a href=\"#section-report\">best and runtimes</a></nav>\n</header>\n";
  for (const ChartSpec& c : charts) {
    out << "<section id=\"section-" << c.name << "\">\n<h2>" << escape(c.title) << "</h2>\n<p class=\"about\">"
        << escape(c.about) << "</p>\n<div id=\"chart-" << c.name << "\" class=\"chart\"></div>\n</section>\n";
  }
  out << "<section id=\"section-points\">\n<h2>Every point</h2>\n<p class=\"about\">" << records.size()
      << " points (layer exemptions included); click a heading to sort.</p>\n<div class=\"table-wrap\">"
      << points_table(spec.budget, records, analysis) << "</div>\n</section>\n";
  out << "<section id=\"section-report\">\n" << doc_html(doc, header_end, doc.size()) << "</section>\n";
  nlohmann::ordered_json specs = nlohmann::ordered_json::object();
  for (const ChartSpec& c : charts) specs[c.name] = nlohmann::ordered_json::parse(c.vega_lite);
  out << "<script type=\"application/json\" id=\"kvtune-charts\">" << json_for_script(specs.dump()) << "</script>\n";
  out << "<script>" << kPageScript << "</script>\n</body>\n</html>\n";
  return out.str();
}

}  // namespace

std::string sweep_report_html(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                              const SweepAnalysis& analysis, const std::vector<ChartScript>& scripts) {
  return page_html(spec, records, analysis, sweep_charts(spec, records, analysis), scripts);
}

void write_sweep_html(const std::string& html_path, const SweepSpec& spec, const std::vector<SweepRecord>& records,
                      const SweepAnalysis& analysis, const std::vector<ChartScript>& scripts) {
  auto write = [](const fs::path& path, const std::string& text) {
    write_file_atomic(path.string(), std::as_bytes(std::span(text.data(), text.size())));
  };
  const fs::path page(html_path);
  const fs::path chart_dir = page.parent_path() / (page.stem().string() + "-charts");
  std::error_code ec;
  fs::create_directories(chart_dir, ec);
  if (ec) throw InputError(chart_dir.string() + ": cannot create the folder for the chart specifications (" + ec.message() + ")");
  const std::vector<ChartSpec> charts = sweep_charts(spec, records, analysis);
  for (const ChartSpec& c : charts) {
    write(chart_dir / (c.name + ".vl.json"), nlohmann::ordered_json::parse(c.vega_lite).dump(2) + "\n");
  }
  write(page, page_html(spec, records, analysis, charts, scripts));
}

std::vector<ChartScript> load_chart_scripts(const fs::path& node_modules) {
  auto text = [](const fs::path& path) {
    const std::vector<std::byte> bytes = read_file(path.string());
    return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  };
  std::vector<ChartScript> out;
  for (const char* package : kChartPackages) {
    const fs::path dir = node_modules / package;
    const fs::path manifest = dir / "package.json";
    ChartScript s;
    s.package = package;
    try {
      const nlohmann::json j = nlohmann::json::parse(text(manifest));
      s.version = j.at("version").get<std::string>();
      s.license = j.value("license", std::string("see LICENSE"));
    } catch (const nlohmann::json::exception& e) {
      throw InputError(manifest.string() + ": not an npm package.json with a version (" + e.what() + ")");
    }
    s.license_text = text(dir / "LICENSE");
    s.code = text(dir / "build" / (std::string(package) + ".min.js"));
    // The source map is not shipped with the page: drop the comment that would ask for it.
    if (const size_t at = s.code.rfind("//# sourceMappingURL="); at != std::string::npos) s.code.erase(at);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kvtune
