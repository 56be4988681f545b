// Cache policy: what a runtime does around the quantizer, for K and V independently (DESIGN §4).
// A policy is written in a scheme spec with reserved keys that every family accepts, e.g.
//   q4_0:rotation=hadamard                 llama.cpp's default rotation (group from role, head_dim)
//   int:bits=4,axis=token,rotation=hadamard,rotation_group=64
//   int:bits=4,axis=token,rotation=random,rotation_seed=7   a Haar random rotation of head_dim
//   tokenint:bits=4,zero=int,rotation=rht   vLLM's randomized Hadamard transform of the whole head
//   int:bits=2,axis=channel,group=32,asym,sink_tokens=4,residual_window=128,block_tokens=32
//   q4_0:pair_order=adjacent               keys stored as llama.cpp stores a Llama model's: each RoPE
//                                          pair (i, i + D/2) in channels 2i, 2i + 1
// Token layout of a policy block of T tokens: [sinks | full append blocks | partial block + window];
// sinks, the partial block (an append-only cache quantizes a block only once it fills) and the
// window are stored as f16, each full block is quantized by the inner scheme on its own.
// and the registry wraps the family's scheme in a policy scheme, so the evaluator, sweeps and
// footprints see one Scheme either way.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kvtune/scheme.h"

namespace kvtune {

enum class Rotation { none, hadamard, random, rht };

struct CachePolicy {
  Rotation rotation = Rotation::none;
  int64_t rotation_group = 0;  // channels per Hadamard group; 0 = llama.cpp's choice for the role
  uint64_t rotation_seed = 0;  // rotation=random: the seed of the Haar matrix (one per model, not per case)
                               // (rotation=rht has vLLM's fixed signs: neither a group nor a seed)
  int64_t sink_tokens = 0;     // first tokens kept exact (stored f16)
  int64_t residual_window = 0; // most recent tokens kept exact (stored f16)
  int64_t block_tokens = 0;    // append-block size; 0 = the quantized span is one block
  bool pre_rope = false;       // rope_stage=pre: keys are quantized before RoPE, re-rotated after
  bool adjacent_pairs = false; // pair_order=adjacent: keys' RoPE pairs stored in neighbouring channels

  bool rotates() const { return rotation != Rotation::none; }
  bool splits_tokens() const { return sink_tokens > 0 || residual_window > 0 || block_tokens > 0; }
  bool is_identity() const { return !rotates() && !splits_tokens() && !pre_rope && !adjacent_pairs; }
};

// The reserved policy keys with their domains (listed by `kvtune schemes`).
const std::vector<ParamDomain>& policy_domains();

// A policy key that only means something with another key's value: rotation_group needs
// rotation=hadamard, rotation_seed needs rotation=random (rotation=rht takes neither). nullopt:
// the key stands alone.
std::optional<std::pair<std::string, std::string>> policy_key_requirement(std::string_view key);

// Reads the policy from validated key=value pairs (keys from policy_domains()).
CachePolicy policy_from_values(const std::vector<std::pair<std::string, std::string>>& values);

// ",rotation=hadamard,rotation_group=64,pair_order=adjacent,sink_tokens=4" (empty for the identity policy), appended
// to the inner scheme's canonical spec.
std::string policy_spec(const CachePolicy& policy);

// The inner scheme with the policy around it (the inner scheme itself for the identity policy):
// the token split outermost (rope_stage=pre undoes RoPE in the model's own channel order), then the
// pair order, then the rotation (a runtime rotates the keys as it stores them), then the format.
SchemePtr apply_policy(SchemePtr inner, const CachePolicy& policy);

// pair_order=adjacent's channel order: out[2i] = x[i], out[2i + 1] = x[i + D/2] for a row of even
// D (Hugging Face's rotate_half pairs to llama.cpp's adjacent ones); to_pairs = false goes back.
void reorder_pairs(const float* x, float* out, int64_t head_dim, bool to_pairs);

// llama.cpp's rotation group (llama-kv-cache.cpp, April 2026): K uses the largest power of two
// >= 64 that divides head_dim, V uses 64; 0 when head_dim admits none (no rotation).
int64_t llama_cpp_rotation_group(Role role, int64_t head_dim);

}  // namespace kvtune
