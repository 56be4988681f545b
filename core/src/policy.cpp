#include "kvtune/policy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kvtune/codecs/rht.h"
#include "kvtune/error.h"
#include "kvtune/numeric/half_kernels.h"
#include "kvtune/rope.h"
#include "rotation_kernels.h"

namespace kvtune {
namespace {

using rotation_kernels::rht_rows;
using rotation_kernels::rotate_rows;
using rotation_kernels::rotate_rows_random;

std::string rotation_spec(const CachePolicy& policy);
std::string with_suffix(const std::string& inner, const std::string& suffix);

class RotatedScheme final : public Scheme {
 public:
  RotatedScheme(SchemePtr inner, CachePolicy policy) : inner_(std::move(inner)), policy_(policy) {}

  std::string spec() const override {
    return with_suffix(inner_->spec(), rotation_spec(policy_));
  }
  std::string family() const override { return inner_->family(); }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = inner_->check_shape(tokens, head_dim);
    if (!why.empty()) return why;
    const int64_t g = policy_.rotation_group;
    if (g > 0 && head_dim % g != 0) {
      return "'" + spec() + "': rotation_group=" + std::to_string(g) + " does not divide head_dim " +
             std::to_string(head_dim);
    }
    // vLLM's fast_hadamard_transform asserts a power-of-two head (d & (d - 1) == 0).
    if (policy_.rotation == Rotation::rht && (head_dim & (head_dim - 1)) != 0) {
      return "'" + spec() + "': rotation=rht needs a power-of-two head_dim (vLLM's randomized Hadamard transform "
             "rotates the whole head and asserts it); head_dim " + std::to_string(head_dim) + " is not one";
    }
    // llama.cpp's own group (K and V alike) needs 64 | head_dim; without one, rotation=hadamard would
    // rotate nothing while the spec still names it.
    if (policy_.rotation == Rotation::hadamard && g == 0 && llama_cpp_rotation_group(Role::key, head_dim) == 0) {
      std::string valid;
      for (int64_t v = 2; v <= head_dim && head_dim % v == 0; v *= 2) valid += (valid.empty() ? "" : ", ") + std::to_string(v);
      return "'" + spec() + "': rotation=hadamard has no rotation group for head_dim " + std::to_string(head_dim) +
             " (llama.cpp's needs head_dim divisible by 64: K the largest power of two >= 64 dividing it, V 64); " +
             (valid.empty() ? "no rotation_group (a power of two >= 2) divides it"
                            : "give rotation_group=N, N one of " + valid);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override { return inner_->footprint(tokens, head_dim); }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext& ctx) const override {
    return inner_->quantize(rotated(x, ctx), ctx);
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const override {
    require_shape(out.rows, out.cols);  // the wrapper's own check: the group must divide head_dim
    inner_->dequantize(packed, ctx, out);
    unrotate(out, ctx);
  }

  void roundtrip(ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    if ((policy_.rotation == Rotation::hadamard || policy_.rotation == Rotation::rht) &&
        inner_->traits().rows_independent) {
      return roundtrip_in_tiles(x, ctx, out);
    }
    inner_->roundtrip(rotated(x, ctx), ctx, out);
    unrotate(out, ctx);
  }

  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const override {
    SchemePtr fitted = inner_->calibrate(rotated(sample, ctx), ctx);
    return fitted == inner_ ? shared_from_this() : std::make_shared<RotatedScheme>(fitted, policy_);
  }

  // An orthogonal R keeps dot products, q.k = (Rq).(Rk): a score estimator inside estimates on the
  // rotated queries. rotation=rht is sqrt(d) times an orthogonal matrix, (Rq).(Rk) = d q.k, so its
  // estimates are divided by d (a power of two: exact).
  bool estimates_logits() const override { return inner_->estimates_logits(); }
  SchemeTraits traits() const override {
    SchemeTraits t = inner_->traits();
    t.rotates_rows = t.policy_wrapper = true;
    t.device_format = false;
    t.channel_order_invariant = false;  // a rotation's groups and signs are channels by index
    return t;
  }
  void logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens, const QuantContext& ctx,
              MatrixView out) const override {
    if (!inner_->estimates_logits()) return Scheme::logits(queries, packed, tokens, ctx, out);
    inner_->logits(rotated_copy(queries, ctx), packed, tokens, ctx, out);
    if (policy_.rotation == Rotation::rht) {
      const float d = static_cast<float>(queries.cols);
      for (int64_t i = 0; i < out.rows * out.cols; ++i) out.data[i] /= d;
    }
  }

