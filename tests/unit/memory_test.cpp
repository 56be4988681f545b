// The memory model (DESIGN §6) and the model presets: the design's check figures, sliding-window
// layers, the sequence arithmetic, size strings, and the preset files under configs/models.
#include "kvtune/memory.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <tuple>

#include "kvtune/error.h"
#include "kvtune/model_preset.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using testing::config_dir;
using testing::GiB;
using ::testing::HasSubstr;
using testing::KiB;
using testing::make_scheme;

// Llama-3.1-70B's cache shape, as DESIGN §6 states it (80 layers, 8 KV heads, head_dim 128).
const ModelShape kLlama70b = {80, 8, 128, 0, 0};
constexpr int64_t k128k = 131072;

MemoryEstimate estimate(const ModelShape& shape, int64_t ctx, const std::string& k, const std::string& v) {
  return estimate_memory(shape, ctx, scheme_storage(make_scheme(k)), scheme_storage(make_scheme(v)));
}

// InputError's message, or a failure when `f` does not throw one.
template <class F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an InputError";
  return "";
}

// --- DESIGN §6 check figures ---------------------------------------------------------------------

TEST(MemoryModelTest, Llama70bAtF16Is320KiBPerTokenAnd40GiBAt128k) {
  const MemoryEstimate e = estimate(kLlama70b, k128k, "f16", "f16");
  EXPECT_EQ(e.k_bits, 16.0);
  EXPECT_EQ(e.v_bits, 16.0);
  EXPECT_EQ(e.bytes_per_token, 320.0 * KiB);
  EXPECT_EQ(e.bytes_per_token, 327680.0);
  EXPECT_EQ(e.total_bytes, 40 * GiB);
}

// Exact stand-ins for q8_0 and q4_0's sizes: 32 codes plus one f16 scale per 32 channels of a token
// are 8.5 and 4.5 bits per element.
TEST(MemoryModelTest, Llama70bAtQ8_0AndQ4_0SizedIntIs130KiBPerToken) {
  const MemoryEstimate e = estimate(kLlama70b, k128k, "int:bits=8,axis=token,group=32,scale=f16",
                                    "int:bits=4,axis=token,group=32,scale=f16");
  EXPECT_EQ(e.k_bits, 8.5);
  EXPECT_EQ(e.v_bits, 4.5);
  EXPECT_EQ(e.bytes_per_token, 130.0 * KiB);
  EXPECT_EQ(e.total_bytes, uint64_t(130) * KiB * k128k);
}

TEST(MemoryModelTest, Llama70bAtLlamaCppQ8_0AndQ4_0Is130KiBPerToken) {
  const MemoryEstimate e = estimate(kLlama70b, k128k, "q8_0", "q4_0");
  EXPECT_EQ(e.k_bits, 8.5);
  EXPECT_EQ(e.v_bits, 4.5);
  EXPECT_EQ(e.bytes_per_token, 130.0 * KiB);
}

// FP8 stores 8 bits per element; with a unit scale there is no metadata at all.
TEST(MemoryModelTest, Llama70bAtFp8Is20GiBAt128k) {
  ASSERT_NE(builtin_registry().find("fp8"), nullptr) << "the fp8 family is not registered";
  const MemoryEstimate e = estimate(kLlama70b, k128k, "fp8:format=e4m3,scale=unit", "fp8:format=e4m3,scale=unit");
  EXPECT_EQ(e.k_bits, 8.0);
  EXPECT_EQ(e.v_bits, 8.0);
  EXPECT_EQ(e.bytes_per_token, 160.0 * KiB);
  EXPECT_EQ(e.total_bytes, 20 * GiB);
}

// Without sliding layers bytes/token is exactly layers x kv_heads x head_dim x (k_bits + v_bits) / 8,
// here with scheme metadata (per-channel scales over the whole context) that is not a whole byte count.
TEST(MemoryModelTest, BytesPerTokenFollowsTheDesignFormulaWithMetadata) {
  const ModelShape shape = {32, 8, 128, 0, 0};
  const MemoryEstimate e = estimate(shape, 4096, "int:bits=4,axis=channel,group=64,asym", "int:bits=8,axis=token");
  EXPECT_GT(e.k_bits, 4.0);
  EXPECT_GT(e.v_bits, 8.0);
  EXPECT_NEAR(e.bytes_per_token, 32.0 * 8 * 128 * (e.k_bits + e.v_bits) / 8.0, 1e-6);
}

// --- sliding-window layers -----------------------------------------------------------------------

TEST(MemoryModelTest, GemmaSlidingLayersHoldOnlyTheirWindowAtLongContext) {
  const ModelShape gemma = {42, 8, 256, 4096, 21};
  const ModelShape all_global = {42, 8, 256, 0, 0};
  const MemoryEstimate e = estimate(gemma, k128k, "f16", "f16");
  const MemoryEstimate full = estimate(all_global, k128k, "f16", "f16");
  EXPECT_EQ(e.sliding_tokens, 4096);
  // 21 layers hold 131072 tokens, 21 hold 4096; f16 K and V are 2 x 2 bytes per channel.
  EXPECT_EQ(e.total_bytes, uint64_t(8) * 256 * 4 * (21 * uint64_t(k128k) + 21 * 4096));
  EXPECT_EQ(full.total_bytes, uint64_t(8) * 256 * 4 * 42 * uint64_t(k128k));
  // About half: (131072 + 4096) / (2 x 131072).
  EXPECT_NEAR(static_cast<double>(e.total_bytes) / static_cast<double>(full.total_bytes), 0.515625, 1e-12);
  EXPECT_LT(e.bytes_per_token, full.bytes_per_token);
  // k_bits/v_bits describe a full-context block; sliding only changes how many tokens are kept.
  EXPECT_EQ(e.k_bits, 16.0);
}

TEST(MemoryModelTest, SlidingLayersCostTheSameWithinTheWindow) {
  const ModelShape gemma = {42, 8, 256, 4096, 21};
  const ModelShape all_global = {42, 8, 256, 0, 0};
  for (int64_t ctx : {1, 1000, 4096}) {
    EXPECT_EQ(estimate(gemma, ctx, "q8_0", "q4_0").total_bytes, estimate(all_global, ctx, "q8_0", "q4_0").total_bytes)
        << ctx;
  }
}

