#include "kvtune/sweep_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>

#include "case_cache.h"
#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/file_io.h"
#include "kvtune/sweep_analysis.h"
#include "kvtune/sweep_dir.h"
#include "kvtune/version.h"
#include "summary_json.h"
#include "sweep_json.h"

namespace kvtune {
namespace fs = std::filesystem;
namespace {

using json = nlohmann::json;

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string host_name() {
  char buf[256] = {};
  return ::gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string("unknown");
}

// Reads a record's field, naming the line when it is missing or of the wrong type.
template <class T>
T field(const json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end()) throw InputError(where + ": missing field '" + key + "'");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw InputError(where + ": field '" + key + "' has the wrong type");
  }
}

// The metrics object of a record or of one of its layers: every metric, null where it has no samples.
void metrics_from_json(const json& j, std::array<Summary, kMetricCount>& metrics, const std::string& where) {
  for (size_t m = 0; m < kMetricCount; ++m) {
    const std::string name(kMetricNames[m]);
    const auto it = j.find(name);
    if (it == j.end()) throw InputError(where + ": missing metric '" + name + "'");
    if (!it->is_null()) metrics[m] = detail::summary_from_json(*it, where);
  }
}

json metrics_json(const std::array<Summary, kMetricCount>& metrics) {
  json j = json::object();
  for (size_t m = 0; m < kMetricCount; ++m) j[std::string(kMetricNames[m])] = detail::summary_json<json>(metrics[m]);
  return j;
}

// A record's per-layer or per-head summaries: `key` lists {`id_key`: N, <metric>: ..., ...} objects.
template <class Part>
std::vector<Part> parts_from_json(const json& j, const char* key, const char* id_key, int64_t Part::*id,
                                  const std::string& where) {
  std::vector<Part> out;
  const auto list = j.find(key);
  if (list == j.end()) return out;
  if (!list->is_array()) throw InputError(where + ": field '" + key + "' must be an array");
  for (const json& entry : *list) {
    if (!entry.is_object()) throw InputError(where + ": each entry of '" + key + "' must be an object");
    Part part;
    part.*id = field<int64_t>(entry, id_key, where);
    metrics_from_json(entry, part.metrics, where + " (" + id_key + " " + std::to_string(part.*id) + ")");
    out.push_back(part);
  }
  return out;
}

template <class Part>
json parts_json(const std::vector<Part>& parts, const char* id_key, int64_t Part::*id) {
  json out = json::array();
  for (const Part& part : parts) {
    json entry = metrics_json(part.metrics);
    entry[id_key] = part.*id;
    out.push_back(std::move(entry));
  }
  return out;
}

SweepRecord record_from_json(const json& j, const std::string& where) {
  SweepRecord r;
  r.k = field<std::string>(j, "k", where);
  r.v = field<std::string>(j, "v", where);
  r.origin = field<std::string>(j, "origin", where);
  r.ok = field<std::string>(j, "status", where) == "ok";
  if (!r.ok) r.error = field<std::string>(j, "error", where);
  r.k_bits = field<double>(j, "k_bits", where);
  r.v_bits = field<double>(j, "v_bits", where);
  if (j.contains("backend")) r.backend = field<std::string>(j, "backend", where);
  metrics_from_json(j, r.metrics, where);
  r.layers = parts_from_json(j, "layers", "layer", &LayerSummary::layer, where);
  r.heads = parts_from_json(j, "heads", "kv_head", &HeadSummary::kv_head, where);
  if (const auto depths = j.find("needle_depths"); depths != j.end()) {
    if (!depths->is_array()) throw InputError(where + ": field 'needle_depths' must be an array");
    for (const json& d : *depths) {
      if (!d.is_object()) throw InputError(where + ": each entry of 'needle_depths' must be an object");
      DepthSummary s;
      s.depth = field<double>(d, "depth", where);
      const auto hit = d.find("needle_hit");
      if (hit == d.end() || !hit->is_object()) {
        throw InputError(where + ": each entry of 'needle_depths' needs a 'needle_hit' object");
      }
      s.needle_hit = detail::summary_from_json(*hit, where + " (needle depth " + std::to_string(s.depth) + ")");
      r.needle_depths.push_back(s);
    }
  }
  const std::string hash = field<std::string>(j, "spec_hash", where);
  const auto [end, ec] = std::from_chars(hash.data(), hash.data() + hash.size(), r.spec_hash, 16);
  if (hash.empty() || hash.size() > 16 || ec != std::errc() || end != hash.data() + hash.size()) {
    throw InputError(where + ": field 'spec_hash' must be 1 to 16 hexadecimal digits, got '" + hash + "'");
  }
  r.kvtune_version = field<std::string>(j, "kvtune_version", where);
  r.git_commit = field<std::string>(j, "git_commit", where);
  r.host = field<std::string>(j, "host", where);
  r.time = field<std::string>(j, "time", where);
  r.shard = field<int64_t>(j, "shard", where);
  r.shards = field<int64_t>(j, "shards", where);
  return r;
}

