// The scheme interface: the one seam shared by the simulator, sweeps, CUDA kernels, plugins and
// recommendations (DESIGN §3). A scheme is an immutable, thread-safe, configured quantizer for one
// role (K or V). Scale convention everywhere: quantize divides by the scale, dequantize multiplies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "kvtune/device_format.h"
#include "kvtune/matrix.h"
#include "kvtune/rope.h"

namespace kvtune {

enum class Role { key, value };
const char* role_name(Role role);

// What a scheme may need to know besides the block itself.
struct QuantContext {
  Role role = Role::key;
  std::span<const int64_t> positions;  // absolute token positions of the block's rows (may be empty)
  uint64_t seed = 0;                   // for schemes with random rotations or codebooks
  const RopeConfig* rope = nullptr;    // the RoPE the cached keys carry (rope_stage=pre undoes it)
};

// The context of rows first .. first + rows of a block: their own positions, so position-aware
// schemes see where the rows sit (a caller that round-trips a block a few rows at a time).
QuantContext rows_context(const QuantContext& ctx, int64_t first, int64_t rows);

// One parameter of a family, enough for a sweep to enumerate and validate points up front.
struct ParamDomain {
  enum class Kind { integer, choice, flag, real };
  std::string name;
  Kind kind = Kind::integer;
  std::string help;
  std::string default_value;          // empty: the parameter is unset by default
  int64_t min = 0, max = 0;           // integer: inclusive bounds
  std::vector<std::string> choices;   // choice: allowed values
  bool in_canonical = false;          // always spelled out in the canonical spec
  bool power_of_two = false;       // integer: must be a power of two
  bool keys_only = false;          // a policy key that acts on keys alone (values pass through)
  // Representative values for enumerating a grid (sweep defaults, conformance), when the domain's
  // ends are not (e.g. group sizes 32, 64, 128 within 1..65536).
  std::vector<std::string> examples;

  std::string describe() const;       // "2..8", "tensor|channel|token", "flag", ...
};

// What a scheme does that its consumers must know, declared by the scheme itself (never inferred
// from its spec text or family name). Wrappers merge their inner scheme's traits with their own.
struct SchemeTraits {
  bool rotates_rows = false;      // stores each row in a rotated basis (Hadamard, Haar, TurboQuant):
                                  // a constant row is not constant in the stored codes
  bool estimates_logits = false;  // keys are scored through logits(), not reconstructed (QJL)
  bool needs_positions = false;   // reads QuantContext::positions (rope_stage=pre)
  bool needs_rope = false;        // keys must carry RoPE (rope_stage=pre undoes it before quantizing)
  bool static_scales = false;     // calibrate() fits scales on a sample (fp8 scale=calibrated, ...)
  bool calibrates_per_head = false;  // its static scales are per KV head (fp8 granularity=head, as
                                     // llm-compressor's "attn_head"): it calibrates on its own head's
                                     // rows of a layer-wide calibration set
  bool coarse_scales = false;     // its scales are low-precision floats themselves (E8M0 powers of two,
                                  // E4M3): a constant block decodes to a constant, but only to the
                                  // element format's resolution, not to itself (mxfp4, nvfp4)
  bool requantize_drifts = false; // by design its round trip is not a fixed point: re-fitting the scales of
                                  // a round-tripped block moves values (truncating rounding loses the
                                  // top code, a midpoint zero point puts both extremes on half steps,
                                  // a scale with its low mantissa bits cleared loses 16 ulps):
                                  // tokenint with round=trunc, zero=mid or zero_in_scale; nvfp4
                                  // with a fitted scale's bound below 2688
  bool rows_independent = false; // a row's round trip reads that row alone (per-token scales, ggml
                                  // blocks, fixed scales): a slice of rows round-trips to the bits
                                  // it has inside the whole block, so a wrapper may go a few rows
                                  // at a time (tests/conformance, suite RowsIndependent)
  int64_t row_block = 0;          // > 0: its scales span blocks of this many tokens, numbered from
                                  // the first row (int per channel in groups of tokens): a slice of
                                  // whole blocks, from a multiple of it, round-trips to the bits it
                                  // has inside the whole block (suite RowBlocksIndependent);
                                  // rows_independent says so for every row
  bool channel_order_invariant = false;  // stores the same values in any order of a row's channels:
                                  // each element alone (f16) or one scale over whole rows or the
                                  // tensor (fp8, tokenint); a key layout (pair_order) changes nothing
                                  // (suite ChannelOrderInvariant)
  bool policy_wrapper = false;    // a cache policy (policy.h) around an inner scheme
  bool device_format = false;     // device_format() describes its bytes to the CUDA kernels
  std::optional<Role> role;       // built for one role, which its spec names (kivi, kvquant role=k|v):
                                  // it ignores QuantContext::role and is refused in the other slot
  bool from_plugin = false;       // its code comes from a shared library (evaluated in a child process)
  std::string plugin_origin;      // from_plugin: where the plugin came from and its path, for messages
                                  // ("--plugin /x/libnf4.so", "KVTUNE_PLUGIN_PATH /d/libnf4.so")
};

class Scheme : public std::enable_shared_from_this<Scheme> {
 public:
  virtual ~Scheme() = default;

