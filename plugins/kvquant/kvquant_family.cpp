// The `kvquant` family: KVQuant's non-uniform, dense-and-sparse KV cache (Hooper et al. 2024,
// "KVQuant: Towards 10 Million Context Length LLM Inference with KV Cache Quantization", NeurIPS
// 2024). Keys: one codebook of 2^bits f16 centroids per channel, fitted by 1-D k-means on
// calibration keys (on the block itself until calibrated). Values: each token normalized to
// [0, 1] by its f16 minimum and maximum, then one shared codebook with 0 and 1 pinned. In every
// vector (a key channel, a value token) the `outliers` % entries of largest magnitude are kept
// exact (f16) in a sparse list. Pre-RoPE keys and exact first tokens are the cache policy's
// rope_stage=pre and sink_tokens (kvtune/policy.h), which the registry applies around any scheme.
// Written against the public headers only, as an outside author would.
//
// Packed layout of a [T, D] block, L = 2^bits, n = outliers per vector, iw = index bytes:
//   role=k: [D x L f16 codebooks][ceil(T*D*bits/8) codes][per channel: n x (iw-byte row, f16 value)]
//           n = round(outliers% * T), iw = 1, 2 or 4 bytes as T <= 2^8, 2^16 or more
//   role=v: [L f16 codebook][T f16 minima][T f16 maxima][codes][per token: n x (iw-byte col, f16)]
//           n = round(outliers% * D), iw from D
// Codes are a little-endian bit stream in row-major order (kvtune/codecs/int_codec.h); an outlier
// keeps its (unused) code slot, as a dense matrix beside a sparse one does. The count per vector is
// fixed, so no row pointers are needed and the footprint depends on the shape only.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvquant_math.h"
#include "kvtune/codecs/int_codec.h"
#include "kvtune/codecs/scale_storage.h"
#include "kvtune/error.h"
#include "kvtune/numeric/half.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

// f16 as stored: saturated to the largest finite f16 rather than overflowing to infinity.
float to_f16(float v) { return codec::stored_scale(v, ScaleType::f16); }

void put_f16(uint8_t*& out, float v) {
  const uint16_t h = f32_to_f16_bits(v);
  std::memcpy(out, &h, 2);
  out += 2;
}
float get_f16(const uint8_t*& in) {
  uint16_t h;
  std::memcpy(&h, in, 2);
  in += 2;
  return f16_bits_to_f32(h);
}
void put_index(uint8_t*& out, int64_t i, int width) {
  for (int b = 0; b < width; ++b) *out++ = static_cast<uint8_t>(static_cast<uint64_t>(i) >> (8 * b));
}
int64_t get_index(const uint8_t*& in, int width) {
  uint64_t i = 0;
  for (int b = 0; b < width; ++b) i |= static_cast<uint64_t>(*in++) << (8 * b);
  return static_cast<int64_t>(i);
}

// The smallest unsigned width that holds an index below len.
int index_bytes(int64_t len) { return len <= 256 ? 1 : (len <= 65536 ? 2 : 4); }

// Nearest centroid of an ascending codebook; the lower code on a tie.
uint32_t nearest(const float* book, int levels, float v) {
  uint32_t best = 0;
  float best_d = std::abs(v - book[0]);
  for (int k = 1; k < levels; ++k) {
    const float d = std::abs(v - book[k]);
    if (d < best_d) best_d = d, best = static_cast<uint32_t>(k);
  }
  return best;
}

class KvquantScheme final : public Scheme {
 public:
  KvquantScheme(std::string spec, int bits, Role role, double percent)
      : spec_(std::move(spec)), bits_(bits), role_(role), percent_(percent) {}

