// --shard: "I/N" given by hand, or "auto" / "auto/N" taken from the batch system's environment
// (docs/scale-out.md): a Slurm job array or a Kubernetes Indexed Job.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace kvtune::cli {

struct Shard {
  int64_t index = 0, count = 1;
};

// Reads an environment variable; null when unset (std::getenv in the CLI, a map in tests).
using EnvLookup = std::function<const char*(const char* name)>;

// Throws InputError naming --shard and what was expected or missing.
Shard resolve_shard(const std::string& text, const EnvLookup& env);

}  // namespace kvtune::cli