  // Canonical spec string; parse(spec()) yields an equal scheme.
  virtual std::string spec() const = 0;
  virtual std::string family() const = 0;

  // Empty when the scheme can store a [tokens, head_dim] block, else why not (e.g. a group size
  // that does not divide head_dim). Callers check before quantizing.
  virtual std::string check_shape(int64_t tokens, int64_t head_dim) const;

  // Exact packed bytes (payload + scales, zero points, indices, codebooks) of a block.
  virtual size_t footprint(int64_t tokens, int64_t head_dim) const = 0;

  virtual std::vector<std::byte> quantize(ConstMatrixView block, const QuantContext& ctx) const = 0;
  virtual void dequantize(std::span<const std::byte> packed, const QuantContext& ctx,
                          MatrixView out) const = 0;

  // Fused quantize + dequantize. Must equal dequantize(quantize(block)) bit for bit; the default
  // does exactly that, schemes override it with a faster path.
  virtual void roundtrip(ConstMatrixView block, const QuantContext& ctx, MatrixView out) const;

  // Schemes with static scales return a copy with scales fitted on `sample`; others return
  // themselves.
  virtual std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const;

  // The one static scale the scheme applies to every element (x ≈ code × scale), as a runtime
  // loads it from a checkpoint's k_scale / v_scale: fp8 with scale=unit (1) or static (its value).
  // nullopt for every other scheme (dynamic or per-block scales, calibrated but not yet fitted,
  // wrappers that rotate or split the rows).
  virtual std::optional<double> static_scale() const { return std::nullopt; }
  // A copy that applies `scale` as its static scale, as a runtime applies a loaded k_scale /
  // v_scale; nullptr for schemes without static scales (traits().static_scales false).
  virtual std::shared_ptr<const Scheme> with_static_scale(double /*scale*/) const { return nullptr; }

  // The scheme with the scales it would fit on `block` held fixed, for a caller that round-trips the
  // block a few rows at a time (the evaluator at long contexts): its round trip of any rows of
  // `block` gives the bits this scheme's round trip of the whole block gives them, and its traits
  // declare rows_independent. nullptr (the default) when the scheme offers none: its rows are
  // independent already, or its scales are not one set over the block's tokens.
  virtual std::shared_ptr<const Scheme> with_scales_fixed_on(ConstMatrixView /*block*/) const { return nullptr; }

  // Key schemes that estimate q·k without reconstructing k override both. logits is [Nq, T]:
  // logits(i, j) = q_i · k_j (no 1/sqrt(D) factor).
  virtual bool estimates_logits() const { return false; }
  virtual void logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens,
                      const QuantContext& ctx, MatrixView logits) const;

  // Layout description for fused CUDA kernels; nullopt when no device codec exists.
  virtual std::optional<DeviceFormat> device_format() const { return std::nullopt; }

  // What consumers must know about this scheme. The default declares estimates_logits() and
  // device_format(); schemes with more to declare override it (and start from Scheme::traits()).
  virtual SchemeTraits traits() const;

  // Bits per element measured from the footprint.
  double bits_per_element(int64_t tokens, int64_t head_dim) const;

 protected:
  // For implementations: throw InputError with check_shape's message, or when a packed buffer is
  // not exactly footprint(tokens, head_dim) bytes.
  void require_shape(int64_t tokens, int64_t head_dim) const;
  void require_packed(std::span<const std::byte> packed, int64_t tokens, int64_t head_dim) const;
};

using SchemePtr = std::shared_ptr<const Scheme>;

// Empty when `scheme` can quantize `role`, else why not (traits().role names the other one).
std::string role_problem(const Scheme& scheme, Role role);

}  // namespace kvtune