  // The spec names the configuration; a calibrated copy keeps it and carries its fitted codebooks
  // as state (they cannot be spelled in a spec), so registry.make(spec()) is the uncalibrated
  // scheme, which fits on each block.
  std::string spec() const override { return spec_; }
  std::string family() const override { return "kvquant"; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (role_ == Role::key && !books_.empty() && static_cast<int64_t>(books_.size()) != head_dim * levels()) {
      return "'" + spec_ + "': calibrated on head_dim " + std::to_string(books_.size() / size_t(levels())) +
             ", given head_dim " + std::to_string(head_dim);
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    const int64_t codes = codec::packed_code_bytes(tokens * head_dim, bits_);
    if (role_ == Role::key) {
      const int64_t sparse = head_dim * outliers(tokens) * (index_bytes(tokens) + 2);
      return static_cast<size_t>(head_dim * levels() * 2 + codes + sparse);
    }
    const int64_t sparse = tokens * outliers(head_dim) * (index_bytes(head_dim) + 2);
    return static_cast<size_t>(levels() * 2 + tokens * 4 + codes + sparse);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    auto* out = reinterpret_cast<uint8_t*>(packed.data());
    const Matrix stored = stored_f16(x);
    const std::vector<std::vector<int64_t>> sparse = select_sparse(stored);
    const std::vector<char> is_sparse = mask(sparse, x.rows, x.cols);
    uint8_t* codes = nullptr;
    if (role_ == Role::key) {
      const std::vector<float> books = books_.empty() ? fit_key_books(x, is_sparse) : books_;
      for (float c : books) put_f16(out, c);
      codes = out;
      for (int64_t r = 0; r < x.rows; ++r) {
        for (int64_t c = 0; c < x.cols; ++c) {
          codec::pack_code(codes, r * x.cols + c, bits_, nearest(&books[size_t(c * levels())], levels(), x(r, c)));
        }
      }
    } else {
      const Normalized n = normalize(x, is_sparse);
      const std::vector<float> book = books_.empty() ? fit_value_book(n) : books_;
      for (float c : book) put_f16(out, c);
      for (float v : n.lo) put_f16(out, v);
      for (float v : n.hi) put_f16(out, v);
      codes = out;
      for (int64_t i = 0; i < x.size(); ++i) codec::pack_code(codes, i, bits_, nearest(book.data(), levels(), n.u[size_t(i)]));
    }
    out = codes + codec::packed_code_bytes(x.size(), bits_);
    const int width = index_bytes(role_ == Role::key ? x.rows : x.cols);
    for (size_t v = 0; v < sparse.size(); ++v) {
      for (int64_t i : sparse[v]) {
        put_index(out, i, width);
        put_f16(out, role_ == Role::key ? stored(i, int64_t(v)) : stored(int64_t(v), i));
      }
    }
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView y) const override {
    require_packed(packed, y.rows, y.cols);
    const auto* in = reinterpret_cast<const uint8_t*>(packed.data());
    const int64_t n_books = role_ == Role::key ? y.cols : 1;
    std::vector<float> books(static_cast<size_t>(n_books * levels()));
    for (float& c : books) c = get_f16(in);
    std::vector<float> lo, hi;
    if (role_ == Role::value) {
      lo.resize(size_t(y.rows)), hi.resize(size_t(y.rows));
      for (float& v : lo) v = get_f16(in);
      for (float& v : hi) v = get_f16(in);
    }
    const uint8_t* codes = in;
    for (int64_t r = 0; r < y.rows; ++r) {
      for (int64_t c = 0; c < y.cols; ++c) {
        const uint32_t code = codec::unpack_code(codes, r * y.cols + c, bits_);
        if (role_ == Role::key) {
          y(r, c) = books[size_t(c * levels()) + code];
        } else {
          const float l = lo[size_t(r)];
          y(r, c) = l + books[code] * (hi[size_t(r)] - l);  // x' = min + centroid * (max - min)
        }
      }
    }
    in = codes + codec::packed_code_bytes(y.size(), bits_);
    const int64_t vectors = role_ == Role::key ? y.cols : y.rows;
    const int64_t len = role_ == Role::key ? y.rows : y.cols;
    const int width = index_bytes(len);
    for (int64_t v = 0; v < vectors; ++v) {
      for (int64_t k = 0; k < outliers(len); ++k) {
        const int64_t i = get_index(in, width);
        if (i >= len) throw InputError("'" + spec_ + "': sparse index " + std::to_string(i) + " out of range");
        (role_ == Role::key ? y(i, v) : y(v, i)) = get_f16(in);
      }
    }
  }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.static_scales = true;  // codebooks fitted by calibrate()
    t.role = role_;
    // Uncalibrated values re-fit the shared codebook on each block, and a round trip's entries no
    // longer sit on the old centroids once the sparse ones are taken out: it moves (tests below).
    t.requantize_drifts = role_ == Role::value && books_.empty() && percent_ > 0.0;
    return t;
  }

