#include "report.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <cstdio>
#include <span>
#include <string>
#include <vector>

#include "kvtune/csv.h"

namespace kvtune::cli {
namespace {

std::string fmt(double v, const char* spec = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, spec, v);
  return buf;
}

// Columns padded to their widest cell under a dashed rule; the first `text_columns` align left,
// numbers right.
void print_aligned(std::ostream& out, const std::vector<std::string>& header,
                   const std::vector<std::vector<std::string>>& rows, size_t text_columns) {
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : rows) width[c] = std::max(width[c], r[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    for (size_t c = 0; c < cells.size(); ++c) {
      const std::string pad(width[c] - cells[c].size(), ' ');
      out << (c < text_columns ? cells[c] + pad : pad + cells[c]) << (c + 1 < cells.size() ? "  " : "\n");
    }
  };
  line(header);
  size_t total = 0;
  for (size_t w : width) total += w + 2;
  out << std::string(total - 2, '-') << "\n";
  for (const auto& r : rows) line(r);
}

}  // namespace

// "mean [lo, hi]": a summary's mean with its interval; "-" without samples.
std::string mean_with_interval(const Summary& s) {
  if (s.count == 0) return "-";
  return fmt(s.mean) + " [" + fmt(s.mean_ci.lo, "%.3g") + ", " + fmt(s.mean_ci.hi, "%.3g") + "]";
}

void print_table(std::ostream& out, const EvalResult& result) {
  out << "cases " << result.cases << "  tokens " << result.tokens << "  head_dim " << result.head_dim
      << "  queries/case " << result.queries_per_case << "  backend " << result.backend
      << (result.precision == Precision::float32 ? "  products float32" : "")
      << "  (metrics: mean [its " << fmt(100.0 * kDefaultConfidence, "%.3g")
      << " % confidence interval: Wilson for the rates top1_agree and needle_hit, Student's t otherwise; "
      << (result.cases >= 2 ? "over cases, the rates with their design effect" : "over samples, one case")
      << "] over queries and cases; p95 as noted)\n\n";
  const std::vector<std::string> header = {"pair",          "k",          "v",           "k_bits",
                                           "v_bits",        "rel_out_err", "p95",         "max_logit_err",
                                           "shift_logit_err", "attn_kl",  "top1_agree",  "topk_overlap",
                                           "needle_hit"};
  std::vector<std::vector<std::string>> rows;
  for (const PairResult& p : result.pairs) {
    auto mean = [&](Metric m) { return mean_with_interval(p.summary_with_intervals(m)); };
    rows.push_back({p.name, p.k->spec(), p.v->spec(), fmt(p.k_bits, "%.3f"), fmt(p.v_bits, "%.3f"),
                    mean(Metric::rel_out_err), fmt(p.summary(Metric::rel_out_err).p95), mean(Metric::max_logit_err),
                    mean(Metric::shift_logit_err), mean(Metric::attn_kl), mean(Metric::top1_agree),
                    mean(Metric::topk_overlap), mean(Metric::needle_hit)});
  }
  print_aligned(out, header, rows, 3);
  for (const PairResult& p : result.pairs) {
    if (p.kernel_vs_sim.empty()) continue;
    const Summary s = summarize(p.kernel_vs_sim);
    out << "  " << p.name << ": fused kernel vs simulator |o_kernel - o_sim| / |o_sim| mean " << fmt(s.mean)
        << ", max " << fmt(s.max) << " (rel_out_err above is the kernel's)\n";
  }
}

namespace {

// A metric summary as JSON, with its intervals as results.jsonl writes them (mean_ci, p95_ci, their
// methods and level); null means "does not apply". A non-finite metric is a bug, never printed as
// if it were null.
nlohmann::json summary_json(const Summary& s, const std::string& metric, const std::string& pair) {
  if (!std::isfinite(s.mean) || !std::isfinite(s.p95) || !std::isfinite(s.max)) {
    throw std::runtime_error("metric " + metric + " of pair '" + pair + "' is not finite");
  }
  if (s.count == 0) return nullptr;
  return {{"mean", s.mean},
          {"p95", s.p95},
          {"max", s.max},
          {"count", s.count},
          {"level", s.level},
          {"mean_ci", {s.mean_ci.lo, s.mean_ci.hi}},
          {"mean_ci_method", interval_method_name(s.mean_method)},
          {"p95_ci", {s.p95_ci.lo, s.p95_ci.hi}},
          {"p95_ci_method", interval_method_name(s.p95_method)}};
}

bool has_needles(const std::vector<EvalResult>& runs) {
  for (const EvalResult& r : runs) {
    for (const PairResult& p : r.pairs) {
      if (!p.needle_depths.empty()) return true;
    }
  }
  return false;
}

}  // namespace

