// A working SDK plugin that declares ABI 1.1 traits: a sign sketch (one bit per element behind a
// per-row f32 mean |x|) declared a score estimator, as QJL-like schemes are, so check-plugin skips
// the quantizer-only checks for it; `calibrated` also declares static scales.
#include <cmath>
#include <cstring>

#include "kvtune/plugin_sdk.h"

namespace {

class SignSketch final : public kvtune::plugin::SchemeBase {
 public:
  SignSketch(std::string spec, bool calibrated) : spec_(std::move(spec)), calibrated_(calibrated) {}
  std::string spec() const override { return spec_; }
  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return size_t(tokens) * (4 + size_t(head_dim + 7) / 8);
  }
  std::vector<std::byte> quantize(kvtune::ConstMatrixView block, const kvtune::QuantContext&) const override {
    require_shape(block.rows, block.cols);
    std::vector<std::byte> out(footprint(block.rows, block.cols));
    const size_t row_bytes = 4 + size_t(block.cols + 7) / 8;
    for (int64_t r = 0; r < block.rows; ++r) {
      std::byte* row = out.data() + size_t(r) * row_bytes;
      float mean = 0;
      for (int64_t c = 0; c < block.cols; ++c) mean += std::abs(block.data[r * block.cols + c]);
      mean /= float(block.cols);
      std::memcpy(row, &mean, 4);
      for (int64_t c = 0; c < block.cols; ++c) {
        if (block.data[r * block.cols + c] < 0) row[4 + c / 8] |= std::byte(1u << (c % 8));
      }
    }
    return out;
  }
  void dequantize(std::span<const std::byte> packed, const kvtune::QuantContext&, kvtune::MatrixView out) const override {
    const size_t row_bytes = 4 + size_t(out.cols + 7) / 8;
    for (int64_t r = 0; r < out.rows; ++r) {
      const std::byte* row = packed.data() + size_t(r) * row_bytes;
      float mean;
      std::memcpy(&mean, row, 4);
      for (int64_t c = 0; c < out.cols; ++c) {
        const bool negative = (row[4 + c / 8] & std::byte(1u << (c % 8))) != std::byte{0};
        out.data[r * out.cols + c] = negative ? -mean : mean;
      }
    }
  }
  kvtune::SchemeTraits traits() const override {
    kvtune::SchemeTraits t;
    t.estimates_logits = true;
    t.static_scales = calibrated_;
    return t;
  }

 private:
  std::string spec_;
  bool calibrated_;
};

std::vector<kvtune::plugin::Family> families() {
  kvtune::plugin::Family f;
  f.name = "sdk_sketch";
  f.summary = "sign sketch declared a score estimator (test plugin)";
  f.params = {{.name = "calibrated", .kind = kvtune::ParamDomain::Kind::flag, .help = "declare static scales"}};
  f.make = [](const kvtune::plugin::Params& p) -> std::shared_ptr<const kvtune::plugin::SchemeBase> {
    return std::make_shared<SignSketch>(p.canonical(), p.flag("calibrated"));
  };
  return {f};
}

}  // namespace

KVTUNE_PLUGIN("kvtune-test-sdk-traits", "0.1", families)
