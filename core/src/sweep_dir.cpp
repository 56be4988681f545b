#include "kvtune/sweep_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "kvtune/error.h"
#include "kvtune/file_io.h"
#include "sweep_json.h"

namespace kvtune {
namespace fs = std::filesystem;
namespace {

void write_text(const fs::path& path, const std::string& text) {
  write_file_atomic(path.string(), std::as_bytes(std::span(text.data(), text.size())));
}

std::string read_text(const std::string& path) {
  const std::vector<std::byte> bytes = read_file(path);
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

// The plugins a sweep loaded, as resolved.json records them (absolute paths).
std::vector<std::string> recorded_plugins(const std::string& dir) {
  const std::string path = (fs::path(dir) / kResolvedFile).string();
  try {
    const nlohmann::json resolved = nlohmann::json::parse(read_text(path));
    return resolved.value("plugins", std::vector<std::string>{});
  } catch (const nlohmann::json::exception& e) {
    throw InputError(path + ": not the resolved.json kvtune sweep writes (" + e.what() + ")");
  }
}

bool same_directory(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path pa = fs::weakly_canonical(a, ea), pb = fs::weakly_canonical(b, eb);
  return !ea && !eb && pa == pb;
}

}  // namespace

SweepDirLock::SweepDirLock(const std::string& dir) {
  // The directory itself is locked, so a lock leaves no file behind.
  fd_ = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd_ < 0) throw InputError(dir + ": cannot open the output directory (" + std::strerror(errno) + ")");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK) {
      throw InputError(dir + ": another kvtune run is using this directory; wait for it to finish or choose "
                             "another --out");
    }
    throw InputError(dir + ": cannot lock the output directory (" + std::strerror(err) + ")");
  }
}

SweepDirLock::~SweepDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the lock
}

void create_sweep_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw InputError(dir + ": cannot create the output directory (" + (ec ? ec.message() : "not a directory") + ")");
  }
}

std::string resolved_json(const SweepSpec& spec) {
  nlohmann::json points = nlohmann::json::array();
  for (const SweepPoint& p : spec.points) points.push_back({{"k", p.k}, {"v", p.v}, {"origin", p.origin}});
  nlohmann::json runtimes = nlohmann::json::array();
  for (size_t i = 0; i < spec.runtimes.size() && i < spec.runtime_views.size(); ++i) {
    const RuntimeView& view = spec.runtime_views[i];
    runtimes.push_back({{"name", spec.runtimes[i].name},
                        {"version", view.version},
                        {"title", view.title},
                        {"beyond_checked", view.beyond_checked},
                        {"options", view.options.size()}});
  }
  const nlohmann::ordered_json j = {{"name", spec.name},
                            {"source", spec.source},
                            {"pairing", pairing_name(spec.pairing)},
                            {"objective", objective_name(spec.budget.objective)},
                            {"tokens", spec.scenario.contexts.empty() ? 0 : spec.scenario.contexts.front()},
                            {"k_candidates", spec.k_candidates},
                            {"v_candidates", spec.v_candidates},
                            {"points", std::move(points)},
                            {"runtimes", std::move(runtimes)},
                            {"plugins", spec.plugins},
                            {"notes", detail::notes_json(spec.notes)}};
  return j.dump(2) + "\n";
}

void write_sweep_inputs(const std::string& dir, const SweepSpec& spec) {
  write_text(fs::path(dir) / kSweepSpecFile, spec.text);
  write_text(fs::path(dir) / kResolvedFile, resolved_json(spec));
}

SweepSpec load_sweep_dir(const std::string& dir, const SweepContext& context) {
  const std::string path = (fs::path(dir) / kSweepSpecFile).string();
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(dir + ": no such directory (expected a kvtune sweep's --out)");
  for (const char* file : {kSweepSpecFile, kResolvedFile, kResultsFile}) {
    if (!fs::exists(fs::path(dir) / file, ec)) {
      throw InputError(dir + ": not a kvtune sweep's output directory (it has no " + file +
                       "; kvtune sweep --out writes sweep.toml, resolved.json and results.jsonl)");
    }
  }
  SweepOverrides o;
  o.plugins = recorded_plugins(dir);
  return parse_sweep(read_text(path), path, context, o);
}

MergedSweep load_sweep_results(const std::vector<std::string>& dirs, const SweepContext& context) {
  if (dirs.empty()) throw InputError("merge: no result directories given");
  MergedSweep merged;
  merged.spec = load_sweep_dir(dirs.front(), context);
  const SweepSpec& spec = merged.spec;
  const std::vector<SweepRecord> all = merge_records(dirs);
  if (!all.empty() && all.front().spec_hash != spec.hash) {
    throw InputError((fs::path(dirs.front()) / kSweepSpecFile).string() +
                     ": this sweep's workload is not the one its results were computed for (spec hash differs); "
                     "merge the shards of one sweep");
  }
  // Every point of the spec needs a record: a missing shard is an error, not a smaller sweep.
  std::map<std::pair<std::string, std::string>, size_t> at;
  for (size_t i = 0; i < all.size(); ++i) at.emplace(std::make_pair(all[i].k, all[i].v), i);
  std::vector<std::string> missing;
  for (const SweepPoint& p : spec.points) {
    const auto it = at.find({p.k, p.v});
    if (it == at.end()) {
      missing.push_back(p.k + " / " + p.v);
    } else {
      merged.records.push_back(all[it->second]);
    }
  }
  if (!missing.empty()) {
    const int64_t shards = all.empty() ? 1 : all.front().shards;
    std::string where;  // no command name: `report` and `merge` both read results this way
    for (const std::string& dir : dirs) where += (where.empty() ? "" : ", ") + dir;
    throw InputError(where + ": " + std::to_string(missing.size()) + " of " + std::to_string(spec.points.size()) +
                     " points have no record in the given directories (a missing shard?): the sweep was split into " +
                     std::to_string(shards) + " shards and " + std::to_string(dirs.size()) +
                     " directories were given (or a shard is unfinished, or the points changed since the run, as a "
                     "newer kvtune's runtime tables change them: run the sweep again), e.g. " + missing.front());
  }
  return merged;
}

MergedSweep merge_sweep(const std::vector<std::string>& dirs, const std::string& out, const SweepContext& context) {
  for (const std::string& dir : dirs) {
    if (same_directory(dir, out)) {
      throw InputError("merge: --out " + out + " is one of the inputs; merged results go to a directory of their own");
    }
  }
  MergedSweep merged = load_sweep_results(dirs, context);
  // Merging again into the same --out replaces that merge; another sweep's results are not overwritten.
  const std::string previous = (fs::path(out) / kResultsFile).string();
  if (fs::exists(previous)) {
    for (const SweepRecord& r : read_records(previous)) {
      if (r.spec_hash != merged.spec.hash) {
        throw InputError("merge: --out " + out + " holds the results of another sweep (" + previous +
                         " has another workload); merge into a new directory");
      }
    }
  }
  create_sweep_dir(out);
  const SweepDirLock lock(out);
  std::string lines;
  for (const SweepRecord& r : merged.records) lines += record_to_json_line(r);
  write_sweep_inputs(out, merged.spec);
  write_text(fs::path(out) / kResultsFile, lines);
  return merged;
}

}  // namespace kvtune