  // Keys: a codebook per channel fitted on the sample's dense entries; values: the shared
  // codebook fitted on the sample's normalized dense entries. Used for every later block.
  std::shared_ptr<const Scheme> calibrate(ConstMatrixView sample, const QuantContext&) const override {
    require_shape(sample.rows, sample.cols);
    const std::vector<char> is_sparse = mask(select_sparse(stored_f16(sample)), sample.rows, sample.cols);
    auto fitted = std::make_shared<KvquantScheme>(spec_, bits_, role_, percent_);
    fitted->books_ = role_ == Role::key ? fit_key_books(sample, is_sparse) : fit_value_book(normalize(sample, is_sparse));
    return fitted;
  }

 private:
  int levels() const { return 1 << bits_; }

  // Outliers kept per vector of len entries; at least one entry stays dense.
  int64_t outliers(int64_t len) const {
    const auto n = static_cast<int64_t>(std::llround(percent_ / 100.0 * static_cast<double>(len)));
    return std::clamp<int64_t>(n, 0, std::max<int64_t>(0, len - 1));
  }

  static Matrix stored_f16(ConstMatrixView x) {
    Matrix m(x.rows, x.cols);
    for (int64_t i = 0; i < x.size(); ++i) m.data()[i] = to_f16(x.data[i]);
    return m;
  }

  // Per vector (key channel, value token): the indices of its outliers, ranked on the f16 values
  // the sparse list stores.
  std::vector<std::vector<int64_t>> select_sparse(const Matrix& stored) const {
    std::vector<std::vector<int64_t>> out;
    if (role_ == Role::key) {
      for (int64_t c = 0; c < stored.cols(); ++c) {
        out.push_back(kvquant::largest_magnitudes(stored.data() + c, stored.rows(), stored.cols(), outliers(stored.rows())));
      }
    } else {
      for (int64_t r = 0; r < stored.rows(); ++r) {
        out.push_back(kvquant::largest_magnitudes(stored.row(r), stored.cols(), 1, outliers(stored.cols())));
      }
    }
    return out;
  }

  std::vector<char> mask(const std::vector<std::vector<int64_t>>& sparse, int64_t rows, int64_t cols) const {
    std::vector<char> m(static_cast<size_t>(rows * cols), 0);
    for (size_t v = 0; v < sparse.size(); ++v) {
      for (int64_t i : sparse[v]) m[size_t(role_ == Role::key ? i * cols + int64_t(v) : int64_t(v) * cols + i)] = 1;
    }
    return m;
  }

  // Ascending f16 centroids: each channel's dense entries clustered into 2^bits.
  std::vector<float> fit_key_books(ConstMatrixView x, const std::vector<char>& is_sparse) const {
    std::vector<float> books;
    std::vector<float> dense;
    for (int64_t c = 0; c < x.cols; ++c) {
      dense.clear();
      for (int64_t r = 0; r < x.rows; ++r) {
        if (!is_sparse[size_t(r * x.cols + c)]) dense.push_back(x(r, c));
      }
      for (double centroid : kvquant::kmeans_1d(dense, levels())) books.push_back(to_f16(static_cast<float>(centroid)));
    }
    return books;
  }

  // Values normalized per token: u = (x - min) / (max - min) over the token's dense entries, with
  // min and max as stored (f16); a constant token has u = 0.
  struct Normalized {
    std::vector<float> lo, hi, u;
    std::vector<char> dense;
  };

