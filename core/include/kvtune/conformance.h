// The scheme conformance checks (STYLE.md "Testing"), as a library: the in-tree GoogleTest suite
// (tests/conformance) and `kvtune check-plugin` run the same code on built-in and plugin schemes.
// Each check returns an empty string when it passes, else what went wrong.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "kvtune/matrix.h"
#include "kvtune/registry.h"

namespace kvtune::conformance {

struct Shape {
  int64_t tokens, head_dim;
};

// Single token, odd lengths, a partial last group and a typical head.
const std::vector<Shape>& shapes();

// The shapes of shapes() that `scheme` accepts (check_shape).
std::vector<Shape> accepted_shapes(const Scheme& scheme);

// Normal data (fixed seed) with two ×20 outlier channels and a +4 offset channel, as keys have.
Matrix keys_like(Shape shape, uint64_t seed);

struct Check {
  const char* name;  // snake_case, printed by check-plugin
  std::string (*run)(const Scheme& scheme, const Registry& registry);
};

// Every check, in the order check-plugin prints them:
//   accepts_a_shape, canonical_spec_round_trips, roundtrip_equals_dequantize_of_quantize,
//   value_role_roundtrip_equals_dequantize_of_quantize, footprint_equals_packed_size,
//   deterministic, zero_block_stays_zero, constant_block_is_kept, requantizing_is_a_fixed_point,
//   dequantize_rejects_other_sizes, output_finite_and_within_block_range,
//   refused_shapes_throw_input_error, device_format_matches_packed_layout.
const std::vector<Check>& checks();

// Runs one check by name; an exception it throws is a failure with the exception's message.
std::string run_check(std::string_view name, const Scheme& scheme, const Registry& registry);

struct Result {
  std::string check;
  bool passed = false;
  std::string message;  // why it failed
};

// Every check on one scheme; `registry` must be able to make the scheme's spec.
std::vector<Result> check_scheme(const Scheme& scheme, const Registry& registry);

// Values to try for one parameter: its examples, else the domain's ends (and middle for small
// ranges), every choice, a flag on and off. nullopt (unset) is one of them when the parameter has
// no default.
std::vector<std::optional<std::string>> sample_values(const ParamDomain& domain);

// The canonical specs of every parameter combination of `family` that `registry` accepts (a
// cross-parameter refusal is skipped), plus the family's defaults under each rotation and a token
// policy; sorted, without duplicates.
std::vector<std::string> enumerate_specs(const FamilyInfo& family, const Registry& registry);

// `kvtune check-plugin PATH`: loads the plugin into a copy of `base`, runs every check on every
// spec of each of its families and prints one line per check ("PASS family spec check" or
// "FAIL family spec check: why") and a summary. Returns 0 when all passed, 1 otherwise; a plugin
// that cannot be loaded is an InputError.
int check_plugin(const std::string& path, const Registry& base, std::ostream& out);

}  // namespace kvtune::conformance