 private:
  int64_t group_for(const QuantContext& ctx, int64_t head_dim) const {
    if (policy_.rotation_group > 0) return policy_.rotation_group;
    if (policy_.rotation == Rotation::random) return head_dim;
    return llama_cpp_rotation_group(ctx.role, head_dim);
  }

  // The rotated input in this thread's scratch buffer, valid until the thread's next call: a fresh
  // [T, D] copy per call would page-fault on every call (the inner scheme only reads it).
  ConstMatrixView rotated(ConstMatrixView x, const QuantContext& ctx) const {
    require_shape(x.rows, x.cols);
    thread_local std::vector<float> scratch;
    if (scratch.size() < size_t(x.size())) scratch.resize(size_t(x.size()));
    const MatrixView copy{scratch.data(), x.rows, x.cols};
    if (const int64_t g = policy_.rotation == Rotation::hadamard ? group_for(ctx, x.cols) : 0; g > 0) {
      rotate_rows(x, copy, g);  // the copy and the rotation in one pass
      return copy;
    }
    if (policy_.rotation == Rotation::rht) {
      rht_rows(x, copy, rht_signs(x.cols), /*back=*/false);  // likewise
      return copy;
    }
    std::copy(x.data, x.data + x.size(), scratch.data());
    rotate(copy, ctx, /*back=*/false);
    return copy;
  }

  Matrix rotated_copy(ConstMatrixView x, const QuantContext& ctx) const {
    Matrix copy = copy_of(x);
    rotate(copy, ctx, /*back=*/false);
    return copy;
  }

  void unrotate(MatrixView x, const QuantContext& ctx) const { rotate(x, ctx, /*back=*/true); }

  // The Hadamard or RHT round trip of an inner scheme whose rows round-trip alone
  // (rows_independent), 8 KiB of rows at a time: the rotation, the inner round trip and the rotation
  // back of a tile stay in L1, and x and out are each passed over once, where the whole block went
  // through memory three times (bench_schemes, q4_0:rotation=hadamard at 32 768 x 128: best
  // 1.85-2.28 -> 1.57-2.06 ms). Tiles of 16 KiB and more were slower, reading the next tile ahead
  // too. Every element sees the same operations: the same bits.
  void roundtrip_in_tiles(ConstMatrixView x, const QuantContext& ctx, MatrixView out) const {
    require_shape(x.rows, x.cols);
    const bool rht = policy_.rotation == Rotation::rht;
    const int64_t g = rht ? x.cols : group_for(ctx, x.cols);
    if (g <= 0) return inner_->roundtrip(x, ctx, out);  // nothing to rotate (as rotate())
    const std::vector<float> signs = rht ? rht_signs(x.cols) : std::vector<float>{};
    const bool stream = rotation_kernels::streams_back(out);
    const auto rotate_tile = [&](ConstMatrixView src, MatrixView dst, bool back) {
      if (back && stream && rotation_kernels::rotate_back_streamed(src, dst, g, rht ? signs.data() : nullptr)) return;
      rht ? rht_rows(src, dst, signs, back) : rotate_rows(src, dst, g);
    };
    constexpr int64_t kTileBytes = 8192;
    const int64_t tile = std::max<int64_t>(1, kTileBytes / (x.cols * int64_t(sizeof(float))));
    const size_t floats = size_t(tile * x.cols);
    thread_local std::vector<float> scratch;  // grown, never shrunk
    if (scratch.size() < 2 * floats) scratch.resize(2 * floats);
    for (int64_t r0 = 0; r0 < x.rows; r0 += tile) {
      const int64_t rows = std::min(tile, x.rows - r0);
      const QuantContext tile_ctx = rows_context(ctx, r0, rows);
      const MatrixView rotated{scratch.data(), rows, x.cols}, back{scratch.data() + floats, rows, x.cols};
      rotate_tile(x.row_range(r0, rows), rotated, false);
      inner_->roundtrip(rotated, tile_ctx, back);
      rotate_tile(back, {out.row(r0), rows, x.cols}, true);
    }
    if (stream) rotation_kernels::end_streamed_stores();
  }