// The records of a results.jsonl and whether its last line was cut off mid-write (an interrupted
// run); every other malformed line is an error naming file:line.
struct ResultsFile {
  std::vector<SweepRecord> records;
  std::string good_text;  // the complete lines
  bool truncated = false;
};

ResultsFile parse_results(const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  const std::string text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ResultsFile out;
  size_t at = 0;
  for (int64_t line = 1; at < text.size(); ++line) {
    const size_t end = text.find('\n', at);
    if (end == std::string::npos) {  // no newline: the write of this line never finished
      out.truncated = true;
      break;
    }
    const std::string where = path + ":" + std::to_string(line);
    json j;
    try {
      j = json::parse(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(end));
    } catch (const json::exception& e) {  // parse_error, and out_of_range for a number past double
      throw InputError(where + ": not a JSON line (" + e.what() + ")");
    }
    if (!j.is_object()) throw InputError(where + ": expected a JSON object");
    out.records.push_back(record_from_json(j, where));
    at = end + 1;
  }
  out.good_text = text.substr(0, at);
  return out;
}

// Provenance every line of this run carries.
SweepRecord record_template(const SweepSpec& spec, const SweepRunOptions& o) {
  SweepRecord r;
  r.spec_hash = spec.hash;
  r.kvtune_version = KVTUNE_VERSION;
  r.git_commit = KVTUNE_GIT_COMMIT;
  r.host = host_name();
  r.time = utc_now();
  r.shard = o.shard;
  r.shards = o.shards;
  return r;
}

SweepRecord point_record(const SweepPoint& p, const SweepRecord& provenance) {
  SweepRecord r = provenance;
  r.k = p.k;
  r.v = p.v;
  r.origin = p.origin;
  return r;
}

// The summaries of each sampled layer's (or KV head's) cases: `part_of` names a case's layer (or
// head). Each metric's samples come case by case, as many as PairResult::case_sizes says.
template <class Part>
std::vector<Part> part_summaries(const PairResult& pair, const std::vector<CaseKey>& cases,
                                 const std::vector<int64_t>& ids, int64_t CaseKey::*part_of, int64_t Part::*id,
                                 double level) {
  std::vector<Part> out;
  for (int64_t i : ids) {
    Part part;
    part.*id = i;
    out.push_back(part);
  }
  for (size_t m = 0; m < kMetricCount; ++m) {
    const std::vector<double>& samples = pair.samples[m];
    const std::vector<size_t>& sizes = pair.case_sizes[m];
    if (samples.empty() || sizes.size() != cases.size()) continue;
    for (Part& part : out) {
      std::vector<double> mine;
      std::vector<size_t> mine_sizes;
      size_t at = 0;
      for (size_t c = 0; c < cases.size(); ++c) {
        const auto first = samples.begin() + static_cast<std::ptrdiff_t>(at);
        at += sizes[c];
        if (cases[c].*part_of != part.*id) continue;
        mine.insert(mine.end(), first, first + static_cast<std::ptrdiff_t>(sizes[c]));
        mine_sizes.push_back(sizes[c]);
      }
      part.metrics[m] = summarize_metric(mine, mine_sizes, Metric(m), level);
    }
  }
  return out;
}

