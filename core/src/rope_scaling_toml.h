// A rope_scaling table in TOML (a model preset's [rope_scaling], a workload's
// [workload.rope.scaling]) with the keys of a Hugging Face config.json: rope_type "linear" or
// "llama3" ("default": none), factor, and for llama3 low_freq_factor, high_freq_factor and
// original_max_position_embeddings, each required (a model states its own). Internal.
#pragma once

#include <cstdint>
#include <string>

#include "kvtune/rope.h"
#include "toml_reader.h"

namespace kvtune::detail {

inline RopeScaling read_rope_scaling(TableReader r) {
  RopeScaling s;
  const std::string type = r.required_choice("rope_type", {"default", "linear", "llama3"});
  if (type == "default") {  // plain RoPE: what a workload writes to drop its preset's scaling
    r.finish();
    return s;
  }
  s.type = type == "llama3" ? RopeScalingType::llama3 : RopeScalingType::linear;
  s.factor = r.required_real("factor", 1.0, 1e6);
  if (s.type == RopeScalingType::llama3) {
    s.low_freq_factor = r.required_real("low_freq_factor", 1e-6, 1e6);
    s.high_freq_factor = r.required_real("high_freq_factor", 1e-6, 1e6);
    s.original_max_position = double(r.required_integer("original_max_position_embeddings", 1, int64_t(1) << 40));
    if (const std::string why = rope_scaling_problem(s); !why.empty()) r.fail(*r.node("high_freq_factor"), why);
  }
  r.finish();
  return s;
}

}  // namespace kvtune::detail
