#include "kvtune/conformance.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <random>
#include <set>
#include <sstream>

#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"
#include "kvtune/isolation.h"
#include "kvtune/numeric/bits.h"
#include "kvtune/plugin_loader.h"

namespace kvtune::conformance {
namespace {

std::string shape_name(Shape s) { return std::to_string(s.tokens) + "x" + std::to_string(s.head_dim); }

std::string number(double x) {
  std::ostringstream out;
  out.precision(9);
  out << x;
  return out.str();
}

Matrix roundtrip(const Scheme& s, ConstMatrixView x, const QuantContext& ctx = {}) {
  Matrix y(x.rows, x.cols);
  s.roundtrip(x, ctx, y);
  return y;
}

std::string accepts_a_shape(const Scheme& s, const Registry&) {
  return accepted_shapes(s).empty() ? "accepts none of 1x16, 7x32, 33x64, 64x128" : "";
}

std::string canonical_spec_round_trips(const Scheme& s, const Registry& registry) {
  const std::string again = registry.make(s.spec())->spec();
  return again == s.spec() ? "" : "spec '" + s.spec() + "' parses back as '" + again + "'";
}

// The fused path equals the packed path bit for bit, for keys (`role` key) or values.
std::string fused_equals_packed(const Scheme& s, Role role, uint64_t seed) {
  const QuantContext ctx{role, {}, 0};
  for (Shape shape : accepted_shapes(s)) {
    const Matrix x = keys_like(shape, seed);
    Matrix via_packed(shape.tokens, shape.head_dim);
    s.dequantize(s.quantize(x, ctx), ctx, via_packed);
    const Matrix fused = roundtrip(s, x, ctx);
    for (int64_t i = 0; i < x.size(); ++i) {
      if (float_bits(fused.data()[i]) != float_bits(via_packed.data()[i])) {
        return "element " + std::to_string(i) + " of " + shape_name(shape) + ": roundtrip gives " +
               number(fused.data()[i]) + ", dequantize(quantize()) " + number(via_packed.data()[i]);
      }
    }
  }
  return "";
}

std::string roundtrip_equals_dequantize_of_quantize(const Scheme& s, const Registry&) {
  return fused_equals_packed(s, Role::key, 1);
}

std::string value_role_roundtrip_equals_dequantize_of_quantize(const Scheme& s, const Registry&) {
  return fused_equals_packed(s, Role::value, 8);
}

std::string footprint_equals_packed_size(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const size_t packed = s.quantize(keys_like(shape, 2), {}).size();
    const size_t footprint = s.footprint(shape.tokens, shape.head_dim);
    if (packed != footprint) {
      return shape_name(shape) + ": quantize returned " + std::to_string(packed) + " bytes, footprint says " +
             std::to_string(footprint);
    }
  }
  return "";
}

std::string deterministic(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const Matrix x = keys_like(shape, 3);
    if (s.quantize(x, {}) != s.quantize(x, {})) return shape_name(shape) + ": two quantize calls differ";
    if (!(roundtrip(s, x) == roundtrip(s, x))) return shape_name(shape) + ": two roundtrip calls differ";
  }
  return "";
}

std::string zero_block_stays_zero(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const Matrix zeros(shape.tokens, shape.head_dim);
    const Matrix y = roundtrip(s, zeros);
    for (int64_t i = 0; i < y.size(); ++i) {
      if (y.data()[i] != 0.0f) return shape_name(shape) + ": element " + std::to_string(i) + " is " + number(y.data()[i]);
    }
  }
  return "";
}


