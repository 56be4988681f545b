// The `turboquant` family: TurboQuant-style vector quantization of each token's key or value
// (Zandieh, Daliri, Hadian, Mirrokni 2025, "TurboQuant: Online Vector Quantization with
// Near-optimal Distortion Rate", arXiv:2504.19874; the MSE variant). Per token and per channel
// set: store a scale, rotate the unit direction by a seeded Haar matrix, and code each rotated
// coordinate with the Lloyd-Max quantizer of its exact distribution. `outliers=N` splits the
// channels as the paper's KV-cache experiments do: the N channels with the largest mean |x| in the
// block form a second set, coded the same way at `outlier_bits`. Written against the public
// interface only; formulas, layout and bit accounting: docs/schemes.md.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/random_rotation.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "lloyd_max.h"

namespace kvtune::builtin {
namespace {

using turboquant::Codebook;

constexpr int64_t kMaxHeadDim = 1024;  // the Haar matrix costs O(d^3) to build once

struct Config {
  int bits = 3, outlier_bits = 4;
  int64_t outliers = 0;
  ScaleType scale_type = ScaleType::f16;
  uint64_t seed = 0;
};

// Offsets of the parts of a packed [T, D] block:
// [N u16 outlier channels][T x sets scales][T (D-N) codes at bits][T N codes at outlier_bits].
struct Layout {
  int64_t tokens, regular, outliers, sets;
  size_t scales, regular_codes, outlier_codes, total;
};

class TurboQuantScheme final : public Scheme {
 public:
  TurboQuantScheme(std::string spec, Config c) : spec_(std::move(spec)), c_(c) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "turboquant"; }
  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.rotates_rows = true;  // the unit direction is coded in a seeded Haar basis
    // The outlier set is picked again on a round trip, whose channel means differ: another set
    // (and with it every channel's codes) can win the second time.
    t.requantize_drifts = c_.outliers > 0;
    return t;
  }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = Scheme::check_shape(tokens, head_dim);
    if (!why.empty()) return why;
    if (head_dim > kMaxHeadDim) {
      return "'" + spec_ + "': head_dim " + std::to_string(head_dim) + " is above " + std::to_string(kMaxHeadDim);
    }
    if (c_.outliers >= head_dim) {
      return "'" + spec_ + "': outliers=" + std::to_string(c_.outliers) + " leaves no regular channel in head_dim " +
             std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override { return layout(tokens, head_dim).total; }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const Layout l = layout(x.rows, x.cols);
    std::vector<std::byte> packed(l.total);
    auto* base = reinterpret_cast<uint8_t*>(packed.data());
    const std::vector<int64_t> outliers = pick_outliers(x);
    for (size_t i = 0; i < outliers.size(); ++i) {
      const uint16_t index = static_cast<uint16_t>(outliers[i]);
      std::memcpy(base + 2 * i, &index, 2);
    }
    const std::vector<int64_t> regular = complement(outliers, x.cols);
    std::vector<float> part;
    for (int64_t r = 0; r < x.rows; ++r) {
      gather(x.row(r), regular, part);
      encode(part, c_.bits, base + l.scales, r * l.sets, base + l.regular_codes, r * l.regular);
      if (l.outliers == 0) continue;
      gather(x.row(r), outliers, part);
      encode(part, c_.outlier_bits, base + l.scales, r * l.sets + 1, base + l.outlier_codes, r * l.outliers);
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const Layout l = layout(out.rows, out.cols);
    const auto* base = reinterpret_cast<const uint8_t*>(packed.data());
    std::vector<int64_t> outliers(size_t(l.outliers));
    for (size_t i = 0; i < outliers.size(); ++i) {
      uint16_t index;
      std::memcpy(&index, base + 2 * i, 2);
      if (index >= out.cols) throw InputError("'" + spec_ + "': packed outlier channel " + std::to_string(index) +
                                              " is outside head_dim " + std::to_string(out.cols));
      outliers[i] = index;
    }
    const std::vector<int64_t> regular = complement(outliers, out.cols);
    std::vector<float> part;
    for (int64_t r = 0; r < out.rows; ++r) {
      decode(c_.bits, base + l.scales, r * l.sets, base + l.regular_codes, r * l.regular, l.regular, part);
      scatter(part, regular, out.row(r));
      if (l.outliers == 0) continue;
      decode(c_.outlier_bits, base + l.scales, r * l.sets + 1, base + l.outlier_codes, r * l.outliers, l.outliers, part);
      scatter(part, outliers, out.row(r));
    }
  }

 private:
  Layout layout(int64_t tokens, int64_t head_dim) const {
    Layout l;
    l.tokens = tokens;
    l.outliers = c_.outliers;
    l.regular = head_dim - c_.outliers;
    l.sets = c_.outliers > 0 ? 2 : 1;
    l.scales = size_t(2 * c_.outliers);
    l.regular_codes = l.scales + size_t(tokens * l.sets * codec::scale_bytes(c_.scale_type));
    l.outlier_codes = l.regular_codes + size_t(codec::packed_code_bytes(tokens * l.regular, c_.bits));
    l.total = l.outlier_codes + size_t(codec::packed_code_bytes(tokens * l.outliers, c_.outlier_bits));
    return l;
  }

  // The N channels with the largest mean |x| over the block's tokens (ties: the lower channel),
  // ascending. Mean |x| sees both scale outliers and offset channels.
  std::vector<int64_t> pick_outliers(ConstMatrixView x) const {
    std::vector<double> weight(size_t(x.cols), 0.0);
    for (int64_t r = 0; r < x.rows; ++r) {
      for (int64_t c = 0; c < x.cols; ++c) weight[size_t(c)] += std::abs(double(x(r, c)));
    }
    std::vector<int64_t> order(size_t(x.cols));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return weight[size_t(a)] > weight[size_t(b)]; });
    order.resize(size_t(c_.outliers));
    std::sort(order.begin(), order.end());
    return order;
  }

  static std::vector<int64_t> complement(const std::vector<int64_t>& chosen, int64_t d) {
    std::vector<int64_t> rest;
    for (int64_t c = 0; c < d; ++c) {
      if (!std::binary_search(chosen.begin(), chosen.end(), c)) rest.push_back(c);
    }
    return rest;
  }

  static void gather(const float* row, const std::vector<int64_t>& channels, std::vector<float>& part) {
    part.resize(channels.size());
    for (size_t i = 0; i < channels.size(); ++i) part[i] = row[channels[i]];
  }

  static void scatter(const std::vector<float>& part, const std::vector<int64_t>& channels, float* row) {
    for (size_t i = 0; i < channels.size(); ++i) row[channels[i]] = part[i];
  }

  // One set of d channels of one token: y = Q x / ||x||, codes c_i = code(y_i), and the scale
  // gamma = ||x|| / <y, yhat>, so that the reconstruction gamma Q^T yhat has exactly x's projection
  // on x (<xhat, x> = ||x||^2). Lloyd-Max codes shrink (<y, yhat> ~ 1 - distortion); a stored
  // ||x|| would carry that shrinkage into every logit, this costs the same bits.
  void encode(const std::vector<float>& x, int bits, uint8_t* scales, int64_t scale_index, uint8_t* codes,
              int64_t first_code) const {
    const int64_t d = int64_t(x.size());
    double norm = 0.0;
    for (float v : x) norm += double(v) * double(v);
    norm = std::sqrt(norm);
    if (norm == 0.0) {  // codes stay 0; a zero scale decodes to zeros
      codec::write_scale(scales, scale_index, 0.0f, c_.scale_type);
      return;
    }
    const auto q = haar_rotation(d, c_.seed);
    const auto book = turboquant::sphere_codebook(d, bits);
    double dot = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      double y = 0.0;
      for (int64_t j = 0; j < d; ++j) y += (*q)[size_t(i * d + j)] * double(x[size_t(j)]);
      y /= norm;
      const uint32_t code = book->code(y);
      codec::pack_code(codes, first_code + i, bits, code);
      dot += y * book->levels[code];
    }
    const float gamma = codec::stored_scale(static_cast<float>(norm / dot), c_.scale_type);
    codec::write_scale(scales, scale_index, gamma, c_.scale_type);
  }

  void decode(int bits, const uint8_t* scales, int64_t scale_index, const uint8_t* codes, int64_t first_code,
              int64_t d, std::vector<float>& out) const {
    out.assign(size_t(d), 0.0f);
    const double gamma = codec::read_scale(scales, scale_index, c_.scale_type);
    if (gamma == 0.0) return;
    const auto q = haar_rotation(d, c_.seed);
    const auto book = turboquant::sphere_codebook(d, bits);
    std::vector<double> acc(size_t(d), 0.0);
    for (int64_t i = 0; i < d; ++i) {  // x = gamma Q^T yhat
      const double y = book->levels[codec::unpack_code(codes, first_code + i, bits)];
      for (int64_t j = 0; j < d; ++j) acc[size_t(j)] += (*q)[size_t(i * d + j)] * y;
    }
    for (int64_t j = 0; j < d; ++j) out[size_t(j)] = static_cast<float>(gamma * acc[size_t(j)]);
  }

  std::string spec_;
  Config c_;
};