// needle_hit per depth, over the cases' needles at that depth.
std::vector<DepthSummary> depth_summaries(const PairResult& pair, double level) {
  std::vector<DepthSummary> out;
  for (const DepthSamples& d : pair.needle_depths) {
    if (d.hit.empty()) continue;
    out.push_back({.depth = d.depth, .needle_hit = summarize_metric(d.hit, d.case_sizes, Metric::needle_hit, level)});
  }
  return out;
}

// A case that cannot be made (a NaN in a capture's layer, say) is bad input to the whole sweep, not
// one point's failure: it travels as this, which evaluate_batch lets through.
class CaseInputError : public InputError {
 public:
  using InputError::InputError;
};

// One separable evaluation of `points` (their own schemes) over every case of the spec.
// `on_fraction` (may be empty) hears the share of the evaluation done, from the evaluation threads.
std::vector<SweepRecord> evaluate_points(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                         const SweepRunOptions& o, const SweepRecord& provenance, CaseCache& kept,
                                         const std::function<void(double)>& on_fraction) {
  EvalPlan plan;
  plan.topk = spec.scenario.topk;
  plan.precision = spec.scenario.precision;
  plan.backend = o.backend;
  std::map<std::string, size_t, std::less<>> k_index, v_index;
  auto slot = [](std::map<std::string, size_t, std::less<>>& index, std::vector<SchemePtr>& schemes,
                 const SweepPoint& p, const SchemePtr& scheme, const std::string& spec_text) {
    if (scheme == nullptr) throw std::logic_error("sweep point '" + p.k + " / " + p.v + "' has no schemes (make_point)");
    const auto [it, fresh] = index.emplace(spec_text, schemes.size());
    if (fresh) schemes.push_back(scheme);
    return it->second;
  };
  for (const SweepPoint& p : points) {
    plan.pairs.push_back({p.k + " / " + p.v, slot(k_index, plan.k_schemes, p, p.k_scheme, p.k),
                          slot(v_index, plan.v_schemes, p, p.v_scheme, p.v)});
  }
  const std::vector<CaseKey> cases = scenario_cases(spec.scenario);
  const int64_t tokens = spec.scenario.contexts.front();
  std::atomic<size_t> steps{0};
  const double all_steps = double(cases.size() * (plan.k_schemes.size() + plan.v_schemes.size()));
  if (on_fraction) plan.on_step = [&] { on_fraction(double(++steps) / all_steps); };
  // A case that cannot be made is remembered: evaluate() rethrows the first error in case order,
  // which may be a scheme's on another case, and a child process returns it as a plain InputError.
  std::mutex unmade_mutex;
  std::optional<std::string> unmade;
  const SharedCaseSource source = [&](size_t i) {
    return kept.get(i, [&] {
      try {
        return scenario_case(spec.scenario, cases[i], tokens);
      } catch (const InputError& e) {
        const std::lock_guard<std::mutex> guard(unmade_mutex);
        if (!unmade) unmade = e.what();
        throw;
      }
    });
  };
  // Plugin code runs in a child process: a crash fails this batch's points, not the sweep. A GPU
  // context does not survive fork, so with a GPU backend plugins run in-process. The cases are made
  // here first, so a bad one is told apart from a plugin's failure (the child finds them made).
  const bool isolate = plan_uses_plugins(plan) && (!plan.backend || plan.backend->name() == "cpu");
  const EvalResult result = [&] {
    try {
      if (isolate) {
        for (size_t i = 0; i < cases.size(); ++i) source(i);
      }
      return isolate ? evaluate_isolated(plan, cases.size(), source, o.threads)
                     : evaluate(plan, cases.size(), source, o.threads);
    } catch (const InputError&) {
      if (unmade) throw CaseInputError(*unmade);
      throw;
    }
  }();
  std::vector<SweepRecord> out;
  for (size_t i = 0; i < points.size(); ++i) {
    SweepRecord r = point_record(points[i], provenance);
    r.k_bits = result.pairs[i].k_bits;
    r.v_bits = result.pairs[i].v_bits;
    r.backend = result.pairs[i].backend_used;
    const double level = spec.budget.interval_level();
    for (size_t m = 0; m < kMetricCount; ++m) {
      r.metrics[m] = result.pairs[i].summary_with_intervals(Metric(m), level);
    }
    if (spec.scenario.layers.size() > 1) {
      r.layers = part_summaries(result.pairs[i], cases, spec.scenario.layers, &CaseKey::layer, &LayerSummary::layer, level);
    }
    if (spec.scenario.heads.size() > 1) {
      r.heads = part_summaries(result.pairs[i], cases, spec.scenario.heads, &CaseKey::kv_head, &HeadSummary::kv_head, level);
    }
    r.needle_depths = depth_summaries(result.pairs[i], level);
    out.push_back(std::move(r));
  }
  return out;
}

