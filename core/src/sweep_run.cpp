#include "kvtune/sweep_run.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "kvtune/error.h"
#include "kvtune/evaluator.h"
#include "kvtune/file_io.h"
#include "kvtune/version.h"

namespace kvtune {
namespace fs = std::filesystem;
namespace {

using json = nlohmann::json;

constexpr const char* kResultsFile = "results.jsonl";

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

// 16 hex digits, as summary.json spells the spec hash.
std::string hex(uint64_t v) {
  std::ostringstream s;
  s << std::hex << std::setw(16) << std::setfill('0') << v;
  return s.str();
}

json summary_json(const Summary& s) {
  if (s.count == 0) return nullptr;
  return {{"mean", s.mean}, {"p95", s.p95}, {"max", s.max}, {"count", s.count}};
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

SweepRecord record_from_json(const json& j, const std::string& where) {
  SweepRecord r;
  r.k = field<std::string>(j, "k", where);
  r.v = field<std::string>(j, "v", where);
  r.origin = field<std::string>(j, "origin", where);
  r.ok = field<std::string>(j, "status", where) == "ok";
  if (!r.ok) r.error = field<std::string>(j, "error", where);
  r.k_bits = field<double>(j, "k_bits", where);
  r.v_bits = field<double>(j, "v_bits", where);
  for (size_t m = 0; m < kMetricCount; ++m) {
    const std::string name(kMetricNames[m]);
    const auto it = j.find(name);
    if (it == j.end()) throw InputError(where + ": missing metric '" + name + "'");
    if (it->is_null()) continue;
    r.metrics[m] = {field<double>(*it, "mean", where), field<double>(*it, "p95", where),
                    field<double>(*it, "max", where), field<size_t>(*it, "count", where)};
  }
  r.spec_hash = std::stoull(field<std::string>(j, "spec_hash", where), nullptr, 16);
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
    } catch (const json::parse_error& e) {
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

SweepRecord failed(const SweepPoint& p, const std::string& why, const SweepRecord& provenance) {
  SweepRecord r = provenance;
  r.k = p.k;
  r.v = p.v;
  r.origin = p.origin;
  r.ok = false;
  r.error = why;
  return r;
}

// One separable evaluation of `points` over every case of the spec.
std::vector<SweepRecord> evaluate_points(const SweepSpec& spec, const Registry& registry,
                                         const std::vector<SweepPoint>& points, const SweepRunOptions& o,
                                         const SweepRecord& provenance) {
  std::vector<PairRequest> requests;
  for (const SweepPoint& p : points) requests.push_back({p.k + " / " + p.v, p.k, p.v, p.origin});
  EvalPlan plan = build_plan(requests, registry, spec.scenario.topk);
  plan.backend = o.backend;
  const WorkloadConfig cfg = workload_at(spec.scenario, spec.scenario.contexts.front());
  const std::vector<CaseKey> cases = scenario_cases(spec.scenario);
  const EvalResult result = evaluate(
      plan, cases.size(), [&](size_t i) { return generate_case(cfg, cases[i].seed, cases[i].layer, cases[i].kv_head); },
      o.threads);
  std::vector<SweepRecord> out;
  for (size_t i = 0; i < points.size(); ++i) {
    SweepRecord r = provenance;
    r.k = points[i].k;
    r.v = points[i].v;
    r.origin = points[i].origin;
    r.k_bits = result.pairs[i].k_bits;
    r.v_bits = result.pairs[i].v_bits;
    for (size_t m = 0; m < kMetricCount; ++m) r.metrics[m] = summarize(result.pairs[i].samples[m]);
    out.push_back(std::move(r));
  }
  return out;
}

// A batch that fails is evaluated point by point, so only the points whose scheme fails become
// failed records and the sweep goes on.
std::vector<SweepRecord> evaluate_batch(const SweepSpec& spec, const Registry& registry,
                                        const std::vector<SweepPoint>& points, const SweepRunOptions& o,
                                        const SweepRecord& provenance) {
  try {
    return evaluate_points(spec, registry, points, o, provenance);
  } catch (const std::exception&) {
    if (points.size() == 1) throw;
  }
  std::vector<SweepRecord> out;
  for (const SweepPoint& p : points) {
    try {
      out.push_back(evaluate_points(spec, registry, {p}, o, provenance).front());
    } catch (const std::exception& e) {
      out.push_back(failed(p, e.what(), provenance));
    }
  }
  return out;
}

// Pareto-optimal records on (bits of `role`, rel_out_err), for the independent pairing's phase 2.
std::vector<std::string> role_frontier(const std::vector<SweepRecord>& records, bool keys) {
  std::vector<const SweepRecord*> role;
  for (const SweepRecord& r : records) {
    if (r.ok && r.origin == "search" && (keys ? r.v == "none" : r.k == "none")) role.push_back(&r);
  }
  std::vector<std::string> out;
  for (const SweepRecord* a : role) {
    const double abits = keys ? a->k_bits : a->v_bits, aerr = a->metric(Metric::rel_out_err).mean;
    const bool dominated = std::any_of(role.begin(), role.end(), [&](const SweepRecord* b) {
      const double bbits = keys ? b->k_bits : b->v_bits, berr = b->metric(Metric::rel_out_err).mean;
      return bbits <= abits && berr <= aerr && (bbits < abits || berr < aerr);
    });
    if (!dominated) out.push_back(keys ? a->k : a->v);
  }
  return out;
}

}  // namespace

std::string record_to_json_line(const SweepRecord& r) {
  json j = {{"k", r.k}, {"v", r.v}, {"origin", r.origin}, {"status", r.ok ? "ok" : "error"},
            {"k_bits", r.k_bits}, {"v_bits", r.v_bits}};
  if (!r.ok) j["error"] = r.error;
  for (size_t m = 0; m < kMetricCount; ++m) j[std::string(kMetricNames[m])] = summary_json(r.metrics[m]);
  j["spec_hash"] = hex(r.spec_hash);
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

std::vector<SweepRecord> merge_records(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw InputError("merge: no result directories given");
  std::vector<SweepRecord> out;
  std::set<std::pair<std::string, std::string>> seen;
  std::string first_dir;
  for (const std::string& dir : dirs) {
    const std::string path = (fs::path(dir) / kResultsFile).string();
    for (SweepRecord& r : read_records(path)) {
      if (!out.empty() && r.spec_hash != out.front().spec_hash) {
        throw InputError(path + ": written by spec " + hex(r.spec_hash) + " but " + first_dir + " by spec " +
                         hex(out.front().spec_hash) + "; only shards of one sweep can be merged");
      }
      if (!out.empty() && (r.kvtune_version != out.front().kvtune_version || r.git_commit != out.front().git_commit)) {
        throw InputError(path + ": written by kvtune " + r.kvtune_version + " (commit " + r.git_commit + ") but " +
                         first_dir + " by " + out.front().kvtune_version + " (commit " + out.front().git_commit +
                         "); shards must come from one build");
      }
      if (first_dir.empty()) first_dir = dir;
      if (seen.insert({r.k, r.v}).second) out.push_back(std::move(r));
    }
  }
  return out;
}

std::vector<SweepRecord> run_sweep(const SweepSpec& spec, const Registry& registry, const SweepRunOptions& o) {
  if (o.shards < 1 || o.shard < 0 || o.shard >= o.shards) {
    throw InputError("--shard " + std::to_string(o.shard) + "/" + std::to_string(o.shards) +
                     ": expected I/N with 0 <= I < N");
  }
  if (spec.pairing == Pairing::independent && o.shards > 1) {
    throw InputError(spec.source + ": pairing = \"independent\" pairs the per-role frontiers of the whole first "
                     "phase, so it cannot be sharded; use cartesian or matched with --shard");
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec || !fs::is_directory(o.out_dir)) throw InputError(o.out_dir + ": cannot create the output directory (" + ec.message() + ")");
  const std::string path = (fs::path(o.out_dir) / kResultsFile).string();
  require_writable(path);

  // Resume: keep what is there (after checking it is this sweep's), drop a line cut off mid-write.
  std::map<std::pair<std::string, std::string>, SweepRecord> done;
  if (fs::exists(path)) {
    if (!o.resume) throw InputError(path + ": exists; pass --resume to continue that sweep, or choose another --out");
    ResultsFile f = parse_results(path);
    for (SweepRecord& r : f.records) {
      if (r.spec_hash != spec.hash) {
        throw InputError(path + ": written by a sweep whose workload differs (spec hash " + hex(r.spec_hash) +
                         ", this one " + hex(spec.hash) + "); --resume continues only the same sweep");
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
      done.emplace(std::make_pair(r.k, r.v), std::move(r));
    }
    if (f.truncated) {
      write_file_atomic(path, std::as_bytes(std::span(f.good_text.data(), f.good_text.size())));
    }
  }

  std::ofstream out(path, std::ios::app);
  if (!out) throw InputError(path + ": cannot open for appending");
  const SweepRecord provenance = record_template(spec, o);
  std::vector<SweepRecord> records;

  // Evaluates the points not done yet in batches, appending each batch's records as it finishes.
  auto run_points = [&](const std::vector<SweepPoint>& points) {
    std::vector<SweepPoint> todo;
    for (const SweepPoint& p : points) {
      if (!done.count({p.k, p.v})) todo.push_back(p);
    }
    size_t finished = points.size() - todo.size();
    if (o.progress) o.progress(finished, points.size());
    const size_t batch = std::max<size_t>(1, o.batch_points);
    for (size_t at = 0; at < todo.size(); at += batch) {
      const std::vector<SweepPoint> chunk(todo.begin() + static_cast<std::ptrdiff_t>(at),
                                          todo.begin() + static_cast<std::ptrdiff_t>(std::min(todo.size(), at + batch)));
      for (SweepRecord& r : evaluate_batch(spec, registry, chunk, o, provenance)) {
        out << record_to_json_line(r);
        done.emplace(std::make_pair(r.k, r.v), std::move(r));
      }
      out.flush();
      if (!out) throw InputError(path + ": write failed");
      finished += chunk.size();
      if (o.progress) o.progress(finished, points.size());
    }
    for (const SweepPoint& p : points) records.push_back(done.at({p.k, p.v}));
  };

  std::vector<SweepPoint> mine;
  for (size_t i = 0; i < spec.points.size(); ++i) {
    if (static_cast<int64_t>(i % static_cast<size_t>(o.shards)) == o.shard) mine.push_back(spec.points[i]);
  }
  run_points(mine);

  if (spec.pairing == Pairing::independent) {  // phase 2: every pair of the per-role frontiers
    std::vector<SweepPoint> pairs;
    std::set<std::pair<std::string, std::string>> have;
    for (const SweepPoint& p : spec.points) have.insert({p.k, p.v});
    for (const std::string& k : role_frontier(records, true)) {
      for (const std::string& v : role_frontier(records, false)) {
        if (have.insert({k, v}).second) pairs.push_back({k, v, "search"});
      }
    }
    run_points(pairs);
  }
  return records;
}

}  // namespace kvtune
