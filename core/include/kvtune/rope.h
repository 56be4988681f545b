// Rotary position embedding. Channel pairs are rotated by pos * theta^(-2i/D): rotate_half pairs
// channel i with i + D/2 (Llama, Qwen, Mistral in Hugging Face form), interleaved pairs 2i with
// 2i + 1 (GPT-J, the original RoFormer, llama.cpp's "normal" mode).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kvtune/matrix.h"

namespace kvtune {

enum class RopeConvention { rotate_half, interleaved };

// A config's rope_scaling: how the model changes plain RoPE's inverse frequencies before any angle
// is taken (transformers src/transformers/modeling_rope_utils.py, _compute_linear_scaling_rope_parameters
// and _compute_llama3_parameters; llama.cpp stores llama3's as the rope_freqs tensor its converter
// computes the same way). Types whose angles need more than new frequencies (yarn's and longrope's
// attention factor, dynamic NTK's dependence on the length) are not modelled.
enum class RopeScalingType { none, linear, llama3 };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  double factor = 1.0;                 // linear: every frequency / factor; llama3: the low ones
  double low_freq_factor = 1.0;        // llama3: wavelengths above original / low_freq_factor are divided
  double high_freq_factor = 4.0;       // llama3: wavelengths below original / high_freq_factor are kept
  double original_max_position = 0.0;  // llama3: original_max_position_embeddings
  bool operator==(const RopeScaling&) const = default;
};

struct RopeConfig {
  bool enabled = false;
  double theta = 10000.0;  // the RoFormer paper's base (Su et al. 2021), also Llama 1/2's rope_theta
  RopeConvention convention = RopeConvention::rotate_half;
  RopeScaling scaling;
};

// The rope_scaling names kvtune reproduces ("linear", "llama3"; "default" is none).
const char* rope_scaling_name(RopeScalingType type);
// Why these parameters are not a valid scaling of their type (a factor below 1, llama3's
// high_freq_factor not above low_freq_factor, ...); empty when they are.
std::string rope_scaling_problem(const RopeScaling& scaling);

// Pair i's inverse frequency, i < head_dim / 2: theta^(-2i / head_dim), then the scaling.
std::vector<double> rope_inverse_frequencies(const RopeConfig& rope, int64_t head_dim);

// Rotates row r of x by positions[r] (inverse rotates back). head_dim must be even.
void apply_rope(MatrixView x, std::span<const int64_t> positions, const RopeConfig& rope, bool inverse = false);

}  // namespace kvtune