// --- the storage seam the cache policy will use ----------------------------------------------------

// A policy keeping 4 sink tokens as f16 beside the quantized rest plugs in as a RoleStorage.
TEST(MemoryModelTest, CustomRoleStorageIsWhatGetsCounted) {
  const SchemePtr q4 = make_scheme("q4_0"), f16 = make_scheme("f16");
  const RoleStorage with_sinks = [&](int64_t tokens, int64_t d) -> uint64_t {
    const int64_t sinks = std::min<int64_t>(4, tokens);
    return f16->footprint(sinks, d) + (tokens > sinks ? q4->footprint(tokens - sinks, d) : 0);
  };
  const MemoryEstimate plain = estimate_memory(kLlama70b, 1028, scheme_storage(q4), scheme_storage(q4));
  const MemoryEstimate sinks = estimate_memory(kLlama70b, 1028, with_sinks, scheme_storage(q4));
  // In each of 80 x 8 K heads, 4 tokens move from q4_0 (4 blocks of 18 bytes per token) to f16.
  EXPECT_EQ(sinks.total_bytes - plain.total_bytes, uint64_t(80) * 8 * (4 * 128 * 2 - 4 * 4 * 18));
  EXPECT_GT(sinks.k_bits, plain.k_bits);
  EXPECT_EQ(sinks.v_bits, plain.v_bits);
}

// --- bad input ---------------------------------------------------------------------------------------

TEST(MemoryModelTest, SchemeThatCannotTakeTheHeadDimNamesItself) {
  const std::string what = input_error([] { estimate({32, 8, 80, 0, 0}, 4096, "q4_0", "f16"); });
  EXPECT_THAT(what, HasSubstr("q4_0"));
  EXPECT_THAT(what, HasSubstr("80"));
}

TEST(MemoryModelTest, RejectsBadShapesAndContexts) {
  EXPECT_THAT(input_error([] { estimate({0, 8, 128, 0, 0}, 10, "f16", "f16"); }), HasSubstr("layers"));
  EXPECT_THAT(input_error([] { estimate({32, 0, 128, 0, 0}, 10, "f16", "f16"); }), HasSubstr("kv_heads"));
  EXPECT_THAT(input_error([] { estimate({32, 8, 128, 4096, 40}, 10, "f16", "f16"); }), HasSubstr("sliding"));
  EXPECT_THAT(input_error([] { estimate({32, 8, 128, 4096, 0}, 10, "f16", "f16"); }), HasSubstr("sliding"));
  EXPECT_THAT(input_error([] { estimate(kLlama70b, 0, "f16", "f16"); }), HasSubstr("context"));
}

TEST(MemoryModelTest, OverflowIsAnInputErrorNotAWrap) {
  const ModelShape huge = {4096, 4096, 65536, 0, 0};
  EXPECT_THAT(input_error([&] { estimate(huge, int64_t(1) << 32, "f32", "f32"); }), HasSubstr("64 bits"));
}

// --- sequences that fit ------------------------------------------------------------------------------

TEST(MemoryModelTest, MaxSequencesIsTheFloorOfWhatTheWeightsLeave) {
  EXPECT_EQ(max_sequences(80 * GiB, 0, 40 * GiB), 2u);
  EXPECT_EQ(max_sequences(80 * GiB, 1, 40 * GiB), 1u);
  EXPECT_EQ(max_sequences(80 * GiB, 10 * GiB, 10 * GiB), 7u);
  EXPECT_EQ(max_sequences(30, 10, 10), 2u);
  EXPECT_EQ(max_sequences(29, 10, 10), 1u);
  EXPECT_EQ(max_sequences(19, 10, 10), 0u);
  EXPECT_EQ(max_sequences(10, 10, 1), 0u);  // weights fill the GPU exactly
  EXPECT_EQ(max_sequences(10, 20, 1), 0u);  // weights do not fit at all
  // Llama-3.1-70B in bf16 on a 141 GB H200 (141e9 bytes): the weights alone do not fit.
  EXPECT_EQ(max_sequences(141000000000ull, 2 * 70553706496ull, 40 * GiB), 0u);
}

// --- tensor parallelism: per-GPU figures ----------------------------------------------------------

// ceil(kv_heads / N): the runtimes' rule (memory.h cites vLLM, SGLang and TensorRT-LLM).
TEST(TensorParallelTest, KvHeadsSplitAcrossGpusAndReplicateBeyondTheHeadCount) {
  EXPECT_EQ(kv_heads_per_gpu(8, 1), 8);
  EXPECT_EQ(kv_heads_per_gpu(8, 2), 4);
  EXPECT_EQ(kv_heads_per_gpu(8, 8), 1);
  EXPECT_EQ(kv_heads_per_gpu(8, 16), 1);  // replicated: each of 16 GPUs holds one of the 8 heads
  EXPECT_EQ(kv_heads_per_gpu(4, 8), 1);
  EXPECT_EQ(kv_heads_per_gpu(1, 4), 1);
  EXPECT_EQ(kv_heads_per_gpu(8, 3), 3);   // TensorRT-LLM's ceiling (vLLM refuses 3 for 8 heads)
  EXPECT_THAT(input_error([] { kv_heads_per_gpu(8, 0); }), HasSubstr("at least 1, got 0"));
}

// Llama-3.1-70B, f16 K and V at 131072 tokens (40 GiB per sequence on one GPU):
// 2 GPUs: 8 / 2 = 4 KV heads each, 80 layers x 4 heads x 2 (K, V) x 131072 tokens x 128 x 2 B = 20 GiB.
// 8 GPUs: 1 KV head each, 80 x 1 x 2 x 131072 x 128 x 2 B = 5 GiB.
TEST(TensorParallelTest, Llama70bPerGpuBytesPerSequenceAt128k) {
  const MemoryEstimate e = estimate(kLlama70b, k128k, "f16", "f16");
  const GpuFit two = fit_per_gpu(kLlama70b, e, 80 * GiB, 0, 2);
  EXPECT_EQ(two.kv_heads, 4);
  EXPECT_EQ(two.sequence_bytes, 20 * GiB);
  EXPECT_EQ(two.sequence_bytes, uint64_t(80) * 4 * 2 * k128k * 128 * 2);
  const GpuFit eight = fit_per_gpu(kLlama70b, e, 80 * GiB, 0, 8);
  EXPECT_EQ(eight.kv_heads, 1);
  EXPECT_EQ(eight.sequence_bytes, 5 * GiB);
  const GpuFit one = fit_per_gpu(kLlama70b, e, 80 * GiB, 0, 1);
  EXPECT_EQ(one.kv_heads, 8);
  EXPECT_EQ(one.sequence_bytes, e.total_bytes);
}