// A batch whose evaluation is refused (a scheme's InputError) is evaluated point by point, so only
// the points whose scheme fails become failed records and the sweep goes on. Anything else thrown
// is a bug and propagates.
std::vector<SweepRecord> evaluate_batch(const SweepSpec& spec, const std::vector<SweepPoint>& points,
                                        const SweepRunOptions& o, const SweepRecord& provenance, CaseCache& kept,
                                        const std::function<void(double)>& on_fraction) {
  if (points.size() > 1) {
    try {
      return evaluate_points(spec, points, o, provenance, kept, on_fraction);
    } catch (const CaseInputError&) {
      throw;
    } catch (const InputError&) {
      // one of them fails: find which below
    }
  }
  std::vector<SweepRecord> out;
  for (const SweepPoint& p : points) {
    try {
      out.push_back(evaluate_points(spec, {p}, o, provenance, kept, {}).front());
    } catch (const CaseInputError&) {
      throw;
    } catch (const InputError& e) {
      SweepRecord r = point_record(p, provenance);
      r.ok = false;
      r.error = e.what();
      out.push_back(std::move(r));
    }
  }
  return out;
}

// results.jsonl opened for appending; a failed write names the system's reason.
class Appender {
 public:
  explicit Appender(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) throw InputError(path_ + ": cannot open for appending (" + std::strerror(errno) + ")");
  }
  ~Appender() {
    if (fd_ >= 0) ::close(fd_);
  }
  Appender(const Appender&) = delete;
  Appender& operator=(const Appender&) = delete;

  void write(const std::string& text) {
    for (size_t at = 0; at < text.size();) {
      const ssize_t n = ::write(fd_, text.data() + at, text.size() - at);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw InputError(path_ + ": write failed (" + std::strerror(n < 0 ? errno : EIO) + ")");
      at += static_cast<size_t>(n);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
};

// The records of an existing results.jsonl, after checking it belongs to this sweep, shard and build.
ResultsFile existing_results(const std::string& path, const SweepSpec& spec, const SweepRunOptions& o) {
  if (!o.resume) throw InputError(path + ": exists; pass --resume to continue that sweep, or choose another --out");
  ResultsFile f = parse_results(path);
  for (const SweepRecord& r : f.records) {
    if (r.spec_hash != spec.hash) {
      throw InputError(path + ": written by a sweep whose workload differs (spec hash " +
                       detail::hash_hex(r.spec_hash) + ", this one " + detail::hash_hex(spec.hash) +
                       "); --resume continues only the same sweep");
    }
    // A record is only exact for the code that computed it: the generator or a scheme may have
    // changed since, even when the workload did not.
    if (r.kvtune_version != KVTUNE_VERSION || r.git_commit != KVTUNE_GIT_COMMIT) {
      throw InputError(path + ": written by kvtune " + r.kvtune_version + " (commit " + r.git_commit +
                       "), this is " + KVTUNE_VERSION + " (commit " + KVTUNE_GIT_COMMIT +
                       "); its results may differ from this build's, so start a new --out");
    }
    if (r.shard != o.shard || r.shards != o.shards) {
      throw InputError(path + ": written by shard " + std::to_string(r.shard) + "/" + std::to_string(r.shards) +
                       ", not " + std::to_string(o.shard) + "/" + std::to_string(o.shards));
    }
  }
  return f;
}

}  // namespace

