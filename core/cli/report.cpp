#include "report.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <cstdio>
#include <string>
#include <vector>

namespace kvtune::cli {
namespace {

std::string fmt(double v, const char* spec = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

}  // namespace

void print_table(std::ostream& out, const EvalResult& result) {
  out << "cases " << result.cases << "  tokens " << result.tokens << "  head_dim " << result.head_dim
      << "  queries/case " << result.queries_per_case << "  (metrics: mean over queries and cases; p95 as noted)\n\n";
  const std::vector<std::string> header = {"pair",          "k",          "v",           "k_bits",
                                           "v_bits",        "rel_out_err", "p95",         "max_logit_err",
                                           "shift_logit_err", "attn_kl",  "top1_agree",  "topk_overlap",
                                           "needle_hit"};
  std::vector<std::vector<std::string>> rows;
  for (const PairResult& p : result.pairs) {
    const Summary needle = p.summary(Metric::needle_hit);
    rows.push_back({p.name, p.k->spec(), p.v->spec(), fmt(p.k_bits, "%.3f"), fmt(p.v_bits, "%.3f"),
                    fmt(p.summary(Metric::rel_out_err).mean), fmt(p.summary(Metric::rel_out_err).p95),
                    fmt(p.summary(Metric::max_logit_err).mean), fmt(p.summary(Metric::shift_logit_err).mean),
                    fmt(p.summary(Metric::attn_kl).mean), fmt(p.summary(Metric::top1_agree).mean),
                    fmt(p.summary(Metric::topk_overlap).mean), needle.count ? fmt(needle.mean) : "-"});
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const size_t pad = width[c] - cells[c].size();
      if (c < 3) {
        out << cells[c] << std::string(pad, ' ');  // text columns align left
      } else {
        out << std::string(pad, ' ') << cells[c];  // numbers align right
      }
      out << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(header);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << std::string(total - 2, '-') << "\n";
  for (const auto& r : rows) line(r);
}

nlohmann::json to_json(const EvalResult& result) {
  nlohmann::json rows = nlohmann::json::array();
  for (const PairResult& p : result.pairs) {
    nlohmann::json row = {{"name", p.name}, {"k", p.k->spec()}, {"v", p.v->spec()},
                          {"k_bits", p.k_bits}, {"v_bits", p.v_bits}};
    for (size_t m = 0; m < kMetricCount; ++m) {
      const Summary s = summarize(p.samples[m]);
      const std::string name(kMetricNames[m]);
      // null means "does not apply"; a non-finite metric is a bug, never printed as if it were null.
      if (!std::isfinite(s.mean) || !std::isfinite(s.p95) || !std::isfinite(s.max)) {
        throw std::runtime_error("metric " + name + " of pair '" + p.name + "' is not finite");
      }
      if (s.count == 0) {
        row[name] = nullptr;  // needle metrics without needles
      } else {
        row[name] = {{"mean", s.mean}, {"p95", s.p95}, {"max", s.max}, {"count", s.count}};
      }
    }
    rows.push_back(std::move(row));
  }
  return {{"cases", result.cases},
          {"tokens", result.tokens},
          {"head_dim", result.head_dim},
          {"queries_per_case", result.queries_per_case},
          {"rows", std::move(rows)}};
}

}  // namespace kvtune::cli