  Normalized normalize(ConstMatrixView x, const std::vector<char>& is_sparse) const {
    Normalized n;
    n.u.assign(size_t(x.size()), 0.0f);
    n.dense.resize(size_t(x.size()));
    for (int64_t r = 0; r < x.rows; ++r) {
      float lo = 0, hi = 0;
      bool seen = false;
      for (int64_t c = 0; c < x.cols; ++c) {
        const size_t i = size_t(r * x.cols + c);
        n.dense[i] = !is_sparse[i];
        if (is_sparse[i]) continue;
        lo = seen ? std::min(lo, x(r, c)) : x(r, c);
        hi = seen ? std::max(hi, x(r, c)) : x(r, c);
        seen = true;
      }
      lo = to_f16(lo), hi = to_f16(hi);
      n.lo.push_back(lo), n.hi.push_back(hi);
      const float span = hi - lo;
      for (int64_t c = 0; c < x.cols && span > 0.0f; ++c) {
        n.u[size_t(r * x.cols + c)] = std::clamp((x(r, c) - lo) / span, 0.0f, 1.0f);
      }
    }
    return n;
  }

  // The shared value codebook: 0 and 1 pinned (each token's minimum and maximum are kept exactly),
  // 2^bits - 2 centroids fitted in between. Re-fitted on a round trip with sparse entries taken
  // out, it moves (requantize_drifts).
  std::vector<float> fit_value_book(const Normalized& n) const {
    std::vector<float> dense;
    for (size_t i = 0; i < n.u.size(); ++i) {
      if (n.dense[i]) dense.push_back(n.u[i]);
    }
    std::vector<float> book;
    for (double c : kvquant::kmeans_1d(dense, levels(), /*pin_unit_ends=*/true)) book.push_back(to_f16(float(c)));
    return book;
  }

  std::string spec_;
  int bits_;
  Role role_;
  double percent_;          // outliers kept exact, % of each vector
  std::vector<float> books_;  // calibrated codebooks (keys: D x L, values: L); empty = fit per block
};

SchemePtr make_kvquant(const SchemeParams& p) {
  if (!p.has("role")) {
    throw InputError("scheme spec '" + p.canonical() +
                     "': kvquant needs role=k or role=v (per-channel key codebooks, per-token values)");
  }
  const double percent = p.real("outliers");
  if (!(percent >= 0.0 && percent <= 50.0)) {
    throw InputError("scheme spec '" + p.canonical() + "': outliers=" + p.values().at("outliers") +
                     " is not a percentage in 0..50");
  }
  return std::make_shared<KvquantScheme>(p.canonical(), static_cast<int>(p.integer("bits")),
                                         p.choice("role") == "k" ? Role::key : Role::value, percent);
}

}  // namespace

void register_kvquant_family(Registry& registry) {
  FamilyInfo f;
  f.name = "kvquant";
  f.summary = "KVQuant (Hooper et al. 2024): non-uniform k-means codebooks (K per channel, V per-token normalized), "
              "fitted at calibration, with the largest outliers % of each vector kept exact in a sparse list";
  f.origin = KVTUNE_BUILTIN_ORIGIN;
  f.params = {
      {.name = "bits", .kind = ParamDomain::Kind::integer, .help = "code width: 2^bits centroids per codebook",
       .default_value = "3", .min = 2, .max = 4, .in_canonical = true},
      {.name = "role", .kind = ParamDomain::Kind::choice,
       .help = "k = a codebook per channel, v = tokens normalized to [0, 1] and one shared codebook",
       .choices = {"k", "v"}, .in_canonical = true},
      {.name = "outliers", .kind = ParamDomain::Kind::real,
       .help = "% of each vector (key channel, value token) kept exact as (index, f16) pairs, largest magnitudes "
               "first (0..50)",
       .default_value = "1", .in_canonical = true},
  };
  f.make = make_kvquant;
  registry.add(std::move(f));
}

}  // namespace kvtune::builtin