std::string record_to_json_line(const SweepRecord& r) {
  json j = {{"k", r.k}, {"v", r.v}, {"origin", r.origin}, {"status", r.ok ? "ok" : "error"},
            {"k_bits", r.k_bits}, {"v_bits", r.v_bits}, {"backend", r.backend}};
  if (!r.ok) j["error"] = r.error;
  j.update(metrics_json(r.metrics));
  if (!r.layers.empty()) j["layers"] = parts_json(r.layers, "layer", &LayerSummary::layer);
  if (!r.heads.empty()) j["heads"] = parts_json(r.heads, "kv_head", &HeadSummary::kv_head);
  if (!r.needle_depths.empty()) {
    json depths = json::array();
    for (const DepthSummary& d : r.needle_depths) {
      depths.push_back({{"depth", d.depth}, {"needle_hit", detail::summary_json<json>(d.needle_hit)}});
    }
    j["needle_depths"] = std::move(depths);
  }
  j["spec_hash"] = detail::hash_hex(r.spec_hash);
  j["kvtune_version"] = r.kvtune_version;
  j["git_commit"] = r.git_commit;
  j["host"] = r.host;
  j["time"] = r.time;
  j["shard"] = r.shard;
  j["shards"] = r.shards;
  return j.dump() + "\n";
}

std::vector<SweepRecord> read_records(const std::string& path) {
  ResultsFile f = parse_results(path);
  if (f.truncated) throw InputError(path + ": the last line is incomplete (an interrupted run; resume it first)");
  return std::move(f.records);
}

bool same_result(const SweepRecord& a, const SweepRecord& b) {
  auto same = [](const Summary& x, const Summary& y) {
    return x.count == y.count &&
           (x.count == 0 || (x.mean == y.mean && x.p95 == y.p95 && x.max == y.max && x.level == y.level &&
                             x.mean_ci.lo == y.mean_ci.lo && x.mean_ci.hi == y.mean_ci.hi &&
                             x.p95_ci.lo == y.p95_ci.lo && x.p95_ci.hi == y.p95_ci.hi));
  };
  if (a.ok != b.ok || a.error != b.error || a.k_bits != b.k_bits || a.v_bits != b.v_bits ||
      a.backend != b.backend)
    return false;
  auto same_metrics = [&](const std::array<Summary, kMetricCount>& x, const std::array<Summary, kMetricCount>& y) {
    for (size_t m = 0; m < kMetricCount; ++m) {
      if (!same(x[m], y[m])) return false;
    }
    return true;
  };
  auto same_parts = [&](const auto& x, const auto& y, auto id) {
    if (x.size() != y.size()) return false;
    for (size_t i = 0; i < x.size(); ++i) {
      if (x[i].*id != y[i].*id || !same_metrics(x[i].metrics, y[i].metrics)) return false;
    }
    return true;
  };
  if (!same_metrics(a.metrics, b.metrics) || !same_parts(a.layers, b.layers, &LayerSummary::layer) ||
      !same_parts(a.heads, b.heads, &HeadSummary::kv_head) || a.needle_depths.size() != b.needle_depths.size())
    return false;
  for (size_t i = 0; i < a.needle_depths.size(); ++i) {
    if (a.needle_depths[i].depth != b.needle_depths[i].depth ||
        !same(a.needle_depths[i].needle_hit, b.needle_depths[i].needle_hit))
      return false;
  }
  return true;
}

