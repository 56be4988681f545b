// The JSON form of a metric summary, shared by results.jsonl and summary.json: null when the
// metric has no samples; the intervals only when the summary has them (records written before
// intervals existed read back without). Internal: nlohmann_json stays out of the public headers.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "kvtune/error.h"
#include "kvtune/metrics.h"

namespace kvtune::detail {

template <class Json>
Json summary_json(const Summary& s) {
  if (s.count == 0) return nullptr;
  Json j = {{"mean", s.mean}, {"p95", s.p95}, {"max", s.max}, {"count", s.count}};
  if (s.has_intervals()) {
    j["level"] = s.level;
    j["mean_ci"] = {s.mean_ci.lo, s.mean_ci.hi};
    j["mean_ci_method"] = interval_method_name(s.mean_method);
    j["p95_ci"] = {s.p95_ci.lo, s.p95_ci.hi};
    j["p95_ci_method"] = interval_method_name(s.p95_method);
    if (!s.cases.empty()) {
      Json cases = Json::array();
      for (const CaseMean& c : s.cases) cases.push_back({c.mean, c.count});
      j["cases"] = std::move(cases);  // [mean, count] of each case: what a derived record mixes
    }
  }
  return j;
}

// Reads summary_json's object; `where` names the file and line for a missing or mistyped field.
template <class Json>
Summary summary_from_json(const Json& j, const std::string& where) {
  auto number = [&](const char* key) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_number()) throw InputError(where + ": metric field '" + key + "' must be a number");
    return it->template get<double>();
  };
  Summary s;
  s.mean = number("mean");
  s.p95 = number("p95");
  s.max = number("max");
  const auto count = j.find("count");
  if (count == j.end() || !count->is_number_unsigned()) {
    throw InputError(where + ": metric field 'count' must be a non-negative integer");
  }
  s.count = count->template get<size_t>();
  if (!j.contains("level")) return s;
  s.level = number("level");
  auto interval = [&](const char* key, const char* method_key, Interval& ci, IntervalMethod& method) {
    const auto it = j.find(key);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[0].is_number() || !(*it)[1].is_number() ||
        !((*it)[0].template get<double>() <= (*it)[1].template get<double>())) {
      throw InputError(where + ": metric field '" + key + "' must be [low, high] with low <= high");
    }
    ci = {(*it)[0].template get<double>(), (*it)[1].template get<double>()};
    const auto m = j.find(method_key);
    const std::optional<IntervalMethod> parsed =
        m != j.end() && m->is_string() ? interval_method_from_name(m->template get<std::string>()) : std::nullopt;
    if (!parsed) {
      throw InputError(where + ": metric field '" + method_key +
                       "' must be one of none, wilson, wilson_cases, t_cases, t_samples, bootstrap_cases, "
                       "bootstrap_samples, mixture_bound");
    }
    method = *parsed;
  };
  if (!(s.level > 0.0 && s.level < 1.0)) throw InputError(where + ": metric field 'level' must lie in (0, 1)");
  interval("mean_ci", "mean_ci_method", s.mean_ci, s.mean_method);
  interval("p95_ci", "p95_ci_method", s.p95_ci, s.p95_method);
  const auto cases = j.find("cases");
  if (cases == j.end()) return s;  // written before cases were kept, or over one case
  size_t counted = 0;
  const std::string expected = where + ": metric field 'cases' must be a list of [mean, count] pairs, at least two, " +
                               "whose counts add up to 'count'";
  if (!cases->is_array() || cases->size() < 2) throw InputError(expected);
  for (const Json& c : *cases) {
    if (!c.is_array() || c.size() != 2 || !c[0].is_number() || !c[1].is_number_unsigned()) throw InputError(expected);
    s.cases.push_back({c[0].template get<double>(), c[1].template get<size_t>()});
    counted += s.cases.back().count;
  }
  if (counted != s.count) throw InputError(expected);
  return s;
}

}  // namespace kvtune::detail