// 8 x 80 GiB with 140 GB (140e9 bytes) of weights: 17.5e9 bytes of weights per GPU;
// free 80 x 2^30 - 17.5e9 = 85899345920 - 17500000000 = 68399345920 bytes per GPU;
// 68399345920 / 5 GiB (5368709120) = 12.74, so 12 sequences of 131072 tokens.
// On 2 x 80 GiB the same weights leave 85899345920 - 70e9 = 15899345920 bytes per GPU: no 20 GiB sequence fits.
TEST(TensorParallelTest, Llama70bSequencesOn8And2GpusOf80GiBWith140GBOfWeights) {
  const MemoryEstimate e = estimate(kLlama70b, k128k, "f16", "f16");
  const GpuFit eight = fit_per_gpu(kLlama70b, e, 80 * GiB, 140000000000ull, 8);
  EXPECT_EQ(eight.weight_bytes, 17500000000ull);
  EXPECT_EQ(eight.free_bytes, 68399345920ull);
  EXPECT_EQ(eight.sequences, 12u);
  const GpuFit two = fit_per_gpu(kLlama70b, e, 80 * GiB, 140000000000ull, 2);
  EXPECT_EQ(two.weight_bytes, 70000000000ull);
  EXPECT_EQ(two.free_bytes, 15899345920ull);
  EXPECT_EQ(two.sequences, 0u);
  // 2 x 80 GiB with 40 GiB of weights: 20 GiB each, 60 GiB free, 3 sequences of 20 GiB.
  EXPECT_EQ(fit_per_gpu(kLlama70b, e, 80 * GiB, 40 * GiB, 2).sequences, 3u);
  // One GPU of 80 GiB cannot hold 140 GB of weights at all.
  EXPECT_EQ(fit_per_gpu(kLlama70b, e, 80 * GiB, 140000000000ull, 1).sequences, 0u);
}

// Qwen2.5-7B has 4 KV heads: on 8 GPUs each holds 1 (replicated twice), not half a head.
// f16 at 32768 tokens: 28 layers x 1 head x 2 x 32768 x 128 x 2 B = 448 MiB (469762048) per GPU,
// a quarter of the 1792 MiB sequence, not an eighth.
TEST(TensorParallelTest, FewerKvHeadsThanGpusReplicatesOneHeadPerGpu) {
  const ModelShape qwen7b = {28, 4, 128, 0, 0};
  const MemoryEstimate e = estimate(qwen7b, 32768, "f16", "f16");
  EXPECT_EQ(e.total_bytes, 1792ull << 20);
  const GpuFit f = fit_per_gpu(qwen7b, e, 24 * GiB, 15231233024ull, 8);
  EXPECT_EQ(f.kv_heads, 1);
  EXPECT_EQ(f.sequence_bytes, 448ull << 20);
  EXPECT_EQ(fit_per_gpu(qwen7b, e, 24 * GiB, 0, 4).sequence_bytes, 448ull << 20);  // 4 GPUs: the same
  // bf16 weights 15231233024 / 8 = 1903904128 per GPU; (25769803776 - 1903904128) / 469762048 = 50.8.
  EXPECT_EQ(f.weight_bytes, 1903904128ull);
  EXPECT_EQ(f.sequences, 50u);
}

TEST(TensorParallelTest, WeightsSplitEvenlyRoundingUp) {
  EXPECT_EQ(weights_per_gpu(140000000000ull, 8), 17500000000ull);
  EXPECT_EQ(weights_per_gpu(10, 3), 4u);
  EXPECT_EQ(weights_per_gpu(9, 3), 3u);
  EXPECT_EQ(weights_per_gpu(0, 8), 0u);
  const MemoryEstimate e = estimate(kLlama70b, 8, "f16", "f16");
  EXPECT_THAT(input_error([&] { fit_per_gpu(kLlama70b, e, GiB, 0, 0); }), HasSubstr("GPU count"));
  EXPECT_THAT(input_error([&] { fit_per_gpu(kLlama70b, e, GiB, 0, kMaxGpus + 1); }), HasSubstr("GPU count"));
}

TEST(TensorParallelTest, GpuMemoryTakesACountTimesASize) {
  const GpuMemory plain = parse_gpu_memory("80GiB", "--gpu-mem");
  EXPECT_FALSE(plain.gpus.has_value());
  EXPECT_EQ(plain.bytes, 80 * GiB);
  const GpuMemory two = parse_gpu_memory("2x80GiB", "--gpu-mem");
  EXPECT_EQ(two.gpus.value_or(0), 2);
  EXPECT_EQ(two.bytes, 80 * GiB);
  EXPECT_EQ(parse_gpu_memory("8X141GB", "--gpu-mem").gpus.value_or(0), 8);
  EXPECT_EQ(parse_gpu_memory("8x141GB", "--gpu-mem").bytes, 141000000000ull);
}

TEST(TensorParallelTest, MalformedCountTimesSizeNamesTheOptionAndTheForm) {
  for (const char* bad : {"x80GiB", "0x80GiB", "-2x80GiB", "2.5x80GiB", "twox80GiB", "2x", "4097x80GiB",
                          "99999999999x80GiB", "2x80GX", "2x3x80GiB"}) {
    const std::string what = input_error([&] { parse_gpu_memory(bad, "--gpu-mem"); });
    EXPECT_THAT(what, HasSubstr("--gpu-mem '" + std::string(bad) + "'")) << bad;
  }
  EXPECT_THAT(input_error([] { parse_gpu_memory("0x80GiB", "--gpu-mem"); }), HasSubstr("GPU count must be in 1..4096"));
  EXPECT_THAT(input_error([] { parse_gpu_memory("2x", "--gpu-mem"); }), HasSubstr("no size after 'x'"));
  EXPECT_THAT(input_error([] { parse_gpu_memory("2x80GX", "--gpu-mem"); }), HasSubstr("unknown unit 'GX'"));
  EXPECT_THAT(input_error([] { parse_gpu_memory("x80GiB", "--gpu-mem"); }), HasSubstr("2x80GiB"));
  // No GPU has 0 bytes, whoever reads the size (a sweep's [budget] fit accepted "0").
  for (const char* zero : {"0", "0GiB", "2x0"}) {
    EXPECT_THAT(input_error([&] { parse_gpu_memory(zero, "budget.fit.gpu_mem"); }),
                HasSubstr("budget.fit.gpu_mem '" + std::string(zero) + "': a GPU needs more than 0 bytes"));
  }
}