// Kept to the precision of the stored scale: a bf16 scale is good to 2^-9 relative. Under a
// rotation a constant row becomes one large coefficient per group and zeros (Hadamard) or a dense
// random vector (Haar), which formats without an exact zero code (iq4_nl, min/max types) cannot
// keep; the row mean must still survive, to within half a step of a 2-mantissa-bit float (fp8
// e5m2). A score estimator (estimates_logits: QJL-like sign sketches) is judged by its logits;
// its dequantize is an estimate of the key, not a quantizer's fixed point, so this check and the
// fixed-point check do not apply to it.
// Coarse scales (SchemeTraits::coarse_scales: an E8M0 or E4M3 scale) keep a constant block
// constant but only to a quarter of its value: E2M1 under a power-of-two scale has steps of up to
// a third of a value (4 -> 6), so -2.5 may decode as -2 or -3.
std::string constant_block_is_kept(const Scheme& s, const Registry&) {
  const bool rotated = s.traits().rotates_rows;
  const double tolerance = s.traits().coarse_scales ? 2.5 / 4 : 2.5 / 256;
  for (Shape shape : accepted_shapes(s)) {
    const Matrix constant(shape.tokens, shape.head_dim, -2.5f);
    const Matrix y = roundtrip(s, constant);
    for (int64_t r = 0; r < y.rows(); ++r) {
      double mean = 0;
      for (int64_t c = 0; c < y.cols(); ++c) {
        if (!rotated && s.traits().coarse_scales && y(r, c) != y(r, 0)) {
          return shape_name(shape) + ": row " + std::to_string(r) + " of a -2.5 block is not constant (" +
                 number(y(r, 0)) + " and " + number(y(r, c)) + ")";
        }
        if (!rotated && !(std::abs(double(y(r, c)) - -2.5) <= tolerance)) {
          return shape_name(shape) + ": element (" + std::to_string(r) + ", " + std::to_string(c) + ") of a -2.5 block is " +
                 number(y(r, c));
        }
        mean += y(r, c);
      }
      mean /= double(y.cols());
      if (!(std::abs(mean - -2.5) <= (rotated ? std::max(2.5 / 8, tolerance) : tolerance))) {
        return shape_name(shape) + ": row " + std::to_string(r) + " of a -2.5 block has mean " + number(mean);
      }
    }
  }
  return "";
}

// The round trip is a fixed point. Scales stored in f16/bf16 make it exact; a recomputed float32
// scale may move by an ulp, so values may move by float32 rounding of the block's magnitude.
std::string requantizing_is_a_fixed_point(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const Matrix once = roundtrip(s, keys_like(shape, 4));
    const Matrix twice = roundtrip(s, once);
    float amax = 0;
    for (int64_t i = 0; i < once.size(); ++i) amax = std::max(amax, std::abs(once.data()[i]));
    for (int64_t i = 0; i < once.size(); ++i) {
      if (!(std::abs(twice.data()[i] - once.data()[i]) <= 1e-6f * amax)) {
        return shape_name(shape) + ": element " + std::to_string(i) + " moves from " + number(once.data()[i]) + " to " +
               number(twice.data()[i]) + " when re-quantized";
      }
    }
  }
  return "";
}

std::string dequantize_rejects_other_sizes(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    std::vector<std::byte> packed = s.quantize(keys_like(shape, 7), {});
    packed.push_back(std::byte{0});
    Matrix out(shape.tokens, shape.head_dim);
    try {
      s.dequantize(packed, {}, out);
    } catch (const InputError&) {
      continue;
    }
    return shape_name(shape) + ": dequantize accepted a packed block one byte too long";
  }
  return "";
}

// Whatever the bits, a quantizer never moves a value by more than the block's whole range.
std::string output_finite_and_within_block_range(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const Matrix x = keys_like(shape, 5);
    const Matrix y = roundtrip(s, x);
    const auto [lo, hi] = std::minmax_element(x.data(), x.data() + x.size());
    for (int64_t i = 0; i < x.size(); ++i) {
      if (!std::isfinite(y.data()[i])) return shape_name(shape) + ": element " + std::to_string(i) + " is not finite";
      if (!(std::abs(y.data()[i] - x.data()[i]) <= (*hi - *lo) * 1.001f)) {
        return shape_name(shape) + ": element " + std::to_string(i) + " moves from " + number(x.data()[i]) + " to " +
               number(y.data()[i]) + ", more than the block's range";
      }
    }
  }
  return "";
}

