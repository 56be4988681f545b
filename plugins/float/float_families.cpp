// Unquantized storage: `none` (the exact tensor), `f32`, `f16` and `bf16` (llama.cpp's cache type
// names). f16 and bf16 round to nearest even, as the hardware conversions do. The footprint is
// codec::packed_layout of the scheme's device_format() (kvtune/codecs/packed_layout.h), the layout
// the CUDA kernels use: T*D values, row-major.
#include <cstring>
#include <string>

#include "builtin.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"
#include "kvtune/numeric/half.h"
#include "kvtune/numeric/half_kernels.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

class FloatScheme final : public Scheme {
 public:
  FloatScheme(std::string name, CodecKind kind) : name_(std::move(name)), kind_(kind), format_(make_format(kind)) {}

  std::string spec() const override { return name_; }
  std::string family() const override { return name_; }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(codec::packed_layout(format_, tokens, head_dim).bytes);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    const int64_t n = x.size();
    if (kind_ == CodecKind::f32) {
      std::memcpy(packed.data(), x.data, packed.size());
      return packed;
    }
    auto* out = reinterpret_cast<uint16_t*>(packed.data());
    (kind_ == CodecKind::f16 ? half_kernels::f32_to_f16 : half_kernels::f32_to_bf16)(x.data, out, n);
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    const int64_t n = out.size();
    if (kind_ == CodecKind::f32) {
      std::memcpy(out.data, packed.data(), packed.size());
      return;
    }
    const auto* in = reinterpret_cast<const uint16_t*>(packed.data());
    (kind_ == CodecKind::f16 ? half_kernels::f16_to_f32 : half_kernels::bf16_to_f32)(in, out.data, n);
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    const int64_t n = x.size();
    if (kind_ == CodecKind::f32) {
      std::memcpy(out.data, x.data, static_cast<size_t>(n) * sizeof(float));
      return;
    }
    (kind_ == CodecKind::f16 ? half_kernels::round_to_f16 : half_kernels::round_to_bf16)(x.data, out.data, n);
  }

  std::optional<DeviceFormat> device_format() const override { return format_; }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.rows_independent = true;  // element by element
    t.channel_order_invariant = true;
    return t;
  }

 private:
  static DeviceFormat make_format(CodecKind kind) {
    DeviceFormat f;
    f.kind = kind;
    f.bits = kind == CodecKind::f32 ? 32 : 16;
    return f;
  }

  std::string name_;
  CodecKind kind_;
  DeviceFormat format_;  // the one description of the block's layout
};

void add_float_family(Registry& registry, const char* name, CodecKind kind, const char* summary,
                      const char* origin) {
  FamilyInfo f;
  f.name = name;
  f.summary = summary;
  f.origin = origin;
  const std::string n = name;
  f.make = [n, kind](const SchemeParams&) -> SchemePtr { return std::make_shared<FloatScheme>(n, kind); };
  registry.add(std::move(f));
}

}  // namespace

void register_float_families(Registry& registry) {
  add_float_family(registry, "none", CodecKind::f32, "exact: the tensor as given, stored as f32", KVTUNE_BUILTIN_ORIGIN);
  add_float_family(registry, "f32", CodecKind::f32, "IEEE float32 (llama.cpp cache type f32)", KVTUNE_BUILTIN_ORIGIN);
  add_float_family(registry, "f16", CodecKind::f16, "IEEE binary16, round to nearest even (llama.cpp f16)",
                   KVTUNE_BUILTIN_ORIGIN);
  add_float_family(registry, "bf16", CodecKind::bf16, "bfloat16, round to nearest even (llama.cpp bf16)",
                   KVTUNE_BUILTIN_ORIGIN);
}

}  // namespace kvtune::builtin
