// The sweep report as one document (headings, lines of text and code spans, tables, code blocks),
// built once and rendered three times: the console summary, report.md and report.html cannot
// drift apart. Internal to the core, with the JSON forms the HTML page embeds.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kvtune/sweep.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_run.h"

namespace kvtune::detail {

// A line is a run of spans; code spans (specs, flags) become `code` in Markdown and HTML.
struct Span {
  std::string text;
  bool code = false;
};
using Line = std::vector<Span>;

struct Table {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  size_t text_columns = 0;  // the first columns are text (left-aligned; code in Markdown), the rest numbers
};

struct Block {
  enum Kind { heading1, heading2, heading3, text, item, code, table } kind;
  Line line;         // headings, text, items
  std::string body;  // code: pasted verbatim
  Table grid;        // table
};

using Doc = std::vector<Block>;

inline Span code(std::string text) { return {std::move(text), true}; }

Doc build_sweep_document(const SweepSpec& spec, const std::vector<SweepRecord>& records, const SweepAnalysis& analysis);

// summary.json as a JSON value, and one record as summary.json writes a point.
nlohmann::ordered_json summary_document(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                        const SweepAnalysis& analysis);
nlohmann::ordered_json sweep_point_json(const SweepSpec& spec, const std::vector<SweepRecord>& records,
                                        const SweepAnalysis& analysis, size_t index);

}  // namespace kvtune::detail