// A scheme that describes itself to the CUDA kernels (device_format) must be readable through
// kvtune/codecs/packed_layout.h: the layout spans the footprint and decode_element gives dequantize()
// bit for bit. One shape keeps it cheap: 33 tokens (a partial token group) where accepted.
// tests/unit/packed_layout_test.cpp covers the built-in formats on more shapes and the encode side.
std::string device_format_matches_packed_layout(const Scheme& s, const Registry&) {
  const std::optional<DeviceFormat> format = s.device_format();
  const std::vector<Shape> accepted = accepted_shapes(s);
  if (!format || accepted.empty()) return "";  // skipped (no format) or nothing to compare
  const auto with_33 = std::find_if(accepted.begin(), accepted.end(), [](Shape a) { return a.tokens == 33; });
  const Shape shape = with_33 != accepted.end() ? *with_33 : accepted.front();
  const codec::PackedLayout layout = codec::packed_layout(*format, shape.tokens, shape.head_dim);
  const size_t footprint = s.footprint(shape.tokens, shape.head_dim);
  if (layout.bytes != static_cast<int64_t>(footprint)) {
    return shape_name(shape) + ": packed_layout of its device_format spans " + std::to_string(layout.bytes) +
           " bytes, footprint says " + std::to_string(footprint);
  }
  const std::vector<std::byte> packed = s.quantize(keys_like(shape, 9), {});
  if (packed.size() != footprint) {
    return shape_name(shape) + ": quantize returned " + std::to_string(packed.size()) + " bytes";
  }
  Matrix y(shape.tokens, shape.head_dim);
  s.dequantize(packed, {}, y);
  const auto* bytes = reinterpret_cast<const uint8_t*>(packed.data());
  for (int64_t t = 0; t < shape.tokens; ++t) {
    for (int64_t c = 0; c < shape.head_dim; ++c) {
      const float decoded = codec::decode_element(layout, bytes, t, c);
      if (float_bits(decoded) != float_bits(y(t, c))) {
        return shape_name(shape) + ": element (" + std::to_string(t) + ", " + std::to_string(c) +
               ") decodes through its device_format to " + number(decoded) + ", dequantize gives " + number(y(t, c));
      }
    }
  }
  return "";
}

// Degenerate and odd shapes: check_shape answers without crashing, empty blocks are refused, and
// a refused shape makes quantize throw InputError rather than read or write out of bounds.
std::string refused_shapes_throw_input_error(const Scheme& s, const Registry&) {
  const Shape odd[] = {{0, 16}, {1, 0}, {3, 17}, {2, 1}, {5, 24}};
  for (Shape shape : odd) {
    const std::string why = s.check_shape(shape.tokens, shape.head_dim);
    if (why.empty()) {
      if (shape.tokens < 1 || shape.head_dim < 1) return shape_name(shape) + ": check_shape accepts an empty block";
      continue;
    }
    const Matrix x(std::max<int64_t>(shape.tokens, 0), std::max<int64_t>(shape.head_dim, 0), 1.0f);
    try {
      (void)s.quantize(x, {});
    } catch (const InputError&) {
      continue;
    }
    return shape_name(shape) + ": check_shape refuses it (" + why + ") but quantize does not throw InputError";
  }
  return "";
}

// See constant_block_is_kept: a score estimator's dequantize is an estimate, not a fixed point.
std::string unless_quantizer(const Scheme& s) {
  return s.traits().estimates_logits ? "a score estimator (estimates_logits): judged by its logits, not its round trip"
                                     : "";
}

// A scheme whose round trip drifts by design (SchemeTraits::requantize_drifts, e.g. vLLM's
// truncating int8 cache) is no projection; a score estimator is judged by its logits.
std::string unless_projection(const Scheme& s) {
  if (std::string why = unless_quantizer(s); !why.empty()) return why;
  return s.traits().requantize_drifts
             ? "its round trip drifts by design (requantize_drifts: re-fitting the scales of a round trip moves "
               "values, e.g. truncating rounding loses the top code)"
             : "";
}

// A scheme that declares channel_order_invariant stores the same values in any channel order: the
// round trip of rows with their channels reversed is the reversed round trip, bit for bit.
std::string reversing_channels_reverses_the_round_trip(const Scheme& s, const Registry&) {
  for (Shape shape : accepted_shapes(s)) {
    const Matrix x = keys_like(shape, 13);
    Matrix reversed(shape.tokens, shape.head_dim);
    const int64_t d = shape.head_dim;
    for (int64_t r = 0; r < shape.tokens; ++r) {
      for (int64_t c = 0; c < d; ++c) reversed(r, c) = x(r, d - 1 - c);
    }
    const Matrix y = roundtrip(s, x), y_reversed = roundtrip(s, reversed);
    for (int64_t r = 0; r < shape.tokens; ++r) {
      for (int64_t c = 0; c < d; ++c) {
        if (float_bits(y_reversed(r, c)) != float_bits(y(r, d - 1 - c))) {
          return shape_name(shape) + ": element (" + std::to_string(r) + ", " + std::to_string(c) + ") of the reversed "
                 "round trip is " + number(y_reversed(r, c)) + ", the round trip's mirror " + number(y(r, d - 1 - c));
        }
      }
    }
  }
  return "";
}