TEST(TensorParallelTest, GpuCountMustAgreeWhenGivenTwice) {
  EXPECT_EQ(gpu_count(std::nullopt, "--gpu-mem", std::nullopt, "--gpus"), 1);
  EXPECT_EQ(gpu_count(2, "--gpu-mem", std::nullopt, "--gpus"), 2);
  EXPECT_EQ(gpu_count(std::nullopt, "--gpu-mem", 8, "--gpus"), 8);
  EXPECT_EQ(gpu_count(8, "--gpu-mem", 8, "--gpus"), 8);
  const std::string what = input_error([] { gpu_count(2, "--gpu-mem", 4, "--gpus"); });
  EXPECT_THAT(what, HasSubstr("--gpus 4 disagrees with --gpu-mem 2xSIZE"));
}

// --- size strings -------------------------------------------------------------------------------------

TEST(MemorySizeTest, ParsesDecimalAndBinaryUnits) {
  EXPECT_EQ(parse_size("80GiB", "--gpu-mem"), 80 * GiB);
  EXPECT_EQ(parse_size("141GB", "--gpu-mem"), 141000000000ull);
  EXPECT_EQ(parse_size("512MiB", "--gpu-mem"), 512ull << 20);
  EXPECT_EQ(parse_size("1.5TiB", "--gpu-mem"), 3ull << 39);
  EXPECT_EQ(parse_size("1000", "--gpu-mem"), 1000u);
  EXPECT_EQ(parse_size("0", "--weights"), 0u);
  EXPECT_EQ(parse_size("64 KB", "--gpu-mem"), 64000u);
  EXPECT_EQ(parse_size("2gib", "--gpu-mem"), 2 * GiB);
  EXPECT_EQ(parse_size("12B", "--gpu-mem"), 12u);
  EXPECT_EQ(parse_size("0.5KiB", "--gpu-mem"), 512u);
  EXPECT_EQ(parse_size(".25GiB", "--gpu-mem"), GiB / 4);
  EXPECT_EQ(parse_size("3TB", "--gpu-mem"), 3000000000000ull);
}

TEST(MemorySizeTest, BadSizesNameTheOptionTheValueAndTheAcceptedForms) {
  for (const char* bad : {"", "GiB", "80GX", "-1GB", "1e9", "80 GiB x", "1.2.3GB", "80 G", "99999999999TB"}) {
    const std::string what = input_error([&] { parse_size(bad, "--gpu-mem"); });
    EXPECT_THAT(what, HasSubstr("--gpu-mem '" + std::string(bad) + "'")) << bad;
    EXPECT_THAT(what, HasSubstr("GiB")) << bad;
    EXPECT_THAT(what, HasSubstr("powers of 1024")) << bad;
  }
  EXPECT_THAT(input_error([] { parse_size("80GX", "--weights"); }), HasSubstr("unknown unit 'GX'"));
}

TEST(MemorySizeTest, FormatsWithTheLargestBinaryUnit) {
  EXPECT_EQ(format_bytes(327680, 1), "320.0 KiB");
  EXPECT_EQ(format_bytes(40.0 * GiB, 2), "40.00 GiB");
  EXPECT_EQ(format_bytes(512, 2), "512 B");
  EXPECT_EQ(format_bytes(1.5 * 1024 * GiB, 2), "1.50 TiB");
}

// llama-server's cells (llama-kv-cache-iswa.cpp, llama-context.cpp from b6975): a slot of pad256(ctx),
// a sliding layer pad256(min(slot, window + n_ubatch)); Ollama's batch steps with the whole context.
TEST(MemoryModelTest, AllocatedCellsRoundSlotsAndSlidingLayersAsDeclared) {
  const ModelShape gemma2 = {42, 8, 256, 4096, 21};
  const CellAllocation llama = {256, 512, {}, 256};
  auto cells = [](const ModelShape& shape, int64_t ctx, int64_t seqs, const CellAllocation& a) {
    const AllocatedCells c = allocated_cells(shape, ctx, seqs, a);
    return std::tuple{c.slot, c.sliding, c.sliding_extra};
  };
  EXPECT_EQ(cells(gemma2, 8192, 1, llama), std::tuple(8192, 4608, 512));
  EXPECT_EQ(cells(gemma2, 8000, 4, llama), std::tuple(8192, 4608, 512));
  EXPECT_EQ(cells(gemma2, 4000, 1, llama), std::tuple(4096, 4096, 512));  // the slot caps the layer
  EXPECT_EQ(cells(gemma2, 1, 1, llama), std::tuple(256, 256, 512));
  const ModelShape gemma3 = {62, 16, 128, 1024, 52};
  EXPECT_EQ(cells(gemma3, 32768, 1, llama), std::tuple(32768, 1536, 512));
  EXPECT_EQ(cells(gemma3, 32768, 1, CellAllocation{256, 512, {}, 1}), std::tuple(32768, 1536, 512));
  EXPECT_EQ(cells(gemma3, 1000, 1, CellAllocation{1, 100, {}, 1}), std::tuple(1000, 1000, 100));
  const CellAllocation ollama = {256, 512, {{4096, 1024}, {32768, 2048}}, 256};
  EXPECT_EQ(cells(gemma3, 4096, 1, ollama), std::tuple(4096, 1536, 512));   // not above 4096 in all
  EXPECT_EQ(cells(gemma3, 2049, 2, ollama), std::tuple(2304, 2048, 1024));  // 4098 in all
  EXPECT_EQ(cells(gemma3, 8192, 1, ollama), std::tuple(8192, 2048, 1024));
  EXPECT_EQ(cells(gemma3, 32768, 1, ollama), std::tuple(32768, 2048, 1024));
  EXPECT_EQ(cells(gemma3, 65536, 1, ollama), std::tuple(65536, 3072, 2048));
  EXPECT_EQ(cells(gemma2, 16384, 3, ollama), std::tuple(16384, 6144, 2048));
  // Without sliding layers only the slot is rounded; kvtune's own count is the identity.
  EXPECT_EQ(cells({32, 8, 128, 0, 0}, 8000, 1, ollama), std::tuple(8192, 0, 0));
  EXPECT_EQ(cells(gemma2, 8000, 1, CellAllocation{}), std::tuple(8000, 4096, 0));
  // A sliding layer kept as large as a full one (SGLang for Gemma): the slot, whatever the window.
  const CellAllocation whole = {16, 0, {}, 1, true};
  EXPECT_EQ(cells(gemma3, 32768, 1, whole), std::tuple(32768, 32768, 0));
  EXPECT_EQ(cells(gemma3, 1000, 4, whole), std::tuple(1008, 1008, 0));
  EXPECT_TRUE(allocated_cells(gemma3, 32768, 1, whole).sliding_full);
  EXPECT_FALSE(allocated_cells({32, 8, 128, 0, 0}, 8000, 1, whole).sliding_full);  // no sliding layer to size
  EXPECT_FALSE(allocated_cells(gemma3, 32768, 1, llama).sliding_full);
  // A rule scoped to some classes holds for them only; one scoped away from some, for every other
  // class and for a model that declares none.
  const CellAllocation only = {1, 0, {}, 1, true, false, {"Gemma2ForCausalLM"}};
  EXPECT_TRUE(cell_rule_applies(only, "Gemma2ForCausalLM"));
  EXPECT_FALSE(cell_rule_applies(only, "Gemma3ForCausalLM"));
  EXPECT_FALSE(cell_rule_applies(only, ""));
  const CellAllocation but = {1, 0, {}, 1, true, false, {}, {"GptOssForCausalLM"}};
  EXPECT_FALSE(cell_rule_applies(but, "GptOssForCausalLM"));
  EXPECT_TRUE(cell_rule_applies(but, "Gemma3ForCausalLM"));
  EXPECT_TRUE(cell_rule_applies(but, ""));
  EXPECT_TRUE(cell_rule_applies(llama, ""));
}