std::vector<SweepRecord> merge_records(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw InputError("merge: no result directories given");
  std::vector<SweepRecord> out;
  std::map<std::pair<std::string, std::string>, std::pair<size_t, std::string>> seen;  // -> record, its file
  std::string first_dir;
  for (const std::string& dir : dirs) {
    const std::string path = (fs::path(dir) / kResultsFile).string();
    for (SweepRecord& r : read_records(path)) {
      if (!out.empty()) {
        const SweepRecord& first = out.front();
        if (r.spec_hash != first.spec_hash) {
          throw InputError(path + ": written by spec " + detail::hash_hex(r.spec_hash) + " but " + first_dir +
                           " by spec " + detail::hash_hex(first.spec_hash) +
                           "; only shards of one sweep can be merged");
        }
        if (r.kvtune_version != first.kvtune_version || r.git_commit != first.git_commit) {
          throw InputError(path + ": written by kvtune " + r.kvtune_version + " (commit " + r.git_commit + ") but " +
                           first_dir + " by " + first.kvtune_version + " (commit " + first.git_commit +
                           "); shards must come from one build");
        }
        if (r.shards != first.shards) {
          throw InputError(path + ": written as shard " + std::to_string(r.shard) + " of " + std::to_string(r.shards) +
                           " but " + first_dir + " as shard " + std::to_string(first.shard) + " of " +
                           std::to_string(first.shards) + "; merge the shards of one --shard I/N split");
        }
      }
      if (first_dir.empty()) first_dir = dir;
      const auto [it, fresh] = seen.emplace(std::make_pair(r.k, r.v), std::make_pair(out.size(), path));
      if (fresh) {
        out.push_back(std::move(r));
      } else if (!same_result(out[it->second.first], r)) {
        throw InputError(path + ": holds another result for " + r.k + " / " + r.v + " than " + it->second.second +
                         "; two shards computed one point differently, so neither can be chosen");
      }
    }
  }
  return out;
}

