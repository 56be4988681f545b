// llama.cpp's KV-cache types as scheme families, spelled as llama.cpp spells them (--cache-type-k
// and --cache-type-v values): q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl. Each row of a [T, D] block is
// split into D/32 ggml blocks; the packed bytes are ggml's blocks, row after row. The footprint is
// codec::packed_layout of the scheme's device_format(), the layout the CUDA kernels use
// (kvtune/codecs/packed_layout.h, which also places block t * D/32 + c/32 where the whole-tensor
// loops below write it).
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"
#include "ggml_kernels.h"
#include "kvtune/codecs/ggml_blocks.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/error.h"
#include "kvtune/registry.h"

namespace kvtune::builtin {
namespace {

using ggml_kernels::Type;

struct BlockFormat {
  const char* name;
  Type type;
  const char* summary;
};

CodecKind codec_kind(Type type) {
  switch (type) {
    case Type::q8_0:
      return CodecKind::q8_0;
    case Type::q8_0_x86:
      return CodecKind::q8_0_x86;
    case Type::q4_0:
      return CodecKind::q4_0;
    case Type::q4_1:
      return CodecKind::q4_1;
    case Type::q5_0:
      return CodecKind::q5_0;
    case Type::q5_1:
      return CodecKind::q5_1;
    case Type::iq4_nl:
      return CodecKind::iq4_nl;
  }
  throw std::logic_error("ggml block type without a codec kind");
}

// Code bits per element, scales and minima not counted.
uint8_t payload_bits(Type type) {
  switch (type) {
    case Type::q8_0:
    case Type::q8_0_x86:
      return 8;
    case Type::q5_0:
    case Type::q5_1:
      return 5;
    case Type::q4_0:
    case Type::q4_1:
    case Type::iq4_nl:
      return 4;
  }
  throw std::logic_error("ggml block type without a payload width");
}

class GgmlBlockScheme final : public Scheme {
 public:
  GgmlBlockScheme(std::string spec, const char* family_name, Type type)
      : spec_(std::move(spec)), family_(family_name), type_(type), format_(make_format(type)) {}

  std::string spec() const override { return spec_; }
  std::string family() const override { return family_; }

  std::string check_shape(int64_t tokens, int64_t head_dim) const override {
    std::string base = Scheme::check_shape(tokens, head_dim);
    if (!base.empty()) return base;
    if (head_dim % ggml::kBlock != 0) {
      return "'" + spec_ + "': head_dim " + std::to_string(head_dim) + " is not a multiple of the 32-element ggml block";
    }
    return {};
  }

  size_t footprint(int64_t tokens, int64_t head_dim) const override {
    return static_cast<size_t>(codec::packed_layout(format_, tokens, head_dim).bytes);
  }

  std::vector<std::byte> quantize(ConstMatrixView x, const QuantContext&) const override {
    require_shape(x.rows, x.cols);
    std::vector<std::byte> packed(footprint(x.rows, x.cols));
    ggml_kernels::quantize(type_, x.data, reinterpret_cast<uint8_t*>(packed.data()), x.size() / ggml::kBlock);
    return packed;
  }

  void dequantize(std::span<const std::byte> packed, const QuantContext&, MatrixView out) const override {
    require_packed(packed, out.rows, out.cols);
    ggml_kernels::dequantize(type_, reinterpret_cast<const uint8_t*>(packed.data()), out.data,
                             out.size() / ggml::kBlock);
  }

  void roundtrip(ConstMatrixView x, const QuantContext&, MatrixView out) const override {
    require_shape(x.rows, x.cols);
    ggml_kernels::roundtrip(type_, x.data, out.data, x.size() / ggml::kBlock);
  }

  std::optional<DeviceFormat> device_format() const override { return format_; }

  SchemeTraits traits() const override {
    SchemeTraits t = Scheme::traits();
    t.rows_independent = true;  // 32-channel blocks within a token
    return t;
  }

 private:
  // One f16 scale (and minimum) per 32 channels of a token: kvtune/codecs/packed_layout.h reads
  // the blocks by kind (and sizes them with codec::ggml_block_bytes), the other fields say what the
  // bytes cost.
  static DeviceFormat make_format(Type type) {
    DeviceFormat f;
    f.kind = codec_kind(type);
    f.bits = payload_bits(type);
    f.axis = GroupAxis::token;
    f.group = ggml::kBlock;
    f.scale_type = ScaleType::f16;
    f.asymmetric = type == Type::q4_1 || type == Type::q5_1;
    return f;
  }

  std::string spec_;
  std::string family_;
  Type type_;
  DeviceFormat format_;  // the one description of the block's layout
};

const BlockFormat kFormats[] = {
    {"q8_0", Type::q8_0, "llama.cpp q8_0: 8-bit codes, one f16 absmax scale per 32"},
    {"q4_0", Type::q4_0, "llama.cpp q4_0: 4-bit codes, one f16 scale per 32"},
    {"q4_1", Type::q4_1, "llama.cpp q4_1: 4-bit codes, f16 scale and minimum per 32"},
    {"q5_0", Type::q5_0, "llama.cpp q5_0: 5-bit codes, one f16 scale per 32"},
    {"q5_1", Type::q5_1, "llama.cpp q5_1: 5-bit codes, f16 scale and minimum per 32"},
    {"iq4_nl", Type::iq4_nl, "llama.cpp iq4_nl: 4-bit non-linear codebook, one f16 scale per 32"},
};

}  // namespace

void register_ggml_families(Registry& registry) {
  for (const BlockFormat& format : kFormats) {
    FamilyInfo f;
    f.name = format.name;
    f.summary = format.summary;
    f.origin = KVTUNE_BUILTIN_ORIGIN;
    const bool q8 = f.name == "q8_0";
    if (q8) {
      // ggml's reference quantizer (quantize_row_q8_0_ref) versus what the x86 CPU backend writes
      // into the cache (ggml-cpu quantize_row_q8_0, AVX path).
      f.params = {{.name = "variant", .kind = ParamDomain::Kind::choice,
                   .help = "ref: d = amax/127, codes rounded half away from zero; x86: id = 127/amax, ties to even",
                   .default_value = "ref", .choices = {"ref", "x86"}}};
    }
    f.make = [format, q8](const SchemeParams& p) -> SchemePtr {
      const bool x86 = q8 && p.choice("variant") == "x86";
      return std::make_shared<GgmlBlockScheme>(p.canonical(), format.name, x86 ? Type::q8_0_x86 : format.type);
    };
    registry.add(std::move(f));
  }
}

}  // namespace kvtune::builtin
