#include "ggml_kernels.h"

#include "ggml_avx2.h"

#include "kvtune/numeric/multiversion.h"

#include "kvtune/codecs/ggml_blocks.h"


namespace kvtune::builtin::ggml_kernels {
namespace {

// Stamps out the three loops of one type, each its own multiversioned function so the codec
// inlines into it.
#define KVTUNE_GGML_LOOPS(name, bytes, quantize_block, dequantize_block, roundtrip_block)           \
  KVTUNE_MULTIVERSION void quantize_##name(const float* x, uint8_t* packed, int64_t blocks) {        \
    for (int64_t i = 0; i < blocks; ++i) quantize_block(x + i * ggml::kBlock, packed + i * (bytes));  \
  }                                                                                                   \
  KVTUNE_MULTIVERSION void dequantize_##name(const uint8_t* packed, float* y, int64_t blocks) {      \
    for (int64_t i = 0; i < blocks; ++i) dequantize_block(packed + i * (bytes), y + i * ggml::kBlock); \
  }                                                                                                   \
  KVTUNE_MULTIVERSION void roundtrip_##name(const float* x, float* y, int64_t blocks) {             \
    for (int64_t i = 0; i < blocks; ++i) roundtrip_block(x + i * ggml::kBlock, y + i * ggml::kBlock); \
  }

// A round trip through the packed block, for types without a fused one.
template <void (*Quantize)(const float*, uint8_t*), void (*Dequantize)(const uint8_t*, float*)>
inline void through_block(const float* x, float* y) {
  uint8_t block[ggml::kMaxBlockBytes];
  Quantize(x, block);
  Dequantize(block, y);
}

inline void fused_q8_0_ref(const float* x, float* y) { ggml::roundtrip_q8_0(x, y, false); }
inline void fused_q8_0_x86(const float* x, float* y) { ggml::roundtrip_q8_0(x, y, true); }

KVTUNE_GGML_LOOPS(q8_0, ggml::kQ8_0Bytes, ggml::quantize_q8_0, ggml::dequantize_q8_0, fused_q8_0_ref)
KVTUNE_GGML_LOOPS(q8_0_x86, ggml::kQ8_0Bytes, ggml::quantize_q8_0_x86, ggml::dequantize_q8_0, fused_q8_0_x86)
KVTUNE_GGML_LOOPS(q4_0, ggml::kQ4_0Bytes, ggml::quantize_q4_0, ggml::dequantize_q4_0, ggml::roundtrip_q4_0)
KVTUNE_GGML_LOOPS(q4_1, ggml::kQ4_1Bytes, ggml::quantize_q4_1, ggml::dequantize_q4_1, ggml::roundtrip_q4_1)
KVTUNE_GGML_LOOPS(q5_0, ggml::kQ5_0Bytes, ggml::quantize_q5_0, ggml::dequantize_q5_0, ggml::roundtrip_q5_0)
KVTUNE_GGML_LOOPS(q5_1, ggml::kQ5_1Bytes, ggml::quantize_q5_1, ggml::dequantize_q5_1, ggml::roundtrip_q5_1)
KVTUNE_GGML_LOOPS(iq4_nl, ggml::kIq4nlBytes, ggml::quantize_iq4_nl, ggml::dequantize_iq4_nl,
                  (through_block<ggml::quantize_iq4_nl, ggml::dequantize_iq4_nl>))
#undef KVTUNE_GGML_LOOPS

struct Loops {
  void (*quantize)(const float*, uint8_t*, int64_t);
  void (*dequantize)(const uint8_t*, float*, int64_t);
  void (*roundtrip)(const float*, float*, int64_t);
};

// Indexed by Type, in its declaration order.
const Loops& loops(Type type) {
  static_assert(static_cast<int>(Type::iq4_nl) == 6, "the table below follows Type's order");
  static const Loops table[] = {
      {quantize_q8_0, dequantize_q8_0, roundtrip_q8_0},
      {quantize_q8_0_x86, dequantize_q8_0_x86, roundtrip_q8_0_x86},
      {quantize_q4_0, dequantize_q4_0, roundtrip_q4_0},
      {quantize_q4_1, dequantize_q4_1, roundtrip_q4_1},
      {quantize_q5_0, dequantize_q5_0, roundtrip_q5_0},
      {quantize_q5_1, dequantize_q5_1, roundtrip_q5_1},
      {quantize_iq4_nl, dequantize_iq4_nl, roundtrip_iq4_nl},
  };
  return table[static_cast<int>(type)];
}

}  // namespace

void quantize(Type type, const float* x, uint8_t* packed, int64_t blocks) { loops(type).quantize(x, packed, blocks); }
void dequantize(Type type, const uint8_t* packed, float* y, int64_t blocks) {
  loops(type).dequantize(packed, y, blocks);
}
void roundtrip(Type type, const float* x, float* y, int64_t blocks) {
  int64_t done = 0;
  if (ggml_avx2::available()) {
    // Type and ggml_avx2::Format list the same formats in the same order.
    static_assert(int(Type::q5_1) == int(ggml_avx2::Format::q5_1) && int(Type::q4_1) == int(ggml_avx2::Format::q4_1) &&
                  int(Type::q8_0_x86) == int(ggml_avx2::Format::q8_0_x86) &&
                  int(Type::iq4_nl) == int(ggml_avx2::Format::iq4_nl));
    done = ggml_avx2::roundtrip(static_cast<ggml_avx2::Format>(static_cast<int>(type)), x, y, blocks);
  }
  loops(type).roundtrip(x + done * ggml::kBlock, y + done * ggml::kBlock, blocks - done);
}

}  // namespace kvtune::builtin::ggml_kernels