// vLLM's hybrid manager (kv_cache_utils.py): the layers of each kind in groups of the smaller kind's
// count, the last padded; the larger count when under 1.5 times the smaller. Gemma 3 27B: 10 full,
// 52 sliding, groups of 10, 60 sliding; Gemma 2 9B: 21 and 21, nothing padded; 12 sliding with 13
// full (gpt-oss-20b with a drafter): groups of 13.
TEST(MemoryModelTest, PaddedLayerGroupsRoundEachKindUp) {
  const CellAllocation vllm = {16, 16, {}, 16, false, true};
  auto layers = [&](const ModelShape& shape) {
    const AllocatedCells c = allocated_cells(shape, 32768, 1, vllm);
    return std::tuple{c.full_layers, c.sliding_layers, c.layer_group};
  };
  const ModelShape gemma3 = {62, 16, 128, 1024, 52};
  EXPECT_EQ(layers(gemma3), std::tuple(10, 60, 10));
  EXPECT_EQ(layers({42, 8, 256, 4096, 21}), std::tuple(21, 21, 21));
  EXPECT_EQ(layers({25, 8, 64, 128, 12}), std::tuple(13, 13, 13));
  EXPECT_EQ(layers({26, 1, 256, 512, 22}), std::tuple(4, 24, 4));   // Gemma 3 1B
  EXPECT_EQ(layers({20, 8, 128, 512, 12}), std::tuple(8, 16, 8));    // 12 is 1.5 x 8: groups of the smaller
  EXPECT_EQ(layers({19, 8, 128, 512, 11}), std::tuple(11, 11, 11));  // 11 is under 1.5 x 8: one group each
  EXPECT_EQ(layers({32, 8, 128, 0, 0}), std::tuple(32, 0, 0));      // one kind: nothing to group
  EXPECT_EQ(layers({4, 8, 128, 64, 4}), std::tuple(0, 4, 0));       // every layer slides
  const AllocatedCells c = allocated_cells(gemma3, 32768, 1, vllm);
  EXPECT_EQ(c.sliding, 1040);  // cdiv(1024, 16) + 1 blocks
  const ModelShape shape = allocated_shape(gemma3, c);
  EXPECT_EQ(shape.layers, 70);
  EXPECT_EQ(shape.sliding_layers, 60);
  EXPECT_EQ(padded_layers_text(gemma3, c), "; 60 sliding layers for 52 (groups of 10)");
  EXPECT_EQ(padded_layers_text(gemma3, allocated_cells(gemma3, 32768, 1, CellAllocation{})), "");
  // Without padding the shape's own counts come back.
  EXPECT_EQ(allocated_shape(gemma3, allocated_cells(gemma3, 32768, 1, CellAllocation{})).layers, 62);
}

// --- model presets ---------------------------------------------------------------------------------

TEST(ModelPresetTest, EveryListedModelHasAPreset) {
  const std::vector<std::string> names = model_preset_names(config_dir());
  const std::set<std::string> expected = {"llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b", "llama-3.2-1b",
                                          "llama-3.2-3b", "mistral-7b",    "qwen2.5-7b",     "qwen2.5-72b",
                                          "qwen3-8b",     "gemma-2-9b"};
  for (const std::string& name : expected) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
  }
  for (const std::string& name : names) {
    const ModelPreset p = find_model_preset(config_dir(), name);
    EXPECT_EQ(p.name, name);
    EXPECT_TRUE(p.source.starts_with("https://huggingface.co/")) << name << ": " << p.source;
    EXPECT_TRUE(p.source.ends_with("/config.json")) << name << ": " << p.source;
    EXPECT_EQ(p.q_heads % p.shape.kv_heads, 0) << name;
    EXPECT_GT(p.parameters, 0) << name;
    EXPECT_EQ(p.rope_convention, RopeConvention::rotate_half) << name;  // all are Hugging Face checkpoints
    EXPECT_EQ(check_model_shape(p.shape), "") << name;
  }
}

