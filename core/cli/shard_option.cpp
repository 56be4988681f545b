#include "shard_option.h"

#include <charconv>
#include <optional>
#include <string_view>

#include "kvtune/error.h"

namespace kvtune::cli {
namespace {

std::optional<int64_t> whole_number(std::string_view text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return v;
}

int64_t env_number(const EnvLookup& env, const char* name, const std::string& context) {
  const char* value = env(name);
  const std::optional<int64_t> v = value ? whole_number(value) : std::nullopt;
  if (!v || *v < 0) {
    throw InputError("--shard " + context + ": " + name + (value ? " = '" + std::string(value) + "' is not a whole number"
                                                                 : " is not set"));
  }
  return *v;
}

// A Slurm job array (https://slurm.schedmd.com/job_array.html: every task of `sbatch --array=A-B`
// has SLURM_ARRAY_TASK_ID, _MIN, _MAX and _COUNT). Shard = ID - MIN of COUNT, which needs the
// indices to be one unbroken range: a step (--array=0-7:2) or a list (1,3,7) leaves gaps.
Shard from_slurm(const EnvLookup& env, const std::string& text) {
  const int64_t id = env_number(env, "SLURM_ARRAY_TASK_ID", text);
  const int64_t min = env_number(env, "SLURM_ARRAY_TASK_MIN", text);
  const int64_t max = env_number(env, "SLURM_ARRAY_TASK_MAX", text);
  const int64_t count = env_number(env, "SLURM_ARRAY_TASK_COUNT", text);
  if (count < 1) throw InputError("--shard " + text + ": SLURM_ARRAY_TASK_COUNT = 0 is not a number of tasks");
  // Slurm sets the step as well; one other than 1 leaves gaps between the indices.
  if (env("SLURM_ARRAY_TASK_STEP") != nullptr) {
    const int64_t step = env_number(env, "SLURM_ARRAY_TASK_STEP", text);
    if (step != 1) {
      throw InputError("--shard " + text + ": the Slurm job array steps by " + std::to_string(step) +
                       " (SLURM_ARRAY_TASK_STEP); submit it as --array=0-" + std::to_string(count - 1) +
                       " (no step, no list)");
    }
  }
  if (max - min + 1 != count || id < min || id > max) {
    throw InputError("--shard " + text + ": the Slurm job array's indices " + std::to_string(min) + ".." +
                     std::to_string(max) + " are not one unbroken range of " + std::to_string(count) +
                     " tasks; submit it as --array=0-" + std::to_string(count - 1) + " (no step, no list)");
  }
  return {id - min, count};
}

}  // namespace

Shard resolve_shard(const std::string& text, const EnvLookup& env) {
  const size_t slash = text.find('/');
  const std::string head = text.substr(0, slash);
  const std::string usage = "--shard '" + text + "': expected I/N with 0 <= I < N (e.g. 0/4), auto or auto/N";
  int64_t given = 0;  // N after the slash; 0: none
  if (slash != std::string::npos) {
    given = whole_number(std::string_view(text).substr(slash + 1)).value_or(0);
    if (given < 1) throw InputError(usage);
  }
  if (head != "auto") {
    const int64_t i = whole_number(head).value_or(-1);
    if (given == 0 || i < 0 || i >= given) throw InputError(usage);
    return {i, given};
  }
  if (env("SLURM_ARRAY_TASK_ID") != nullptr) {
    const Shard s = from_slurm(env, text);
    if (given != 0 && given != s.count) {
      throw InputError("--shard " + text + ": the Slurm job array has " + std::to_string(s.count) + " tasks, not " +
                       std::to_string(given));
    }
    return s;
  }
  // A Kubernetes Indexed Job (https://kubernetes.io/docs/concepts/workloads/controllers/job/#completion-mode):
  // each pod has JOB_COMPLETION_INDEX; the job's completion count is not in the pod's environment,
  // so it comes from auto/N or KVTUNE_SHARDS.
  if (env("JOB_COMPLETION_INDEX") != nullptr) {
    const int64_t index = env_number(env, "JOB_COMPLETION_INDEX", text);
    if (given == 0 && env("KVTUNE_SHARDS") == nullptr) {
      throw InputError("--shard auto: a Kubernetes Indexed Job gives the index (JOB_COMPLETION_INDEX) but not the "
                       "count; pass --shard auto/N with N = the job's completions, or set KVTUNE_SHARDS");
    }
    const char* shards_env = env("KVTUNE_SHARDS");
    const std::optional<int64_t> shards_set = shards_env ? whole_number(shards_env) : std::nullopt;
    if (given != 0 && shards_set && *shards_set != given) {
      throw InputError("--shard " + text + ": KVTUNE_SHARDS = " + env("KVTUNE_SHARDS") + " disagrees with the " +
                       std::to_string(given) + " shards of --shard; give the count once, or the same in both");
    }
    const int64_t count = given != 0 ? given : env_number(env, "KVTUNE_SHARDS", text);
    if (count < 1 || index >= count) {
      throw InputError("--shard " + text + ": JOB_COMPLETION_INDEX = " + std::to_string(index) +
                       " is not below the shard count " + std::to_string(count));
    }
    return {index, count};
  }
  throw InputError("--shard " + text + ": neither SLURM_ARRAY_TASK_ID (a Slurm job array, sbatch --array) nor "
                   "JOB_COMPLETION_INDEX (a Kubernetes Indexed Job) is set; outside them give --shard I/N");
}

}  // namespace kvtune::cli