  void rotate(MatrixView x, const QuantContext& ctx, bool back) const {
    if (policy_.rotation == Rotation::random) {
      rotate_rows_random(x, policy_.rotation_seed, back);
    } else if (policy_.rotation == Rotation::rht) {
      rht_rows(x, x, rht_signs(x.cols), back);
    } else if (const int64_t g = group_for(ctx, x.cols); g > 0) {
      rotate_rows(x, x, g);  // an involution: forth and back alike
    }
  }

  SchemePtr inner_;
  CachePolicy policy_;
};

// pair_order=adjacent: keys stored with each RoPE pair in neighbouring channels. Hugging Face's
// rotate_half form pairs channel i with i + D/2; llama.cpp's converter permutes a Llama k_proj so
// the pair sits at 2i, 2i + 1 (convert_hf_to_gguf.py, LlamaModel.permute), and a block of 32
// channels then holds 16 whole pairs where the model's own order puts one half of 32 pairs in it.
// Keys whose case is interleaved already (QuantContext::rope) are stored as they come; values are
// never permuted (the converter leaves v_proj alone).
class PairOrderScheme final : public Scheme {
 public:
  explicit PairOrderScheme(SchemePtr inner) : inner_(std::move(inner)) {}

  std::string spec() const override { return with_suffix(inner_->spec(), ",pair_order=adjacent"); }
  std::string family() const override { return inner_->family(); }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = inner_->check_shape(tokens, head_dim);
    if (why.empty() && head_dim % 2 != 0) {
      why = "'" + spec() + "': pair_order=adjacent needs an even head_dim (RoPE pairs); head_dim " +
            std::to_string(head_dim) + " is odd";
    }
    return why;
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override { return inner_->footprint(tokens, head_dim); }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext& ctx) const override {
    require_shape(x.rows, x.cols);
    return inner_->quantize(applies(ctx) ? reordered(x) : x, ctx);
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const override {
    require_shape(out.rows, out.cols);
    inner_->dequantize(packed, ctx, out);
    if (applies(ctx)) restore(out);
  }

  // An inner scheme whose rows round-trip alone goes 8 KiB of rows at a time, as the rotation does:
  // the reordered tile and its round trip stay in L1.
  void roundtrip(ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    if (!applies(ctx)) return inner_->roundtrip(x, ctx, out);
    if (!inner_->traits().rows_independent) {
      inner_->roundtrip(reordered(x), ctx, out);
      return restore(out);
    }
    const int64_t tile = std::max<int64_t>(1, 8192 / (x.cols * int64_t(sizeof(float))));
    const size_t floats = size_t(tile * x.cols);
    thread_local std::vector<float> scratch;  // grown, never shrunk
    if (scratch.size() < 2 * floats) scratch.resize(2 * floats);
    for (int64_t r0 = 0; r0 < x.rows; r0 += tile) {
      const int64_t rows = std::min(tile, x.rows - r0);
      const MatrixView in{scratch.data(), rows, x.cols}, back{scratch.data() + floats, rows, x.cols};
      for (int64_t r = 0; r < rows; ++r) reorder_pairs(x.row(r0 + r), in.row(r), x.cols, true);
      inner_->roundtrip(in, rows_context(ctx, r0, rows), back);
      for (int64_t r = 0; r < rows; ++r) reorder_pairs(back.row(r), out.row(r0 + r), x.cols, false);
    }
  }

  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const override {
    SchemePtr fitted = inner_->calibrate(applies(ctx) ? reordered(sample) : sample, ctx);
    return fitted == inner_ ? shared_from_this() : std::make_shared<PairOrderScheme>(fitted);
  }

  // One scale over every element is the same in any channel order (a checkpoint's k_scale).
  std::optional<double> static_scale() const override { return inner_->static_scale(); }
  std::shared_ptr<const Scheme> with_static_scale(double scale) const override {
    SchemePtr scaled = inner_->with_static_scale(scale);
    return scaled ? std::make_shared<PairOrderScheme>(std::move(scaled)) : nullptr;
  }

  // A permutation keeps dot products when the queries move with the keys.
  bool estimates_logits() const override { return inner_->estimates_logits(); }
  SchemeTraits traits() const override {
    SchemeTraits t = inner_->traits();
    t.policy_wrapper = true;
    t.device_format = false;
    return t;
  }
  void logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens, const QuantContext& ctx,
              MatrixView out) const override {
    if (!inner_->estimates_logits()) return Scheme::logits(queries, packed, tokens, ctx, out);
    if (!applies(ctx)) return inner_->logits(queries, packed, tokens, ctx, out);
    Matrix moved(queries.rows, queries.cols);
    for (int64_t r = 0; r < queries.rows; ++r) reorder_pairs(queries.row(r), moved.row(r), queries.cols, true);
    inner_->logits(moved.view(), packed, tokens, ctx, out);
  }

