// Rotary position embedding. Channel pairs are rotated by pos * theta^(-2i/D): rotate_half pairs
// channel i with i + D/2 (Llama, Qwen, Mistral in Hugging Face form), interleaved pairs 2i with
// 2i + 1 (GPT-J, the original RoFormer, llama.cpp's "normal" mode).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "kvtune/matrix.h"

namespace kvtune {

enum class RopeConvention { rotate_half, interleaved };

struct RopeConfig {
  bool enabled = false;
  double theta = 10000.0;  // the RoFormer paper's base (Su et al. 2021), also Llama 1/2's rope_theta
  RopeConvention convention = RopeConvention::rotate_half;
};

// Rotates row r of x by positions[r] (inverse rotates back). head_dim must be even.
void apply_rope(MatrixView x, std::span<const int64_t> positions, const RopeConfig& rope, bool inverse = false);

}  // namespace kvtune