std::string unless_channel_order_invariant(const Scheme& s) {
  return s.traits().channel_order_invariant ? "" : "does not declare channel_order_invariant";
}

std::string unless_device_format(const Scheme& s) {
  return s.device_format() ? "" : "no device_format: the scheme runs on the CPU path only";
}

const std::vector<Check> kChecks = {
    {"accepts_a_shape", accepts_a_shape},
    {"canonical_spec_round_trips", canonical_spec_round_trips},
    {"roundtrip_equals_dequantize_of_quantize", roundtrip_equals_dequantize_of_quantize},
    {"value_role_roundtrip_equals_dequantize_of_quantize", value_role_roundtrip_equals_dequantize_of_quantize},
    {"footprint_equals_packed_size", footprint_equals_packed_size},
    {"deterministic", deterministic},
    {"zero_block_stays_zero", zero_block_stays_zero},
    {"constant_block_is_kept", constant_block_is_kept, unless_quantizer},
    {"requantizing_is_a_fixed_point", requantizing_is_a_fixed_point, unless_projection},
    {"dequantize_rejects_other_sizes", dequantize_rejects_other_sizes},
    {"output_finite_and_within_block_range", output_finite_and_within_block_range},
    {"refused_shapes_throw_input_error", refused_shapes_throw_input_error},
    {"device_format_matches_packed_layout", device_format_matches_packed_layout, unless_device_format},
    {"reversing_channels_reverses_the_round_trip", reversing_channels_reverses_the_round_trip,
     unless_channel_order_invariant},
};

std::string guarded(const Check& check, const Scheme& scheme, const Registry& registry);

const Check& find_check(std::string_view name) {
  for (const Check& c : kChecks) {
    if (name == c.name) return c;
  }
  throw std::logic_error("no conformance check named '" + std::string(name) + "'");
}

std::string guarded_skip(const Check& check, const Scheme& scheme) {
  if (check.not_applicable == nullptr) return "";
  try {
    return check.not_applicable(scheme);
  } catch (const std::exception&) {
    return "";  // let the check itself report what throws
  }
}

Result outcome_of(const Check& c, const Scheme& scheme, const Registry& registry) {
  if (std::string why = guarded_skip(c, scheme); !why.empty()) return {c.name, true, std::move(why), Outcome::skip};
  std::string why = guarded(c, scheme, registry);
  const bool ok = why.empty();
  return {c.name, ok, std::move(why), ok ? Outcome::pass : Outcome::fail};
}

std::string guarded(const Check& check, const Scheme& scheme, const Registry& registry) {
  try {
    return check.run(scheme, registry);
  } catch (const std::exception& e) {
    return std::string("threw: ") + e.what();
  } catch (...) {
    return "threw an unknown exception";
  }
}

}  // namespace

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> all = {{1, 16}, {7, 32}, {33, 64}, {64, 128}};
  return all;
}

std::vector<Shape> accepted_shapes(const Scheme& scheme) {
  std::vector<Shape> ok;
  for (Shape s : shapes()) {
    if (scheme.check_shape(s.tokens, s.head_dim).empty()) ok.push_back(s);
  }
  return ok;
}

