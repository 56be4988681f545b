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
  // Why the check does not apply to `scheme` (read from its traits() and device_format(), never
  // from its name or spec), or empty when it does. Null: it always applies.
  std::string (*not_applicable)(const Scheme& scheme) = nullptr;
};

// Every check, in the order check-plugin prints them:
//   accepts_a_shape, canonical_spec_round_trips, roundtrip_equals_dequantize_of_quantize,
//   value_role_roundtrip_equals_dequantize_of_quantize, footprint_equals_packed_size,
//   deterministic, zero_block_stays_zero, constant_block_is_kept, requantizing_is_a_fixed_point,
//   dequantize_rejects_other_sizes, output_finite_and_within_block_range,
//   refused_shapes_throw_input_error, device_format_matches_packed_layout.
const std::vector<Check>& checks();

// Runs one check by name; an exception it throws is a failure with the exception's message. A
// check that does not apply returns "" (see skip_reason).
std::string run_check(std::string_view name, const Scheme& scheme, const Registry& registry);

// Why the check `name` does not apply to `scheme`, or "" when it does.
std::string skip_reason(std::string_view name, const Scheme& scheme);

enum class Outcome { pass, fail, skip };

struct Result {
  std::string check;
  bool passed = false;  // nothing failed: true for pass and skip
  std::string message;  // why it failed, or why it was skipped
  Outcome outcome = Outcome::fail;
};

// Result of one check by name (skip, pass or fail), exceptions caught as run_check does.
Result check_one(std::string_view name, const Scheme& scheme, const Registry& registry);

// Every check on one scheme; `registry` must be able to make the scheme's spec.
std::vector<Result> check_scheme(const Scheme& scheme, const Registry& registry);

// Values to try for one parameter: its examples, else the domain's ends (and middle for small
// ranges), every choice, a flag on and off. nullopt (unset) is one of them when the parameter has
// no default.
std::vector<std::optional<std::string>> sample_values(const ParamDomain& domain);

// What enumerate_specs found: the specs, and the combinations the family refused (make threw an
// InputError), counted and the first few kept with the reason, so none is dropped silently.
struct SpecEnumeration {
  std::vector<std::string> specs;  // canonical, sorted, without duplicates
  size_t refused = 0;
  std::vector<std::string> refused_examples;  // "spec: why", at most kRefusedExamples
  static constexpr size_t kRefusedExamples = 3;

  auto begin() const { return specs.begin(); }
  auto end() const { return specs.end(); }
  size_t size() const { return specs.size(); }
  bool empty() const { return specs.empty(); }
};

// The canonical specs of every parameter combination of `family` that `registry` accepts (a
// cross-parameter refusal is counted in `refused`), plus the family's defaults under each rotation
// and a token policy.
SpecEnumeration enumerate_specs(const FamilyInfo& family, const Registry& registry);

struct CheckPluginOptions {
  // Each step (the plugin's describe, a family's spec enumeration, making a spec, each check) runs
  // in a child process with this limit, so a crash, exit() or endless loop fails that step only.
  double timeout_seconds = 60;
  std::string origin = "check-plugin";  // where the plugin was named, for messages
};

// `kvtune check-plugin PATH`: loads the plugin into a copy of `base`, runs every check on every
// spec of each of its families and prints one line per check ("PASS family spec check", "SKIP
// family spec check: why not" or "FAIL family spec check: why", flushed line by line) and a
// summary. A check whose child crashes, exits or times out fails with the signal, status or
// limit. Returns 0 when nothing failed, 1 otherwise; a plugin that cannot be loaded (its describe
// crashing included) is an InputError, printing nothing.
int check_plugin(const std::string& path, const Registry& base, std::ostream& out,
                 const CheckPluginOptions& options = {});

}  // namespace kvtune::conformance
