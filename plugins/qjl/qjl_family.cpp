// The `qjl` family: a key-score estimator, not a quantizer (QJL, Zandieh, Daliri, Han 2024,
// arXiv:2406.03482). Per token it stores sign(S k), one bit per sketch dimension, and ||k||;
// logits() estimates q.k = c ||k|| <S q, sign(S k)> without reconstructing k (qjl_sketch.h), and
// the evaluator takes that path (estimates_logits). dequantize returns the estimator's own
// reconstruction khat = c ||k|| S^T sign(S k), for which q.khat is the same estimate for every q,
// so a V role or a path through dequantize sees the same scores. Details: docs/schemes.md.
#include <cmath>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"
#include "qjl_sketch.h"

namespace kvtune::builtin {
namespace {

struct QjlConfig {
  int64_t sketch = 0;  // m; 0 = head_dim
  bool orthogonal = false;
  ScaleType norm_type = ScaleType::f16;
  uint64_t seed = 0;
};

// Packed [T, D] block: [T norms][T x m sign bits, token-major, bit = 1 for (S k)_i >= 0].
class QjlScheme final : public Scheme {
 public:
  QjlScheme(std::string spec, QjlConfig c) : spec_(std::move(spec)), c_(c) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return "qjl"; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string why = Scheme::check_shape(tokens, head_dim);
    if (!why.empty()) return why;
    if (head_dim > 1024) return "'" + spec_ + "': head_dim " + std::to_string(head_dim) + " is above 1024";
    if (c_.orthogonal && sketch(head_dim) > head_dim) {
      return "'" + spec_ + "': an orthogonal sketch of " + std::to_string(sketch(head_dim)) +
             " rows needs head_dim >= that, not " + std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return size_t(tokens * codec::scale_bytes(c_.norm_type) + codec::packed_code_bytes(tokens * sketch(head_dim), 1));
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    const int64_t m = sketch(x.cols);
    const std::vector<double> s = qjl::projection(m, x.cols, c_.seed, c_.orthogonal);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* norms = reinterpret_cast<uint8_t*>(packed.data());
    uint8_t* bits = norms + x.rows * codec::scale_bytes(c_.norm_type);
    for (int64_t r = 0; r < x.rows; ++r) {
      double norm = 0.0;
      for (int64_t c = 0; c < x.cols; ++c) norm += double(x(r, c)) * double(x(r, c));
      codec::write_scale(norms, r, codec::stored_scale(static_cast<float>(std::sqrt(norm)), c_.norm_type), c_.norm_type);
      for (int64_t i = 0; i < m; ++i) {
        double dot = 0.0;
        for (int64_t c = 0; c < x.cols; ++c) dot += s[size_t(i * x.cols + c)] * double(x(r, c));
        codec::pack_code(bits, r * m + i, 1, dot >= 0.0 ? 1u : 0u);
      }
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const int64_t m = sketch(out.cols), d = out.cols;
    const std::vector<double> s = qjl::projection(m, d, c_.seed, c_.orthogonal);
    const double c = qjl::estimator_constant(m, d, c_.orthogonal);
    std::vector<double> acc(static_cast<size_t>(d));
    for (int64_t r = 0; r < out.rows; ++r) {
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t i = 0; i < m; ++i) {
        const double sign = sign_at(packed, out.rows, m, r, i);
        for (int64_t k = 0; k < d; ++k) acc[size_t(k)] += sign * s[size_t(i * d + k)];
      }
      const double scale = c * norm_at(packed, r);
      for (int64_t k = 0; k < d; ++k) out(r, k) = static_cast<float>(scale * acc[size_t(k)]);
    }
  }

  bool estimates_logits() const override { return true; }

  // logits(i, j) = c ||k_j|| <S q_i, sign(S k_j)>: S q_i once per query, then m sign flips per key.
  void logits(ConstMatrixView queries, std::span<const std::byte> packed, int64_t tokens, const QuantContext&,
              MatrixView out) const override {
    require_packed(packed, tokens, queries.cols);
    const int64_t m = sketch(queries.cols), d = queries.cols;
    const std::vector<double> s = qjl::projection(m, d, c_.seed, c_.orthogonal);
    const double c = qjl::estimator_constant(m, d, c_.orthogonal);
    std::vector<double> sq(static_cast<size_t>(m));
    for (int64_t q = 0; q < queries.rows; ++q) {
      for (int64_t i = 0; i < m; ++i) {
        double dot = 0.0;
        for (int64_t k = 0; k < d; ++k) dot += s[size_t(i * d + k)] * double(queries(q, k));
        sq[size_t(i)] = dot;
      }
      for (int64_t j = 0; j < tokens; ++j) {
        double dot = 0.0;
        for (int64_t i = 0; i < m; ++i) dot += sign_at(packed, tokens, m, j, i) * sq[size_t(i)];
        out(q, j) = static_cast<float>(c * norm_at(packed, j) * dot);
      }
    }
  }

 private:
  int64_t sketch(int64_t head_dim) const { return c_.sketch > 0 ? c_.sketch : head_dim; }

  double norm_at(std::span<const std::byte> packed, int64_t row) const {
    return codec::read_scale(reinterpret_cast<const uint8_t*>(packed.data()), row, c_.norm_type);
  }

  double sign_at(std::span<const std::byte> packed, int64_t tokens, int64_t m, int64_t row, int64_t i) const {
    const auto* bits = reinterpret_cast<const uint8_t*>(packed.data()) + tokens * codec::scale_bytes(c_.norm_type);
    return codec::unpack_code(bits, row * m + i, 1) != 0 ? 1.0 : -1.0;
  }

  std::string spec_;
  QjlConfig c_;
};

SchemePtr make_qjl(const SchemeParams& p) {
  QjlConfig c;
  c.sketch = p.has("sketch") ? p.integer("sketch") : 0;
  c.orthogonal = p.choice("projection") == "orthogonal";
  c.norm_type = p.choice("norm") == "f32" ? ScaleType::f32 : ScaleType::f16;
  c.seed = static_cast<uint64_t>(p.integer("seed"));
  return std::make_shared<QjlScheme>(p.canonical(), c);
}

}  // namespace

void register_qjl_family(Registry& registry) {
  FamilyInfo f;
  f.name = "qjl";
  f.summary = "QJL-like key-score estimator: 1-bit sign sketch of S k plus ||k||; estimates q.k without "
              "reconstructing k (research scheme, CPU only)";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = {
      {.name = "sketch", .kind = ParamDomain::Kind::integer,
       .help = "sketch dimensions m (sign bits per token); unset = head_dim", .min = 1, .max = 4096,
       .examples = {"32"}},
      {.name = "projection", .kind = ParamDomain::Kind::choice,
       .help = "S: i.i.d. N(0,1) entries (gaussian, the paper's) or sqrt(head_dim) x rows of a Haar orthogonal "
               "matrix (orthogonal, m <= head_dim)",
       .default_value = "gaussian", .choices = {"gaussian", "orthogonal"}},
      {.name = "norm", .kind = ParamDomain::Kind::choice, .help = "dtype of each token's stored ||k||",
       .default_value = "f16", .choices = {"f16", "f32"}},
      {.name = "seed", .kind = ParamDomain::Kind::integer,
       .help = "seed of S (one per model; the case seed is not used)", .default_value = "0", .min = 0,
       .max = 4294967295LL, .examples = {"0"}},
  };
  f.make = make_qjl;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