 private:
  static bool applies(const QuantContext& ctx) {
    return ctx.role == Role::key && (ctx.rope == nullptr || ctx.rope->convention == RopeConvention::rotate_half);
  }

  // x in the stored order, in this thread's scratch buffer until the thread's next call.
  static ConstMatrixView reordered(ConstMatrixView x) {
    thread_local std::vector<float> scratch;
    if (scratch.size() < size_t(x.size())) scratch.resize(size_t(x.size()));
    const MatrixView copy{scratch.data(), x.rows, x.cols};
    for (int64_t r = 0; r < x.rows; ++r) reorder_pairs(x.row(r), copy.row(r), x.cols, true);
    return copy;
  }

  static void restore(MatrixView x) {
    std::vector<float> row(size_t(x.cols));
    for (int64_t r = 0; r < x.rows; ++r) {
      std::copy(x.row(r), x.row(r) + x.cols, row.begin());
      reorder_pairs(row.data(), x.row(r), x.cols, false);
    }
  }

  SchemePtr inner_;
};

std::string rotation_spec(const CachePolicy& policy) {
  std::string out;
  if (policy.rotation == Rotation::hadamard) out += ",rotation=hadamard";
  if (policy.rotation == Rotation::random) out += ",rotation=random";
  if (policy.rotation == Rotation::rht) out += ",rotation=rht";
  if (policy.rotation_group > 0) out += ",rotation_group=" + std::to_string(policy.rotation_group);
  if (policy.rotation_seed > 0) out += ",rotation_seed=" + std::to_string(policy.rotation_seed);
  return out;
}

std::string token_spec(const CachePolicy& policy) {
  std::string out;
  if (policy.pre_rope) out += ",rope_stage=pre";
  if (policy.sink_tokens > 0) out += ",sink_tokens=" + std::to_string(policy.sink_tokens);
  if (policy.residual_window > 0) out += ",residual_window=" + std::to_string(policy.residual_window);
  if (policy.block_tokens > 0) out += ",block_tokens=" + std::to_string(policy.block_tokens);
  return out;
}

std::string with_suffix(const std::string& inner, const std::string& suffix) {
  return inner + (inner.find(':') == std::string::npos ? ":" + suffix.substr(1) : suffix);
}

// Sinks, append blocks, a residual window and the RoPE stage around an inner scheme. Packed layout:
// [f16 sink rows][inner block 0][inner block 1]...[f16 rows of the partial block and the window].
// With rope_stage=pre each key block is un-rotated by its positions before the inner scheme sees
// it, and RoPE is re-applied after dequantizing (KVQuant); exact rows are stored as cached.
class TokenPolicyScheme final : public Scheme {
 public:
  TokenPolicyScheme(SchemePtr inner, CachePolicy policy) : inner_(std::move(inner)), policy_(policy) {}