Matrix keys_like(Shape s, uint64_t seed) {
  std::mt19937_64 engine(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Matrix m(s.tokens, s.head_dim);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(engine);
  for (int64_t r = 0; r < s.tokens; ++r) {
    m(r, 1) *= 20.0f;
    m(r, s.head_dim - 2) *= 20.0f;
    m(r, 3) += 4.0f;
  }
  return m;
}

const std::vector<Check>& checks() { return kChecks; }

std::string run_check(std::string_view name, const Scheme& scheme, const Registry& registry) {
  const Result r = outcome_of(find_check(name), scheme, registry);
  return r.outcome == Outcome::fail ? r.message : "";
}

std::string skip_reason(std::string_view name, const Scheme& scheme) { return guarded_skip(find_check(name), scheme); }

Result check_one(std::string_view name, const Scheme& scheme, const Registry& registry) {
  return outcome_of(find_check(name), scheme, registry);
}

std::vector<Result> check_scheme(const Scheme& scheme, const Registry& registry) {
  std::vector<Result> out;
  for (const Check& c : kChecks) out.push_back(outcome_of(c, scheme, registry));
  return out;
}

std::vector<std::optional<std::string>> sample_values(const ParamDomain& d) {
  std::vector<std::optional<std::string>> v;
  if (d.default_value.empty()) v.push_back(std::nullopt);
  switch (d.kind) {
    case ParamDomain::Kind::integer:
      if (!d.examples.empty()) {
        for (const std::string& e : d.examples) v.push_back(e);
        break;
      }
      v.push_back(std::to_string(d.min));
      if (d.max - d.min <= 16) v.push_back(std::to_string((d.min + d.max) / 2));
      v.push_back(std::to_string(d.max));
      break;
    case ParamDomain::Kind::choice:
      for (const std::string& c : d.choices) v.push_back(c);
      break;
    case ParamDomain::Kind::flag:
      v.push_back("");
      break;
    case ParamDomain::Kind::real:
      v.push_back(d.default_value.empty() ? std::string("1") : d.default_value);
      break;
  }
  return v;
}

SpecEnumeration enumerate_specs(const FamilyInfo& f, const Registry& registry) {
  std::vector<std::string> partial = {""};
  for (const ParamDomain& d : f.params) {
    std::vector<std::string> next;
    for (const std::string& p : partial) {
      for (const auto& v : sample_values(d)) {
        if (!v) {
          next.push_back(p);
          continue;
        }
        const std::string item = d.kind == ParamDomain::Kind::flag ? d.name : d.name + "=" + *v;
        next.push_back(p.empty() ? item : p + "," + item);
      }
    }
    partial = std::move(next);
  }
  // The family's default spec also runs under each rotation policy, a token policy and the pair order.
  partial.push_back("rotation=hadamard");
  partial.push_back("rotation=hadamard,rotation_group=16");
  partial.push_back("rotation=random,rotation_seed=7");
  partial.push_back("sink_tokens=2,residual_window=3,block_tokens=2");
  partial.push_back("pair_order=adjacent");
  partial.push_back("pair_order=adjacent,sink_tokens=2,block_tokens=2");
  std::set<std::string> out;
  SpecEnumeration result;
  for (const std::string& p : partial) {
    const std::string spec = p.empty() ? f.name : f.name + ":" + p;
    try {
      out.insert(registry.make(spec)->spec());
    } catch (const PluginFault&) {
      throw;  // not a refusal: the plugin is broken
    } catch (const InputError& e) {
      ++result.refused;
      if (result.refused_examples.size() < SpecEnumeration::kRefusedExamples) {
        result.refused_examples.push_back(spec + ": " + e.what());
      }
    }
  }
  result.specs.assign(out.begin(), out.end());
  return result;
}

namespace {

// Length-prefixed strings: what a check's child sends back.
void put(std::string& out, const std::string& item) {
  out += std::to_string(item.size());
  out += ':';
  out += item;
}

std::string get(std::string_view& in) {
  const size_t colon = in.find(':');
  if (colon == std::string_view::npos) throw std::runtime_error("check-plugin: a malformed report from a child");
  const size_t n = std::stoul(std::string(in.substr(0, colon)));
  if (in.size() < colon + 1 + n) throw std::runtime_error("check-plugin: a truncated report from a child");
  std::string item(in.substr(colon + 1, n));
  in.remove_prefix(colon + 1 + n);
  return item;
}

// The report, line by line: flushed, so what was printed survives whatever happens next.
class Report {
 public:
  explicit Report(std::ostream& out) : out_(out) {}
  void line(Outcome o, const std::string& text) {
    ++(o == Outcome::pass ? passed : o == Outcome::skip ? skipped : failed);
    out_ << (o == Outcome::pass ? "PASS " : o == Outcome::skip ? "SKIP " : "FAIL ") << text << "\n" << std::flush;
  }
  void note(const std::string& text) { out_ << text << "\n" << std::flush; }
  size_t passed = 0, failed = 0, skipped = 0;

 private:
  std::ostream& out_;
};

}  // namespace

int check_plugin(const std::string& path, const Registry& base, std::ostream& out, const CheckPluginOptions& options) {
  const IsolationOptions limit{options.timeout_seconds};
  // describe runs in a child first: a plugin that crashes there cannot be loaded (exit status 2).
  if (const std::optional<std::string> crashed = probe_plugin(base, path, options.origin, limit)) {
    throw PluginFault(*crashed);
  }
  Registry registry = base;
  const PluginInfo plugin = load_plugin(registry, path, options.origin);
  Report report(out);
  report.note("plugin " + plugin.path + ": " + plugin.name + " " + plugin.version + ", ABI " +
              std::to_string(plugin.abi_major) + "." + std::to_string(plugin.abi_minor) +
              ", families: " + join(plugin.families));
  for (const std::string& name : plugin.families) {
    const FamilyInfo& family = *registry.find(name);
    SpecEnumeration specs;
    const IsolatedResult enumerated = run_isolated(
        [&] {
          const SpecEnumeration e = enumerate_specs(family, registry);
          std::string bytes;
          put(bytes, std::to_string(e.refused));
          put(bytes, std::to_string(e.refused_examples.size()));
          for (const std::string& x : e.refused_examples) put(bytes, x);
          for (const std::string& x : e.specs) put(bytes, x);
          return bytes;
        },
        limit);
    if (enumerated.status != IsolatedResult::Status::ok) {
      report.line(Outcome::fail, name + " - enumerate_specs: " +
                                     (enumerated.status == IsolatedResult::Status::failed ? enumerated.failure.describe()
                                                                                          : enumerated.payload));
      continue;
    }
    std::string_view in = enumerated.payload;
    specs.refused = std::stoul(get(in));
    for (size_t n = std::stoul(get(in)); n > 0; --n) specs.refused_examples.push_back(get(in));
    while (!in.empty()) specs.specs.push_back(get(in));
    if (specs.refused > 0) {
      report.note("note " + name + ": " + std::to_string(specs.refused) + " parameter combination" +
                  (specs.refused == 1 ? " was" : "s were") + " refused by the family and not checked, e.g. " +
                  join(specs.refused_examples, "; "));
    }
    if (specs.empty()) {
      report.line(Outcome::fail, name + " - enumerate_specs: no parameter combination from its domains is accepted");
      continue;
    }
    for (const std::string& spec : specs) {
      const IsolatedResult made = run_isolated([&] { return registry.make(spec)->spec(); }, limit);
      if (made.status != IsolatedResult::Status::ok) {
        report.line(Outcome::fail, name + " " + spec + " make: " +
                                       (made.status == IsolatedResult::Status::failed ? made.failure.describe()
                                                                                      : made.payload));
        continue;
      }
      for (const Check& check : checks()) {
        // One child per check: a crash in one is that check's failure, and the next still runs.
        const IsolatedResult r = run_isolated(
            [&] {
              const Result result = check_one(check.name, *registry.make(spec), registry);
              return std::string(1, result.outcome == Outcome::pass ? 'P' : result.outcome == Outcome::skip ? 'S' : 'F') +
                     result.message;
            },
            limit);
        const std::string line = name + " " + spec + " " + check.name;
        if (r.status == IsolatedResult::Status::failed) {
          report.line(Outcome::fail, line + ": " + r.failure.describe());
        } else if (r.status != IsolatedResult::Status::ok || r.payload.empty()) {
          report.line(Outcome::fail, line + ": threw: " + r.payload);
        } else if (r.payload[0] == 'P') {
          report.line(Outcome::pass, line);
        } else {
          report.line(r.payload[0] == 'S' ? Outcome::skip : Outcome::fail, line + ": " + r.payload.substr(1));
        }
      }
    }
  }
  const size_t total = report.passed + report.failed;
  const std::string skipped =
      report.skipped == 0 ? "" : " (" + std::to_string(report.skipped) + " skipped: not applicable)";
  report.note((report.failed == 0 ? "all " + std::to_string(total) + " checks passed"
                                  : std::to_string(report.failed) + " of " + std::to_string(total) + " checks failed") +
              skipped);
  return report.failed == 0 ? 0 : 1;
}

}  // namespace kvtune::conformance
