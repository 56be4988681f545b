// JSON forms shared by the files a sweep writes (resolved.json, summary.json): the structured
// records, never their rendered words. Internal: nlohmann_json stays out of the public headers.
#pragma once

#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "kvtune/sweep.h"

namespace kvtune::detail {

// A spec hash as the sweep's files spell it (summary.json, results.jsonl): 16 hex digits.
inline std::string hash_hex(uint64_t hash) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, hash);
  return buf;
}

inline nlohmann::ordered_json note_json(const SweepNote& n) {
  nlohmann::ordered_json j = {{"kind", note_kind_name(n.kind)}};
  switch (n.kind) {
    case SweepNote::Kind::grid_dropped:
      j["grid"] = n.where;
      j["dropped"] = n.dropped;
      break;
    case SweepNote::Kind::list_dropped:
      j["search"] = n.where;
      j["dropped"] = n.dropped;
      break;
    case SweepNote::Kind::constraints_dropped:
      j["dropped"] = n.dropped;
      j["of"] = n.of;
      j["k_bits_at_least_v_bits"] = n.by_order;
      j["max_pair_bits"] = n.by_sum;
      j["exclude"] = n.by_exclude;
      break;
    case SweepNote::Kind::option_dropped:
      j["runtime"] = n.where;
      j["option"] = n.option;
      break;
  }
  j["reasons"] = n.reasons;
  return j;
}

inline nlohmann::ordered_json notes_json(const std::vector<SweepNote>& notes) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const SweepNote& n : notes) out.push_back(note_json(n));
  return out;
}

}  // namespace kvtune::detail