  std::string spec() const override { return with_suffix(inner_->spec(), token_spec(policy_)); }
  std::string family() const override { return inner_->family(); }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = Scheme::check_shape(tokens, head_dim);
    if (!why.empty()) return why;
    if (policy_.sink_tokens + policy_.residual_window >= tokens) {
      return "'" + spec() + "': sink_tokens + residual_window = " +
             std::to_string(policy_.sink_tokens + policy_.residual_window) + " leaves nothing to quantize in " +
             std::to_string(tokens) + " tokens";
    }
    const Layout l = layout(tokens);
    if (policy_.block_tokens > 0 && l.blocks == 0) {
      return "'" + spec() + "': block_tokens=" + std::to_string(policy_.block_tokens) + " is larger than the " +
             std::to_string(l.span) + " tokens between the sinks and the window";
    }
    return inner_->check_shape(l.block, head_dim);
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    const Layout l = layout(tokens);
    const int64_t exact = tokens - l.blocks * l.block;
    return static_cast<size_t>(exact * head_dim * 2) + static_cast<size_t>(l.blocks) * inner_->footprint(l.block, head_dim);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext& ctx) const override {
    require_shape(x.rows, x.cols);
    const Layout l = layout(x.rows);
    std::vector<std::byte> packed;
    packed.reserve(footprint(x.rows, x.cols));
    append_f16(packed, x.row_range(0, l.first));
    for (int64_t b = 0; b < l.blocks; ++b) {
      const int64_t r0 = l.first + b * l.block;
      const QuantContext bctx = rows_context(ctx, r0, l.block);
      with_stage(x.row_range(r0, l.block), bctx, [&](ConstMatrixView rows) {
        const std::vector<std::byte> block = inner_->quantize(rows, bctx);
        packed.insert(packed.end(), block.begin(), block.end());
      });
    }
    const int64_t tail = l.first + l.blocks * l.block;
    append_f16(packed, x.row_range(tail, x.rows - tail));
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext& ctx, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const Layout l = layout(out.rows);
    size_t at = read_f16(packed, 0, out.row(0), l.first * out.cols);
    const size_t block_bytes = inner_->footprint(l.block, out.cols);
    for (int64_t b = 0; b < l.blocks; ++b) {
      const int64_t r0 = l.first + b * l.block;
      const QuantContext bctx = rows_context(ctx, r0, l.block);
      const MatrixView rows{out.row(r0), l.block, out.cols};
      inner_->dequantize(packed.subspan(at, block_bytes), bctx, rows);
      from_stage(rows, bctx);
      at += block_bytes;
    }
    const int64_t tail = l.first + l.blocks * l.block;
    read_f16(packed, at, out.row(tail), (out.rows - tail) * out.cols);
  }

  void roundtrip(ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const Layout l = layout(x.rows);
    const int64_t tail = l.first + l.blocks * l.block;
    half_kernels::round_to_f16(x.data, out.data, l.first * x.cols);
    for (int64_t b = 0; b < l.blocks; ++b) {
      const int64_t r0 = l.first + b * l.block;
      const QuantContext bctx = rows_context(ctx, r0, l.block);
      const MatrixView rows{out.row(r0), l.block, x.cols};
      with_stage(x.row_range(r0, l.block), bctx, [&](ConstMatrixView in) { inner_->roundtrip(in, bctx, rows); });
      from_stage(rows, bctx);
    }
    half_kernels::round_to_f16(x.data + tail * x.cols, out.data + tail * x.cols, x.size() - tail * x.cols);
  }