// The check values the task was given, independently of the files' own comments.
TEST(ModelPresetTest, ShapesMatchThePublishedConfigs) {
  const ModelPreset l70 = find_model_preset(config_dir(), "llama-3.1-70b");
  EXPECT_EQ(l70.shape.layers, 80);
  EXPECT_EQ(l70.shape.kv_heads, 8);
  EXPECT_EQ(l70.shape.head_dim, 128);
  const ModelPreset l8 = find_model_preset(config_dir(), "llama-3.1-8b");
  EXPECT_EQ(l8.shape.layers, 32);
  EXPECT_EQ(l8.shape.kv_heads, 8);
  EXPECT_EQ(l8.shape.head_dim, 128);
  EXPECT_EQ(l8.rope_theta, 500000.0);
  const ModelPreset gemma = find_model_preset(config_dir(), "gemma-2-9b");
  EXPECT_EQ(gemma.shape.head_dim, 256);
  EXPECT_EQ(gemma.shape.layers, 42);
  EXPECT_EQ(gemma.shape.kv_heads, 8);
  EXPECT_EQ(gemma.shape.sliding_window, 4096);
  EXPECT_EQ(gemma.shape.sliding_layers, 21);
  // transformers' Gemma2DecoderLayer: is_sliding = not bool(layer_idx % 2), so the even layers slide.
  const std::vector<int64_t> sliding = sliding_layer_indices(gemma);
  ASSERT_EQ(sliding.size(), 21u);
  for (size_t i = 0; i < sliding.size(); ++i) EXPECT_EQ(sliding[i], int64_t(2 * i));
  const ModelPreset qwen7 = find_model_preset(config_dir(), "qwen2.5-7b");
  EXPECT_EQ(qwen7.shape.layers, 28);
  EXPECT_EQ(qwen7.shape.kv_heads, 4);
  EXPECT_EQ(qwen7.shape.head_dim, 128);
  const ModelPreset qwen3 = find_model_preset(config_dir(), "qwen3-8b");
  EXPECT_EQ(qwen3.shape.layers, 36);
  EXPECT_EQ(qwen3.shape.kv_heads, 8);
  EXPECT_EQ(qwen3.shape.head_dim, 128);
  // Only the Gemma presets slide.
  for (const std::string& name : model_preset_names(config_dir())) {
    if (!name.starts_with("gemma-")) {
      EXPECT_EQ(find_model_preset(config_dir(), name).shape.sliding_layers, 0) << name;
    }
  }
}

// The Llama 3.1 and 3.2 configs' rope_scaling (config.json of meta-llama/Llama-3.1-8B, -70B, -405B:
// llama3, factor 8; Llama-3.2-1B, -3B: factor 32; low_freq_factor 1, high_freq_factor 4,
// original_max_position_embeddings 8192 in all five); Gemma 3 4B, 12B and 27B carry linear ×8 for their
// global layers; no other preset has one.
TEST(ModelPresetTest, Llama3PresetsCarryTheirConfigsRopeScaling) {
  for (const std::string& name : model_preset_names(config_dir())) {
    const RopeScaling s = find_model_preset(config_dir(), name).rope_scaling;
    if (name.starts_with("gemma-3-") && name != "gemma-3-1b") {
      EXPECT_EQ(s, (RopeScaling{RopeScalingType::linear, 8.0})) << name;  // the global layers' only
      continue;
    }
    if (!name.starts_with("llama-3.")) {
      EXPECT_EQ(s.type, RopeScalingType::none) << name;
      continue;
    }
    EXPECT_EQ(s.type, RopeScalingType::llama3) << name;
    EXPECT_EQ(s.factor, name.starts_with("llama-3.1") ? 8.0 : 32.0) << name;
    EXPECT_EQ(s.low_freq_factor, 1.0) << name;
    EXPECT_EQ(s.high_freq_factor, 4.0) << name;
    EXPECT_EQ(s.original_max_position, 8192.0) << name;
  }
}