std::vector<SweepRecord> run_sweep(const SweepSpec& spec, const SweepRunOptions& o) {
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw InputError("--shard " + std::to_string(o.shard) + "/" + std::to_string(o.shards) +
                     ": expected I/N with 0 <= I < N");
  }
  if (spec.pairing == Pairing::independent && o.shards > 1) {
    throw InputError(spec.source + ": pairing = \"independent\" pairs the per-role frontiers of the whole first "
                     "phase, so it cannot be sharded; use cartesian or matched with --shard");
  }
  const bool fresh_dir = !fs::exists(o.out_dir);
  create_sweep_dir(o.out_dir);
  const SweepDirLock lock(o.out_dir);
  const std::string path = (fs::path(o.out_dir) / kResultsFile).string();
  require_writable(path);

  // Everything is checked before anything is written: a refused run leaves the directory as it was.
  std::map<std::pair<std::string, std::string>, SweepRecord> done;
  std::optional<ResultsFile> previous;
  if (fs::exists(path)) previous = existing_results(path, spec, o);
  std::vector<fs::path> made;  // the files this run creates, removed again if its cases cannot be made
  for (const char* file : {kSweepSpecFile, kResolvedFile, kResultsFile}) {
    if (!fs::exists(fs::path(o.out_dir) / file)) made.push_back(fs::path(o.out_dir) / file);
  }
  write_sweep_inputs(o.out_dir, spec);
  if (previous) {
    for (SweepRecord& r : previous->records) done.emplace(std::make_pair(r.k, r.v), std::move(r));
    // Resume drops a line cut off mid-write.
    if (previous->truncated) {
      write_file_atomic(path, std::as_bytes(std::span(previous->good_text.data(), previous->good_text.size())));
    }
  }

  Appender out(path);
  const SweepRecord provenance = record_template(spec, o);
  CaseCache kept(scenario_cases(spec.scenario).size(), CaseCache::default_budget());
  std::vector<SweepRecord> records;

  // Evaluates the points not done yet in batches, appending each batch's records as it finishes.
  auto run_points = [&](const std::vector<SweepPoint>& points) {
    std::vector<SweepPoint> todo;
    for (const SweepPoint& p : points) {
      if (!done.count({p.k, p.v})) todo.push_back(p);
    }
    size_t finished = points.size() - todo.size();
    if (o.progress) o.progress(double(finished), points.size());
    const size_t batch = std::max<size_t>(1, o.batch_points);
    for (size_t at = 0; at < todo.size(); at += batch) {
      if (o.cancel != nullptr && o.cancel->load()) throw SweepInterrupted(done.size(), points.size(), path);
      const std::vector<SweepPoint> chunk(todo.begin() + static_cast<std::ptrdiff_t>(at),
                                          todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), at + batch)));
      std::string lines;
      std::function<void(double)> on_fraction;
      if (o.progress) {
        on_fraction = [&, base = double(finished)](double f) { o.progress(base + f * double(chunk.size()), points.size()); };
      }
      std::vector<SweepRecord> evaluated = evaluate_batch(spec, chunk, o, provenance, kept, on_fraction);
      for (const SweepRecord& r : evaluated) lines += record_to_json_line(r);
      out.write(lines);
      for (SweepRecord& r : evaluated) done.emplace(std::make_pair(r.k, r.v), std::move(r));
      finished += chunk.size();
      if (o.progress) o.progress(double(finished), points.size());
    }
    for (const SweepPoint& p : points) records.push_back(done.at({p.k, p.v}));
  };

  std::vector<SweepPoint> mine;
  for (size_t i = 0; i < spec.points.size(); ++i) {
    if (static_cast<int64_t>(i % static_cast<size_t>(o.shards)) == o.shard) mine.push_back(spec.points[i]);
  }
  try {
    run_points(mine);
  } catch (const CaseInputError&) {
    // Refused before any point was evaluated: a new run leaves nothing behind (a resumed one keeps its
    // records, and a file that was there before, such as the sweep file itself, stays).
    if (!previous) {
      std::error_code ignored;
      for (const fs::path& file : made) fs::remove(file, ignored);
      if (fresh_dir) fs::remove(o.out_dir, ignored);
    }
    throw;
  }

  if (spec.pairing == Pairing::independent) {  // phase 2: every pair of the per-role frontiers
    std::vector<SweepRecord> k_role, v_role;
    for (const SweepRecord& r : records) {
      if (r.origin != "search") continue;
      if (r.v == "none") k_role.push_back(r);
      if (r.k == "none") v_role.push_back(r);
    }
    const std::vector<size_t> k_front = pareto_frontier(k_role, [](const SweepRecord& r) { return r.k_bits; });
    const std::vector<size_t> v_front = pareto_frontier(v_role, [](const SweepRecord& r) { return r.v_bits; });
    std::vector<SweepPoint> pairs;
    std::set<std::pair<std::string, std::string>> have;
    for (const SweepPoint& p : spec.points) have.insert({p.k, p.v});
    for (size_t k : k_front) {
      for (size_t v : v_front) {
        const std::string& ks = k_role[k].k;
        const std::string& vs = v_role[v].v;
        if (have.insert({ks, vs}).second) pairs.push_back({ks, vs, "search", spec.scheme(ks), spec.scheme(vs)});
      }
    }
    run_points(pairs);
  }
  return records;
}

}  // namespace kvtune