  // The inner scheme fits its static scales on the sample as it would quantize it (pre-RoPE keys
  // for rope_stage=pre); the exact rows the policy keeps need none.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext& ctx) const override {
    SchemePtr fitted;
    with_stage(sample, ctx, [&](ConstMatrixView rows) { fitted = inner_->calibrate(rows, ctx); });
    return fitted == inner_ ? shared_from_this() : std::make_shared<TokenPolicyScheme>(fitted, policy_);
  }

  // A score estimator inside keeps estimating on its blocks; the exact rows are dotted as stored.
  // Under rope_stage=pre every token has its own RoPE, which an estimate of q.k cannot take, so
  // logits come from the dequantized keys there (Scheme::logits).
  bool estimates_logits() const override { return inner_->estimates_logits() && !policy_.pre_rope; }
  SchemeTraits traits() const override {
    SchemeTraits t = inner_->traits();
    // The inner scheme's declared trait, not estimates_logits(): a plugin declares an estimator it
    // cannot score through (no logits callback in the ABI), and the checks must still see it.
    t.estimates_logits = t.estimates_logits && !policy_.pre_rope;
    t.rows_independent = false;  // sinks and the recent window are rows by their index
    t.row_block = 0;
    t.policy_wrapper = true;
    t.device_format = false;
    t.needs_positions |= policy_.pre_rope;
    t.needs_rope |= policy_.pre_rope;
    return t;
  }
  void logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens, const QuantContext& ctx,
              MatrixView out) const override {
    if (!estimates_logits()) return Scheme::logits(queries, packed, tokens, ctx, out);
    require_packed(packed, tokens, queries.cols);
    const Layout l = layout(tokens);
    const int64_t d = queries.cols, tail = l.first + l.blocks * l.block;
    std::vector<float> row(static_cast<size_t>(d));
    auto exact_rows = [&](int64_t first, int64_t count, size_t at) {
      for (int64_t j = first; j < first + count; ++j, at += size_t(d) * 2) {
        read_f16(packed, at, row.data(), d);
        for (int64_t i = 0; i < queries.rows; ++i) {
          double dot = 0.0;
          for (int64_t c = 0; c < d; ++c) dot += double(queries(i, c)) * double(row[size_t(c)]);
          out(i, j) = static_cast<float>(dot);
        }
      }
    };
    exact_rows(0, l.first, 0);
    size_t at = size_t(l.first * d) * 2;
    const size_t block_bytes = inner_->footprint(l.block, d);
    Matrix part(queries.rows, l.block);
    for (int64_t b = 0; b < l.blocks; ++b, at += block_bytes) {
      const int64_t r0 = l.first + b * l.block;
      inner_->logits(queries, packed.subspan(at, block_bytes), l.block, rows_context(ctx, r0, l.block), part);
      for (int64_t i = 0; i < queries.rows; ++i) std::copy(part.row(i), part.row(i) + l.block, out.row(i) + r0);
    }
    exact_rows(tail, tokens - tail, at);
  }

 private:
  // Rows [first, first + blocks * block) are quantized in `blocks` blocks of `block` tokens.
  struct Layout {
    int64_t first, span, block, blocks;
  };

  Layout layout(int64_t tokens) const {
    const int64_t first = std::min(policy_.sink_tokens, tokens);
    const int64_t span = std::max<int64_t>(0, tokens - first - policy_.residual_window);
    const int64_t block = policy_.block_tokens > 0 ? policy_.block_tokens : span;
    return {first, span, block, block > 0 ? span / block : 0};
  }

  bool pre_rope_applies(const QuantContext& ctx) const { return policy_.pre_rope && ctx.role == Role::key; }

  // Calls f with the rows the inner scheme quantizes: as cached, or (rope_stage=pre, keys) a copy
  // with RoPE undone.
  template <class F>
  void with_stage(ConstMatrixView rows, const QuantContext& ctx, F&& f) const {
    if (!pre_rope_applies(ctx)) return f(rows);
    if (ctx.rope == nullptr || !ctx.rope->enabled || static_cast<int64_t>(ctx.positions.size()) < rows.rows) {
      throw InputError("'" + spec() + "': rope_stage=pre needs keys that carry RoPE (a workload with [workload.rope]) "
                       "and their positions");
    }
    Matrix staged = copy_of(rows);
    apply_rope(staged, ctx.positions, *ctx.rope, /*inverse=*/true);
    f(staged.view());
  }

  // Re-applies RoPE to dequantized pre-RoPE keys.
  void from_stage(MatrixView rows, const QuantContext& ctx) const {
    if (pre_rope_applies(ctx)) apply_rope(rows, ctx.positions, *ctx.rope);
  }

  // The exact rows as f16 codes in host byte order, converted in bulk (F16C where present).
  static void append_f16(std::vector<std::byte>& packed, ConstMatrixView rows) {
    if (rows.size() == 0) return;  // no rows: no buffer (a null data() must not reach memcpy)
    std::vector<uint16_t> codes(static_cast<size_t>(rows.size()));
    half_kernels::f32_to_f16(rows.data, codes.data(), rows.size());
    const auto* b = reinterpret_cast<const std::byte*>(codes.data());
    packed.insert(packed.end(), b, b + codes.size() * 2);
  }

  static size_t read_f16(std::span<const std::byte> packed, size_t at, float* out, int64_t n) {
    if (n == 0) return at;
    std::vector<uint16_t> codes(static_cast<size_t>(n));
    std::memcpy(codes.data(), packed.data() + at, codes.size() * 2);
    half_kernels::f16_to_f32(codes.data(), out, n);
    return at + codes.size() * 2;
  }

  SchemePtr inner_;
  CachePolicy policy_;
};

}  // namespace