// Every preset against its Hugging Face config.json, each value read in copies of the config
// (2026-12-07): ai-dynamo/aiconfigurator's stored configs (Llama-3.1-405B, Qwen3-0.6B,
// Qwen3-30B-A3B), AI-Hypercomputer/maxtext hf_model_configs.py (405B, Qwen3-0.6B),
// citsjtu2020/LLM-Prof sglang/Model_Config.md (Llama-3.1-8B, Llama-3.2-3B, Qwen2.5-7B, Qwen3-8B,
// Qwen3-30B-A3B), a printed Gemma2Config of google/gemma-2-9b (Retruth/deontic
// nlp_models/gemma2/README.md), Lightning-AI/litgpt litgpt/config.py (Llama-3.1-70B, Gemma 2), and
// copies of Llama-2-7b's, Llama-3.2-1B's, Mistral-7B-v0.3-Instruct's and Qwen2.5-72B's. head_dim is
// the config's or hidden_size / heads; parameters is each config's shape count, which matched a
// published figure every time (Qwen3-0.6B counts its tied embedding once, as num_parameters() does;
// its checkpoint stores lm_head too: 751 632 384). Gemma 3 (2026-12-07): TensorRT-LLM's
// test_modeling_gemma3.py config copies (1B whole, 27B's text_config), copies of the 4B's and 12B's
// text_config, and Gemma3TextConfig's defaults for the keys those leave out
// (configuration_gemma3.py @v4.50.0; its Orbax converter's _VARIANTS agree); parameters are the
// checkpoints' safetensors totals with the vision tower (Hugging Face API figures kept in test
// fixtures, keras-hub gemma3_presets.py), each reproduced from the shapes.
TEST(ModelPresetTest, EveryPresetMatchesItsPublishedConfig) {
  struct Published {
    const char* name;
    int64_t layers, kv_heads, q_heads, head_dim;
    double rope_theta;
    int64_t max_context, parameters;
    const char* architecture;
  };
  const char* gemma3_vl = "Gemma3ForConditionalGeneration";
  const Published published[] = {
      {"gemma-2-9b", 42, 8, 16, 256, 10000.0, 8192, 9241705984, "Gemma2ForCausalLM"},
      {"gemma-3-1b", 26, 1, 4, 256, 1000000.0, 32768, 999885952, "Gemma3ForCausalLM"},
      {"gemma-3-4b", 34, 4, 8, 256, 1000000.0, 131072, 4300079472, gemma3_vl},
      {"gemma-3-12b", 48, 8, 16, 256, 1000000.0, 131072, 12187325040, gemma3_vl},
      {"gemma-3-27b", 62, 16, 32, 128, 1000000.0, 131072, 27432406640, gemma3_vl},
      {"llama-3.1-8b", 32, 8, 32, 128, 500000.0, 131072, 8030261248, "LlamaForCausalLM"},
      {"llama-3.1-70b", 80, 8, 64, 128, 500000.0, 131072, 70553706496, "LlamaForCausalLM"},
      {"qwen2.5-7b", 28, 4, 28, 128, 1000000.0, 131072, 7615616512, "Qwen2ForCausalLM"},
      {"qwen3-8b", 36, 8, 32, 128, 1000000.0, 40960, 8190735360, "Qwen3ForCausalLM"},
      {"llama-2-7b", 32, 32, 32, 128, 10000.0, 4096, 6738415616, "LlamaForCausalLM"},
      {"llama-3.1-405b", 126, 8, 128, 128, 500000.0, 131072, 405853388800, "LlamaForCausalLM"},
      {"llama-3.2-1b", 16, 8, 32, 64, 500000.0, 131072, 1235814400, "LlamaForCausalLM"},
      {"llama-3.2-3b", 28, 8, 24, 128, 500000.0, 131072, 3212749824, "LlamaForCausalLM"},
      {"mistral-7b", 32, 8, 32, 128, 1000000.0, 32768, 7248023552, "MistralForCausalLM"},
      {"qwen2.5-72b", 80, 8, 64, 128, 1000000.0, 131072, 72706203648, "Qwen2ForCausalLM"},
      {"qwen3-0.6b", 28, 8, 16, 128, 1000000.0, 40960, 596049920, "Qwen3ForCausalLM"},
      {"qwen3-30b-a3b", 48, 4, 32, 128, 1000000.0, 40960, 30532122624, "Qwen3MoeForCausalLM"},
  };
  ASSERT_EQ(std::size(published), model_preset_names(config_dir()).size());  // a new preset joins the table
  for (const Published& want : published) {
    const ModelPreset p = find_model_preset(config_dir(), want.name);
    EXPECT_EQ(p.shape.layers, want.layers) << want.name;
    EXPECT_EQ(p.shape.kv_heads, want.kv_heads) << want.name;
    EXPECT_EQ(p.q_heads, want.q_heads) << want.name;
    EXPECT_EQ(p.shape.head_dim, want.head_dim) << want.name;
    EXPECT_EQ(p.rope_theta, want.rope_theta) << want.name;
    EXPECT_EQ(p.max_context, want.max_context) << want.name;
    EXPECT_EQ(p.parameters, want.parameters) << want.name;
    EXPECT_EQ(p.architecture, want.architecture) << want.name;
  }
}

// Gemma 3 slides five layers in six (layers 5, 11, ... are global) over a window of 512 (1B) or 1024
// tokens, and turns them by rope_local_base_freq 10000 without the global layers' scaling.
TEST(ModelPresetTest, Gemma3PresetsSlideFiveLayersInSixWithTheirOwnRopeBase) {
  const std::pair<const char*, int64_t> sliding[] = {{"gemma-3-1b", 22}, {"gemma-3-4b", 29}, {"gemma-3-12b", 40},
                                                     {"gemma-3-27b", 52}};
  for (const auto& [name, layers] : sliding) {
    const ModelPreset p = find_model_preset(config_dir(), name);
    EXPECT_EQ(p.shape.sliding_layers, layers) << name;
    EXPECT_EQ(p.shape.sliding_window, std::string_view(name) == "gemma-3-1b" ? 512 : 1024) << name;
    EXPECT_EQ(p.sliding_rope_theta, 10000.0) << name;
    const std::vector<int64_t> idx = sliding_layer_indices(p);
    EXPECT_TRUE(std::find(idx.begin(), idx.end(), 5) == idx.end()) << name;  // the first global layer
    EXPECT_EQ(idx.front(), 0) << name;
  }
  for (const std::string& name : model_preset_names(config_dir())) {
    if (!name.starts_with("gemma-3-")) {
      EXPECT_EQ(find_model_preset(config_dir(), name).sliding_rope_theta, 0.0) << name;
    }
  }
}

TEST(ModelPresetTest, Llama70bPresetGivesTheDesignFigure) {
  const ModelPreset p = find_model_preset(config_dir(), "llama-3.1-70b");
  EXPECT_EQ(estimate(p.shape, k128k, "f16", "f16").total_bytes, 40 * GiB);
}

TEST(ModelPresetTest, UnknownModelListsTheAvailableNames) {
  const std::string what = input_error([] { find_model_preset(config_dir(), "llama-9"); });
  EXPECT_THAT(what, HasSubstr("unknown model 'llama-9'"));
  EXPECT_THAT(what, HasSubstr("llama-3.1-70b"));
  EXPECT_THAT(what, HasSubstr("gemma-2-9b"));
  EXPECT_THAT(what, HasSubstr("qwen3-8b"));
}

constexpr const char* kMinimalPreset =
    "layers = 4\nkv_heads = 2\nq_heads = 8\nhead_dim = 64\nrope_theta = 10000.0\n"
    "rope_convention = \"interleaved\"\nmax_context = 2048\n";

TEST(ModelPresetTest, ParsesAMinimalFileAndDefaultsTheRest) {
  const ModelPreset p = parse_model_preset(kMinimalPreset, "mine.toml", "mine");
  EXPECT_EQ(p.name, "mine");
  EXPECT_EQ(p.title, "mine");
  EXPECT_EQ(p.shape.layers, 4);
  EXPECT_EQ(p.rope_convention, RopeConvention::interleaved);
  EXPECT_EQ(p.parameters, 0);
  EXPECT_EQ(p.shape.sliding_layers, 0);
  EXPECT_EQ(p.architecture, "");
}