SchemePtr make_turboquant(const SchemeParams& p) {
  Config c;
  c.bits = static_cast<int>(p.integer("bits"));
  c.outliers = p.integer("outliers");
  c.scale_type = p.choice("norm") == "f32" ? ScaleType::f32 : ScaleType::f16;
  c.seed = static_cast<uint64_t>(p.integer("seed"));
  if (p.has("outlier_bits")) {
    if (c.outliers == 0) throw InputError("scheme spec '" + p.canonical() + "': 'outlier_bits' needs outliers > 0");
    c.outlier_bits = static_cast<int>(p.integer("outlier_bits"));
  } else {
    c.outlier_bits = std::min(c.bits + 1, 4);
  }
  return std::make_shared<TurboQuantScheme>(p.canonical(), c);
}

}  // namespace

void register_turboquant_family(Registry& registry) {
  FamilyInfo f;
  f.name = "turboquant";
  f.summary = "TurboQuant-style: per-token scale, seeded Haar rotation, Lloyd-Max codes per rotated coordinate, "
              "optional outlier channels at more bits (research scheme, CPU only)";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = {
      {.name = "bits", .kind = ParamDomain::Kind::integer, .help = "bits per rotated coordinate of the regular channels",
       .default_value = "3", .min = 1, .max = 4, .in_canonical = true},
      {.name = "outliers", .kind = ParamDomain::Kind::integer,
       .help = "channels per block coded apart at outlier_bits: the N with the largest mean |x| in the block "
               "(indices stored per block, 16 bits each)",
       .default_value = "0", .min = 0, .max = kMaxHeadDim - 1, .examples = {"0", "2"}},
      {.name = "outlier_bits", .kind = ParamDomain::Kind::integer,
       .help = "bits per rotated coordinate of the outlier channels; unset = bits + 1 (at most 4, as bits)",
       .min = 1, .max = 4,
       .examples = {"4"}},
      {.name = "norm", .kind = ParamDomain::Kind::choice, .help = "dtype of each token's per-set scale",
       .default_value = "f16", .choices = {"f16", "f32"}},
      {.name = "seed", .kind = ParamDomain::Kind::integer,
       .help = "seed of the Haar rotation (one per model; the case seed is not used)", .default_value = "0", .min = 0,
       .max = 4294967295LL, .examples = {"0"}},
  };
  f.make = make_turboquant;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