const std::vector<ParamDomain>& policy_domains() {
  static const std::vector<ParamDomain> domains = {
      {.name = "rotation", .kind = ParamDomain::Kind::choice,
       .help = "policy: rotate channel groups before quantizing and back after (hadamard = normalized "
               "Walsh-Hadamard, as llama.cpp does for quantized caches; random = a Haar random orthogonal matrix "
               "of head_dim, seeded by rotation_seed; rht = vLLM's randomized Hadamard transform of the whole "
               "head, H(s*x) with vLLM's fixed signs s, as its int4_per_token_head cache; needs a power-of-two "
               "head_dim)",
       .default_value = "none", .choices = {"none", "hadamard", "random", "rht"}},
      {.name = "rotation_group", .kind = ParamDomain::Kind::integer,
       .help = "policy: channels per rotation group (power of two); unset = llama.cpp's choice: K the largest "
               "power of two >= 64 dividing head_dim, V 64",
       .min = 2, .max = 4096, .power_of_two = true, .examples = {"64", "128"}},
      {.name = "rotation_seed", .kind = ParamDomain::Kind::integer,
       .help = "policy: seed of the rotation=random matrix (one rotation per model, not per case)",
       .default_value = "0", .min = 0, .max = 4294967295LL, .examples = {"0", "7"}},
      {.name = "rope_stage", .kind = ParamDomain::Kind::choice,
       .help = "policy: quantize keys as cached (post RoPE) or before RoPE, re-applying it after dequantizing "
               "(KVQuant); values are never rotated",
       .default_value = "post", .choices = {"post", "pre"}, .keys_only = true},
      {.name = "pair_order", .kind = ParamDomain::Kind::choice,
       .help = "policy: the channel order keys are stored in: as_computed = the model's own, adjacent = each RoPE "
               "pair in neighbouring channels (2i, 2i + 1), as llama.cpp stores a Llama model's keys (its converter "
               "permutes k_proj); keys of a rotate_half case are permuted, interleaved ones already are; values are "
               "never permuted",
       .default_value = "as_computed", .choices = {"as_computed", "adjacent"}, .keys_only = true},
      {.name = "sink_tokens", .kind = ParamDomain::Kind::integer,
       .help = "policy: the first N tokens are kept exact (stored f16)", .min = 0, .max = 1 << 20,
       .examples = {"4"}},
      {.name = "residual_window", .kind = ParamDomain::Kind::integer,
       .help = "policy: the most recent N tokens are kept exact (stored f16), as KIVI's residual", .min = 0,
       .max = 1 << 24, .examples = {"32", "128"}},
      {.name = "block_tokens", .kind = ParamDomain::Kind::integer,
       .help = "policy: tokens per append block; each full block is quantized on its own (per-channel statistics "
               "per block), a partially filled last block stays f16 until it fills",
       .min = 1, .max = 1 << 24, .examples = {"32", "128"}},
  };
  return domains;
}