void print_needle_tables(std::ostream& out, const std::vector<EvalResult>& runs) {
  if (runs.empty() || !has_needles(runs)) return;
  for (size_t p = 0; p < runs.front().pairs.size(); ++p) {
    out << "\nneedle_hit (needle_mass_ratio) [needle_hit's 95 % Wilson interval] by depth x context: "
        << runs.front().pairs[p].name << "\n";
    std::vector<std::string> header = {"depth"};
    for (const EvalResult& r : runs) header.push_back(std::to_string(r.tokens));
    std::vector<std::vector<std::string>> rows;
    for (size_t d = 0; d < runs.front().pairs[p].needle_depths.size(); ++d) {
      std::vector<std::string> row = {fmt(runs.front().pairs[p].needle_depths[d].depth, "%.3g")};
      for (const EvalResult& r : runs) {
        const DepthSamples& ds = r.pairs[p].needle_depths[d];
        // needle_hit is a rate: its interval is the Wilson one over the cases (as in needle_csv).
        const Summary hit = summarize_metric(ds.hit, ds.case_sizes, Metric::needle_hit);
        const Summary mass = summarize(ds.mass_ratio);
        if (hit.count == 0) {
          row.push_back("-");
          continue;
        }
        row.push_back(fmt(hit.mean, "%.3f") + " (" + fmt(mass.mean, "%.3f") + ") [" + fmt(hit.mean_ci.lo, "%.2f") +
                      ", " + fmt(hit.mean_ci.hi, "%.2f") + "]");
      }
      rows.push_back(std::move(row));
    }
    print_aligned(out, header, rows, 0);
  }
}

std::string needle_csv(const std::vector<EvalResult>& runs) {
  std::string out =
      "pair,k,v,tokens,depth,needles,needle_hit,needle_mass_ratio,needle_hit_lo,needle_hit_hi,needle_mass_ratio_lo,"
      "needle_mass_ratio_hi\n";
  for (const EvalResult& r : runs) {
    for (const PairResult& p : r.pairs) {
      for (const DepthSamples& ds : p.needle_depths) {
        const Summary hit = summarize_metric(ds.hit, ds.case_sizes, Metric::needle_hit);
        const Summary mass = summarize_metric(ds.mass_ratio, ds.case_sizes, Metric::needle_mass_ratio);
        std::string fields = ",,,,,";
        if (hit.count) {
          fields = fmt(hit.mean, "%.6g") + "," + fmt(mass.mean, "%.6g") + "," + fmt(hit.mean_ci.lo, "%.6g") + "," +
                   fmt(hit.mean_ci.hi, "%.6g") + "," + fmt(mass.mean_ci.lo, "%.6g") + "," +
                   fmt(mass.mean_ci.hi, "%.6g");
        }
        out += csv_field(p.name) + "," + csv_field(p.k->spec()) + "," + csv_field(p.v->spec()) + "," +
               std::to_string(r.tokens) + "," + fmt(ds.depth, "%.6g") + "," + std::to_string(hit.count) + "," +
               fields + "\n";
      }
    }
  }
  return out;
}

nlohmann::json to_json(const std::string& name, const std::vector<EvalResult>& runs) {
  nlohmann::json rows = nlohmann::json::array();
  nlohmann::json contexts = nlohmann::json::array();
  for (const EvalResult& result : runs) {
    contexts.push_back(result.tokens);
    for (const PairResult& p : result.pairs) {
      nlohmann::json row = {{"name", p.name},     {"k", p.k->spec()},     {"v", p.v->spec()},
                            {"tokens", result.tokens}, {"k_bits", p.k_bits}, {"v_bits", p.v_bits}};
      for (size_t m = 0; m < kMetricCount; ++m) {
        row[std::string(kMetricNames[m])] =
            summary_json(p.summary_with_intervals(Metric(m)), std::string(kMetricNames[m]), p.name);
      }
      nlohmann::json depths = nlohmann::json::array();
      for (const DepthSamples& ds : p.needle_depths) {
        depths.push_back({{"depth", ds.depth},
                          {"needle_hit", summary_json(summarize_metric(ds.hit, ds.case_sizes, Metric::needle_hit),
                                                      "needle_hit", p.name)},
                          {"needle_mass_ratio",
                           summary_json(summarize_metric(ds.mass_ratio, ds.case_sizes, Metric::needle_mass_ratio),
                                        "needle_mass_ratio", p.name)}});
      }
      row["needle_depths"] = std::move(depths);
      row["kernel_vs_sim"] =
          summary_json(summarize(p.kernel_vs_sim, {.case_sizes = p.kernel_case_sizes}), "kernel_vs_sim", p.name);
      rows.push_back(std::move(row));
    }
  }
  const EvalResult& first = runs.front();
  return {{"name", name},
          {"contexts", std::move(contexts)},
          {"cases", first.cases},
          {"backend", first.backend},
          {"precision", precision_name(first.precision)},
          {"head_dim", first.head_dim},
          {"queries_per_case", first.queries_per_case},
          {"rows", std::move(rows)}};
}

}  // namespace kvtune::cli