TEST(ModelPresetTest, SlidingWindowWithoutPatternSlidesEveryLayer) {
  const ModelPreset p = parse_model_preset(std::string(kMinimalPreset) + "sliding_window = 512\n", "mine.toml", "mine");
  EXPECT_EQ(p.shape.sliding_layers, 4);
  const ModelPreset every_third = parse_model_preset(
      std::string(kMinimalPreset) + "sliding_window = 512\nsliding_window_pattern = 3\n", "mine.toml", "mine");
  EXPECT_EQ(every_third.shape.sliding_layers, 3);  // layers 0, 1, 3 slide; layer 2 is global
  const ModelPreset local_base = parse_model_preset(
      std::string(kMinimalPreset) + "sliding_window = 512\nsliding_rope_theta = 10000.0\n", "mine.toml", "mine");
  EXPECT_EQ(local_base.sliding_rope_theta, 10000.0);
  EXPECT_EQ(every_third.sliding_rope_theta, 0.0);  // the sliding layers turn as the others do
}

TEST(ModelPresetTest, BadFilesNameFileLineColumnAndKey) {
  auto parse = [](const std::string& text) { return input_error([&] { parse_model_preset(text, "m.toml", "m"); }); };
  const std::string unknown = parse(std::string(kMinimalPreset) + "kv_head = 8\n");
  EXPECT_THAT(unknown, HasSubstr("m.toml:8:1"));
  EXPECT_THAT(unknown, HasSubstr("unknown key 'kv_head'"));
  EXPECT_THAT(unknown, HasSubstr("kv_heads"));  // the valid keys are listed
  EXPECT_THAT(parse("layers = 4\n"), HasSubstr("missing key 'kv_heads'"));
  EXPECT_THAT(parse("layers = \"four\"\n"), HasSubstr("m.toml:1:10: 'layers' must be an integer"));
  EXPECT_THAT(parse("layers = 0\n"), HasSubstr("'layers' must be an integer in 1..4096"));
  EXPECT_THAT(parse("layers = [\n"), HasSubstr("m.toml:"));
  const std::string bad_groups = parse(
      "layers = 4\nkv_heads = 3\nq_heads = 8\nhead_dim = 64\nrope_theta = 1e4\nrope_convention = \"rotate_half\"\n"
      "max_context = 8\n");
  EXPECT_THAT(bad_groups, HasSubstr("m.toml:3:11"));
  EXPECT_THAT(bad_groups, HasSubstr("multiple of 'kv_heads'"));
  EXPECT_THAT(parse(std::string(kMinimalPreset) + "sliding_window_pattern = 2\n"),
              HasSubstr("'sliding_window_pattern' needs 'sliding_window'"));
  EXPECT_THAT(parse(std::string(kMinimalPreset) + "sliding_rope_theta = 10000.0\n"),
              HasSubstr("m.toml:8:22: 'sliding_rope_theta' needs 'sliding_window'"));
  EXPECT_THAT(parse(std::string(kMinimalPreset) + "sliding_window = 512\nsliding_rope_theta = 1.0\n"),
              HasSubstr("m.toml:9:22: 'sliding_rope_theta' must be a number in"));
  EXPECT_THAT(parse(std::string(kMinimalPreset) + "architecture = \"\"\n"),
              HasSubstr("m.toml:8:16: 'architecture' must be the config's architectures[0], not empty"));
  EXPECT_THAT(parse(std::string(kMinimalPreset) + "architecture = [\"LlamaForCausalLM\"]\n"),
              HasSubstr("m.toml:8:16: 'architecture' must be a string"));
  EXPECT_THAT(
      parse("layers = 4\nkv_heads = 2\nq_heads = 8\nhead_dim = 64\nrope_theta = 1e4\nrope_convention = \"neox\"\n"),
      HasSubstr("m.toml:6:19: 'rope_convention' must be one of: rotate_half, interleaved"));
}

TEST(ModelPresetTest, ARopeScalingTableIsCheckedKeyByKey) {
  auto parse = [](const std::string& scaling) {
    return input_error([&] { parse_model_preset(std::string(kMinimalPreset) + scaling, "m.toml", "m"); });
  };
  const ModelPreset linear =
      parse_model_preset(std::string(kMinimalPreset) + "[rope_scaling]\nrope_type = \"linear\"\nfactor = 4.0\n",
                         "m.toml", "m");
  EXPECT_EQ(linear.rope_scaling.type, RopeScalingType::linear);
  EXPECT_EQ(linear.rope_scaling.factor, 4.0);
  EXPECT_THAT(parse("[rope_scaling]\nrope_type = \"yarn\"\nfactor = 4.0\n"),
              HasSubstr("m.toml:9:13: 'rope_type' must be one of: default, linear, llama3"));
  EXPECT_THAT(parse("[rope_scaling]\nrope_type = \"linear\"\nfactor = 0.5\n"),
              HasSubstr("m.toml:10:10: 'factor' must be a number in 1"));
  EXPECT_THAT(parse("[rope_scaling]\nrope_type = \"llama3\"\nfactor = 8.0\n"),
              HasSubstr("missing key 'low_freq_factor' in [rope_scaling]"));
  EXPECT_THAT(parse("[rope_scaling]\nrope_type = \"llama3\"\nfactor = 8.0\nlow_freq_factor = 4.0\n"
                    "high_freq_factor = 1.0\noriginal_max_position_embeddings = 8192\n"),
              HasSubstr("m.toml:12:20: rope_scaling 'llama3': needs 0 < 'low_freq_factor' < 'high_freq_factor'"));
  EXPECT_THAT(parse("[rope_scaling]\nrope_type = \"linear\"\nfactor = 2.0\nlow_freq_factor = 1.0\n"),
              HasSubstr("unknown key 'low_freq_factor' in [rope_scaling]"));
}

TEST(ModelPresetTest, ConfigDirIsFoundBesideTheExecutableOrInTheSourceTree) {
  const std::vector<fs::path> c = config_dir_candidates("/opt/kvtune/bin", "/src/kvtune");
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0], fs::path("/opt/kvtune/share/kvtune/configs"));
  EXPECT_EQ(c[1], fs::path("/opt/kvtune/configs"));
  EXPECT_EQ(c[2], fs::path("/src/kvtune/configs"));
  EXPECT_EQ(config_dir_candidates("/opt/kvtune/bin", "").size(), 2u);

  EXPECT_EQ(find_config_dir({"/nonexistent/a", config_dir()}), config_dir());
  const std::string what = input_error([] { find_config_dir({"/nonexistent/a", "/nonexistent/b"}); });
  EXPECT_THAT(what, HasSubstr("/nonexistent/a"));
  EXPECT_THAT(what, HasSubstr("/nonexistent/b"));
}

}  // namespace
}  // namespace kvtune