CachePolicy policy_from_values(const std::vector<std::pair<std::string, std::string>>& values) {
  CachePolicy p;
  for (const auto& [key, value] : values) {
    if (key == "rotation") {
      p.rotation = value == "hadamard" ? Rotation::hadamard
                   : value == "random" ? Rotation::random
                   : value == "rht"    ? Rotation::rht
                                       : Rotation::none;
    }
    if (key == "rotation_group") p.rotation_group = std::stoll(value);
    if (key == "rotation_seed") p.rotation_seed = std::stoull(value);
    if (key == "sink_tokens") p.sink_tokens = std::stoll(value);
    if (key == "residual_window") p.residual_window = std::stoll(value);
    if (key == "block_tokens") p.block_tokens = std::stoll(value);
    if (key == "rope_stage") p.pre_rope = value == "pre";
    if (key == "pair_order") p.adjacent_pairs = value == "adjacent";
  }
  if (p.rotation == Rotation::rht && p.rotation_group > 0) {
    throw InputError("'rotation_group' is refused with rotation=rht: vLLM's randomized Hadamard transform rotates "
                     "the whole head (rotation_group needs rotation=hadamard)");
  }
  if (p.rotation == Rotation::rht && p.rotation_seed > 0) {
    throw InputError("'rotation_seed' is refused with rotation=rht: its signs are vLLM's fixed ones (torch's CPU "
                     "generator seeded with 0x9E3779B9); rotation_seed needs rotation=random");
  }
  if (p.rotation != Rotation::hadamard && p.rotation_group > 0) {
    throw InputError("'rotation_group' needs rotation=hadamard (rotation=random rotates all of head_dim)");
  }
  if (p.rotation != Rotation::random && p.rotation_seed > 0) {
    throw InputError("'rotation_seed' needs rotation=random");
  }
  return p;
}

std::optional<std::pair<std::string, std::string>> policy_key_requirement(std::string_view key) {
  if (key == "rotation_group") return std::pair<std::string, std::string>{"rotation", "hadamard"};
  if (key == "rotation_seed") return std::pair<std::string, std::string>{"rotation", "random"};
  return std::nullopt;
}

std::string policy_spec(const CachePolicy& policy) {
  return rotation_spec(policy) + (policy.adjacent_pairs ? ",pair_order=adjacent" : "") + token_spec(policy);
}

SchemePtr apply_policy(SchemePtr inner, const CachePolicy& policy) {
  if (policy.rotates()) inner = std::make_shared<RotatedScheme>(std::move(inner), policy);
  if (policy.adjacent_pairs) inner = std::make_shared<PairOrderScheme>(std::move(inner));
  if (policy.pre_rope || policy.splits_tokens()) inner = std::make_shared<TokenPolicyScheme>(std::move(inner), policy);
  return inner;
}

void reorder_pairs(const float* x, float* out, int64_t head_dim, bool to_pairs) {
  const int64_t half = head_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    if (to_pairs) {
      out[2 * i] = x[i];
      out[2 * i + 1] = x[i + half];
    } else {
      out[i] = x[2 * i];
      out[i + half] = x[2 * i + 1];
    }
  }
}

int64_t llama_cpp_rotation_group(Role role, int64_t head_dim) {
  if (role == Role::value) return head_dim % 64 == 0 ? 64 : 0;
  int64_t best = 0;
  for (int64_t g = 64; g <= head_dim; g *= 2) {
    if (head_dim % g == 0) best = g;
  }
  return best;
}

}  // namespace kvtune
