// End-to-end tests of `kvtune memory`: the DESIGN §6 figures through the command line, its JSON
// keys, the default weights of a preset, and exit status 2 with a clear message for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_helpers.h"

namespace kvtune::e2e {
namespace {

using json = nlohmann::json;
using ::testing::HasSubstr;

constexpr uint64_t GiB = uint64_t(1) << 30;

class MemoryCliTest : public ScratchDirTest {
 protected:
  // Runs `kvtune memory ARGS... --json`, expects success and returns the parsed output.
  json memory_json(std::vector<std::string> args) {
    args.insert(args.begin(), "memory");
    args.push_back("--json");
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 0) << r.err;
    if (r.status != 0) return json::object();
    return json::parse(r.out);
  }

  // Runs `kvtune memory ARGS...`, expects exit status 2 and returns stderr.
  std::string memory_error(std::vector<std::string> args) {
    args.insert(args.begin(), "memory");
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2) << "stdout: " << r.out << "\nstderr: " << r.err;
    EXPECT_EQ(r.out, "");
    return r.err;
  }
};

// --runtime: the cache as llama-server allocates it (slots of 256 cells, a sliding layer's window
// plus -ub 512 rounded up to 256; Ollama's batch for one sequence of 32768 tokens is 1024). Gemma 3
// 27B, q8_0 for K and V: 4352 bytes per token and layer; 10 full layers of 32768 cells and 52 sliding
// ones of 1024 (kvtune), 1536 (llama.cpp) or 2048 (Ollama).
TEST_F(MemoryCliTest, ARuntimeThatRoundsCellsGetsItsOwnFigure) {
  const std::vector<std::string> base = {"--model", "gemma-3-27b", "--ctx", "32768", "--k", "q8_0", "--v", "q8_0",
                                         "--gpu-mem", "80GiB"};
  auto with = [&](const std::string& runtime) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--runtime", runtime});
    return memory_json(args);
  };
  const json llama = with("llama-cpp");
  EXPECT_EQ(llama["total_bytes"], 10ull * 32768 * 4352 + 52ull * 1024 * 4352);
  EXPECT_EQ(llama["max_sequences"], 18);
  EXPECT_EQ(llama["runtime"]["title"], "llama.cpp");
  EXPECT_EQ(llama["runtime"]["slot_cells"], 32768);
  EXPECT_EQ(llama["runtime"]["sliding_cells"], 1536);
  EXPECT_EQ(llama["runtime"]["total_bytes"], 10ull * 32768 * 4352 + 52ull * 1536 * 4352);
  EXPECT_EQ(llama["runtime"]["max_sequences"], 17);
  // Ollama: 1024 more cells for one sequence, but 2048 once two or more share its 32768-token
  // batch threshold; 28.9 GiB free over 10 x 32768 + 52 x 3072 cells of 4352 bytes holds 14.
  const json ollama = with("ollama")["runtime"];
  EXPECT_EQ(ollama["total_bytes"], 10ull * 32768 * 4352 + 52ull * 2048 * 4352);
  EXPECT_EQ(ollama["sliding_cells_at_max"], 3072);
  EXPECT_EQ(ollama["max_sequences"],
            (80 * GiB - 54864813280ull) / (10ull * 32768 * 4352 + 52ull * 3072 * 4352));
  EXPECT_EQ(ollama["max_sequences"], 14);
  EXPECT_EQ(with("llama-cpp@b6974")["runtime"]["rounds_cells"], false);  // before PR #17046
  // vLLM: blocks of 16, a sliding layer its window and one block (1040), 60 sliding layers for 52.
  const json vllm = with("vllm")["runtime"];
  EXPECT_EQ(vllm["rounds_cells"], true);
  EXPECT_EQ(vllm["sliding_cells"], 1040);
  EXPECT_EQ(vllm["full_layers"], 10);
  EXPECT_EQ(vllm["sliding_layers"], 60);
  EXPECT_EQ(vllm["total_bytes"], 10ull * 32768 * 4352 + 60ull * 1040 * 4352);
  EXPECT_EQ(vllm["max_sequences"], 18);
  EXPECT_EQ(vllm["layer_group"], 10);
  const RunResult grouped = run({"memory", "--model", "gemma-3-27b", "--ctx", "32768", "--k", "q8_0", "--v", "q8_0",
                                 "--runtime", "vllm"});
  EXPECT_THAT(grouped.out, HasSubstr("32768 cells on a full layer, 1040 on a sliding one (1024 + 16, rounded up); 60 "
                                     "sliding layers for 52 (groups of 10)\n"));
  // TensorRT-LLM without max_attention_window keeps every layer whole, whatever the model; LMDeploy
  // 0.16 does for Gemma 3's multimodal class (gemma-3-27b), SGLang for Gemma's classes; neither for a
  // hand-given shape, which declares no architecture.
  EXPECT_EQ(with("tensorrt-llm")["runtime"]["total_bytes"], 62ull * 32768 * 4352);
  EXPECT_EQ(with("lmdeploy")["runtime"]["total_bytes"], 62ull * 32768 * 4352);
  const std::vector<std::string> hand = {"--layers", "62", "--kv-heads", "16", "--head-dim", "128", "--sliding-window",
                                         "1024", "--sliding-layers", "52", "--ctx", "32768", "--k", "q8_0", "--v",
                                         "q8_0"};
  auto hand_with = [&](const std::string& runtime) {
    std::vector<std::string> args = hand;
    args.insert(args.end(), {"--runtime", runtime});
    return memory_json(args)["runtime"];
  };
  EXPECT_EQ(hand_with("sglang")["sliding_full"], true);  // no class: not one with SGLang's sliding pool
  EXPECT_EQ(hand_with("sglang")["total_bytes"], 62ull * 32768 * 4352);
  EXPECT_EQ(hand_with("lmdeploy")["rounds_cells"], false);  // LMDeploy's rule is for one class only
  EXPECT_EQ(hand_with("lmdeploy")["sliding_full"], nullptr);
  EXPECT_EQ(hand_with("tensorrt-llm")["sliding_full"], true);
  EXPECT_EQ(with("lmdeploy@0.9.2")["runtime"]["rounds_cells"], false);
  const RunResult none = run({"memory", "--model", "gemma-3-27b", "--ctx", "8192", "--k", "q8_0", "--v", "q8_0",
                              "--runtime", "lmdeploy@0.9.2"});
  EXPECT_THAT(none.out, HasSubstr("LMDeploy 0.9.2: its table declares no cell rounding, so kvtune's count above is all "
                                  "there is (a recommendation's caveats say how it sizes a sliding layer)"));
  // Gemma 2 is not LMDeploy's multimodal Gemma 3: its count stands there, while SGLang keeps it whole.
  const std::vector<std::string> gemma2 = {"--model", "gemma-2-9b", "--ctx", "8192", "--k", "q8_0", "--v", "q8_0",
                                           "--runtime"};
  auto gemma2_with = [&](const std::string& runtime) {
    std::vector<std::string> args = gemma2;
    args.push_back(runtime);
    return memory_json(args)["runtime"];
  };
  EXPECT_EQ(gemma2_with("lmdeploy")["rounds_cells"], false);
  EXPECT_EQ(gemma2_with("sglang")["sliding_full"], true);
  // Ollama before llama-server: Gemma 2 on its vendored llama.cpp keeps sliding layers whole,
  // Gemma 3 on its own engine keeps the window (kvtune's count).
  EXPECT_EQ(gemma2_with("ollama@0.24.0")["sliding_full"], true);
  EXPECT_EQ(gemma2_with("ollama@0.24.0")["total_bytes"], 42ull * 8192 * 8 * 256 * 2 * 34 / 32);
  EXPECT_EQ(with("ollama@0.24.0")["runtime"]["rounds_cells"], false);
  EXPECT_EQ(memory_json(base)["runtime"], nullptr);
  // SGLang keeps each sliding layer as large as a full one for Gemma 3: 62 x 32768 cells.
  const json sglang = with("sglang")["runtime"];
  EXPECT_EQ(sglang["sliding_cells"], 32768);
  EXPECT_EQ(sglang["sliding_full"], true);
  EXPECT_EQ(sglang["total_bytes"], 62ull * 32768 * 4352);
  EXPECT_EQ(sglang["max_sequences"], (80 * GiB - 54864813280ull) / (62ull * 32768 * 4352));
  EXPECT_EQ(sglang["max_sequences"], 3);
  EXPECT_EQ(llama["runtime"]["sliding_full"], false);
  const RunResult r = run([&] {
    std::vector<std::string> a = {"memory"};
    a.insert(a.end(), base.begin(), base.end());
    a.insert(a.end(), {"--runtime", "llama-cpp"});
    return a;
  }());
  EXPECT_THAT(r.out, HasSubstr("runtime        llama.cpp b10970: 32768 cells on a full layer, 1536 on a sliding one "
                               "(1024 + 512, rounded up)\nallocated      1.65 GiB per sequence  (1773666304 bytes)\n"
                               "max sequences  17  as llama.cpp allocates\n"));
  auto bad = [&](const std::string& runtime) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--runtime", runtime});
    return memory_error(args);
  };
  const RunResult whole = run({"memory", "--model", "gemma-3-27b", "--ctx", "32768", "--k", "q8_0", "--v", "q8_0",
                               "--runtime", "sglang"});
  EXPECT_THAT(whole.out, HasSubstr("runtime        SGLang 0.5.18: 32768 cells on a full layer, as many on a sliding "
                                   "one (sized as a full one; the window is not kept apart)\n"));
  EXPECT_THAT(bad("nope"),
              HasSubstr("--runtime: unknown runtime 'nope'; valid ones are: llama-cpp, lmdeploy, ollama"));
  EXPECT_THAT(bad(""), HasSubstr("--runtime: an empty value"));
  // A slot the window and batch reach: the sliding layers hold it whole, and the text says so.
  const RunResult capped = run({"memory", "--model", "gemma-3-27b", "--ctx", "1024", "--k", "q8_0", "--v", "q8_0",
                                "--runtime", "llama-cpp"});
  EXPECT_THAT(capped.out,
              HasSubstr("1024 cells on a full layer, as many on a sliding one (1024 + 512 reach the slot)"));
  EXPECT_THAT(bad("llama-cpp@"), HasSubstr("--runtime 'llama-cpp@': expected NAME or NAME@VERSION"));
  EXPECT_THAT(bad("llama-cpp@b1"),
              HasSubstr("--runtime 'llama-cpp@b1': llama.cpp version 'b1' is older than this table"));
}

TEST_F(MemoryCliTest, Llama70bAtF16Is320KiBPerTokenAnd40GiB) {
  const json j = memory_json({"--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16"});
  EXPECT_EQ(j["k_bits"], 16.0);
  EXPECT_EQ(j["v_bits"], 16.0);
  EXPECT_EQ(j["bytes_per_token"], 327680.0);
  EXPECT_EQ(j["total_bytes"], 40 * GiB);
  EXPECT_TRUE(j["max_sequences"].is_null());  // no --gpu-mem

  const RunResult text = run({"memory", "--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16"});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("320.0 KiB/token"));
  EXPECT_THAT(text.out, HasSubstr("40.00 GiB"));
  EXPECT_THAT(text.out, HasSubstr("327680 bytes"));
}

TEST_F(MemoryCliTest, Llama70bAtFp8Is20GiB) {
  const json j = memory_json({"--model", "llama-3.1-70b", "--ctx", "131072", "--k", "fp8:format=e4m3,scale=unit", "--v",
                              "fp8:format=e4m3,scale=unit"});
  EXPECT_EQ(j["total_bytes"], 20 * GiB);
}

TEST_F(MemoryCliTest, JsonHasTheDocumentedKeys) {
  const json j =
      memory_json({"--model", "llama-3.1-8b", "--ctx", "8192", "--k", "q8_0", "--v", "q4_0", "--gpu-mem", "80GiB"});
  for (const char* key : {"k_bits", "v_bits", "bytes_per_token", "total_bytes", "max_sequences", "model", "ctx",
                          "layers", "kv_heads", "head_dim", "k", "v", "gpu_mem_bytes", "weight_bytes"}) {
    EXPECT_TRUE(j.contains(key)) << key << " missing from " << j.dump();
  }
  EXPECT_EQ(j["model"], "llama-3.1-8b");
  EXPECT_EQ(j["ctx"], 8192);
  EXPECT_EQ(j["k"], "q8_0");
  EXPECT_EQ(j["v"], "q4_0");
  EXPECT_EQ(j["k_bits"], 8.5);
  EXPECT_EQ(j["v_bits"], 4.5);
}

// The same 130 KiB/token with int schemes sized exactly like q8_0 and q4_0, from a shape given by hand.
TEST_F(MemoryCliTest, ShapeFromOptionsGivesTheQ8_0Q4_0Figure) {
  const json j =
      memory_json({"--layers", "80", "--kv-heads", "8", "--head-dim", "128", "--ctx", "131072", "--k",
                   "int:bits=8,axis=token,group=32,scale=f16", "--v", "int:bits=4,axis=token,group=32,scale=f16"});
  EXPECT_EQ(j["bytes_per_token"], 130.0 * 1024);
  EXPECT_TRUE(j["model"].is_null());
}

TEST_F(MemoryCliTest, SequencesThatFitUseGpuMemoryMinusWeights) {
  const std::vector<std::string> base = {"--layers", "80",  "--kv-heads", "8",   "--head-dim", "128",       "--ctx",
                                         "131072",   "--k", "f16",        "--v", "f16",        "--gpu-mem", "80GiB"};
  auto with = [&](const std::string& weights) {
    std::vector<std::string> args = base;
    args.insert(args.end(), {"--weights", weights});
    return memory_json(args);
  };
  EXPECT_EQ(with("0")["max_sequences"], 2);  // 80 GiB / 40 GiB
  EXPECT_EQ(with("1")["max_sequences"], 1);
  EXPECT_EQ(with("40GiB")["max_sequences"], 1);
  EXPECT_EQ(with("80GiB")["max_sequences"], 0);
  EXPECT_EQ(with("100GiB")["max_sequences"], 0);
  EXPECT_EQ(with("40GiB")["weight_bytes"], 40 * GiB);
  EXPECT_EQ(with("40GiB")["gpu_mem_bytes"], 80 * GiB);
}

// Without --weights a preset's weights are bf16: 2 bytes per parameter.
TEST_F(MemoryCliTest, PresetWeightsDefaultToBf16) {
  const json j =
      memory_json({"--model", "llama-3.1-8b", "--ctx", "8192", "--k", "f16", "--v", "f16", "--gpu-mem", "80GiB"});
  const uint64_t weights = 2 * uint64_t(8030261248);
  EXPECT_EQ(j["weight_bytes"], weights);
  // 32 layers x 8 KV heads x 128 x 4 bytes x 8192 tokens = 1 GiB per sequence.
  EXPECT_EQ(j["total_bytes"], GiB);
  EXPECT_EQ(j["max_sequences"], (80 * GiB - weights) / GiB);

  const RunResult text =
      run({"memory", "--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16", "--gpu-mem", "141GB"});
  EXPECT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("bf16"));
  EXPECT_THAT(text.out, HasSubstr("the weights alone do not fit"));
}

TEST_F(MemoryCliTest, GemmaSlidingLayersRoughlyHalveTheCacheAtLongContext) {
  const json j = memory_json({"--model", "gemma-2-9b", "--ctx", "131072", "--k", "f16", "--v", "f16"});
  EXPECT_EQ(j["sliding_layers"], 21);
  EXPECT_EQ(j["sliding_window"], 4096);
  const json all_global = memory_json(
      {"--layers", "42", "--kv-heads", "8", "--head-dim", "256", "--ctx", "131072", "--k", "f16", "--v", "f16"});
  const json by_hand = memory_json({"--layers", "42", "--kv-heads", "8", "--head-dim", "256", "--sliding-window",
                                    "4096", "--sliding-layers", "21", "--ctx", "131072", "--k", "f16", "--v", "f16"});
  EXPECT_EQ(j["total_bytes"], by_hand["total_bytes"]);
  EXPECT_NEAR(j["total_bytes"].get<double>() / all_global["total_bytes"].get<double>(), 0.515625, 1e-12);
}

TEST_F(MemoryCliTest, PresetFileByPath) {
  write_text(path("tiny.toml"),
             "layers = 2\nkv_heads = 1\nq_heads = 2\nhead_dim = 64\nrope_theta = 10000.0\n"
             "rope_convention = \"rotate_half\"\nmax_context = 1024\n");
  const json j = memory_json({"--model", path("tiny.toml").string(), "--ctx", "1024", "--k", "f16", "--v", "f16"});
  EXPECT_EQ(j["model"], "tiny");
  EXPECT_EQ(j["total_bytes"], 2 * 1 * 64 * 4 * 1024);
}

// --- tensor parallelism: per-GPU figures ----------------------------------------------------------

// Llama-3.1-70B, f16 K and V at 131072 tokens, 140 GB (140e9 bytes) of weights:
// 8 GPUs: 1 of 8 KV heads each; 80 layers x 1 x 2 (K, V) x 131072 x 128 x 2 B = 5 GiB per sequence per GPU;
// weights 140e9 / 8 = 17.5e9 per GPU; free 85899345920 - 17500000000 = 68399345920 (63.70 GiB) per GPU;
// 68399345920 / 5368709120 = 12.7: 12 sequences.
TEST_F(MemoryCliTest, Llama70bOn8GpusHolds5GiBPerSequencePerGpuAnd12Sequences) {
  const std::vector<std::string> base = {"--model", "llama-3.1-70b", "--ctx",     "131072", "--k",     "f16",
                                         "--v",     "f16",           "--gpu-mem", "80GiB",  "--weights", "140GB"};
  std::vector<std::string> args = base;
  args.insert(args.end(), {"--gpus", "8"});
  const json j = memory_json(args);
  EXPECT_EQ(j["gpus"], 8);
  EXPECT_EQ(j["kv_heads_per_gpu"], 1);
  EXPECT_EQ(j["bytes_per_sequence_per_gpu"], 5 * GiB);
  EXPECT_EQ(j["total_bytes"], 40 * GiB);  // the whole sequence, over all GPUs
  EXPECT_EQ(j["gpu_mem_bytes"], 80 * GiB);  // one GPU's
  EXPECT_EQ(j["weight_bytes"], 140000000000ull);
  EXPECT_EQ(j["weight_bytes_per_gpu"], 17500000000ull);
  EXPECT_EQ(j["free_bytes_per_gpu"], 68399345920ull);
  EXPECT_EQ(j["max_sequences"], 12);
  // The same with the count in --gpu-mem, and with both when they agree.
  std::vector<std::string> nx = {"--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16",
                                 "--gpu-mem", "8x80GiB", "--weights", "140GB"};
  EXPECT_EQ(memory_json(nx)["max_sequences"], 12);
  nx.insert(nx.end(), {"--gpus", "8"});
  EXPECT_EQ(memory_json(nx)["max_sequences"], 12);
  // One GPU: 140 GB of weights do not fit in 80 GiB.
  EXPECT_EQ(memory_json(base)["max_sequences"], 0);
  EXPECT_EQ(memory_json(base)["gpus"], 1);
  EXPECT_EQ(memory_json(base)["bytes_per_sequence_per_gpu"], 40 * GiB);

  args.insert(args.begin(), "memory");
  const RunResult text = run(args);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("gpus           8, tensor parallel: 1 of 8 KV heads per GPU\n"));
  EXPECT_THAT(text.out, HasSubstr("per GPU        5.00 GiB per sequence  (5368709120 bytes)"));
  EXPECT_THAT(text.out, HasSubstr("gpu memory     80.00 GiB per GPU"));
  EXPECT_THAT(text.out, HasSubstr("weights/GPU    16.30 GiB  (17500000000 bytes: split evenly over 8 GPUs"));
  EXPECT_THAT(text.out, HasSubstr("free per GPU   63.70 GiB  (68399345920 bytes)"));
  EXPECT_THAT(text.out, HasSubstr("max sequences  12  of 131072 tokens"));
}

// 2 GPUs: 4 KV heads each, 80 x 4 x 2 x 131072 x 128 x 2 B = 20 GiB per sequence per GPU;
// 40 GiB of weights are 20 GiB per GPU, leaving 60 GiB: 3 sequences.
TEST_F(MemoryCliTest, Llama70bOn2GpusHolds20GiBPerSequencePerGpu) {
  const json j = memory_json({"--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16", "--gpu-mem",
                              "2x80GiB", "--weights", "40GiB"});
  EXPECT_EQ(j["gpus"], 2);
  EXPECT_EQ(j["kv_heads_per_gpu"], 4);
  EXPECT_EQ(j["bytes_per_sequence_per_gpu"], 20 * GiB);
  EXPECT_EQ(j["weight_bytes_per_gpu"], 20 * GiB);
  EXPECT_EQ(j["free_bytes_per_gpu"], 60 * GiB);
  EXPECT_EQ(j["max_sequences"], 3);
  // Without --gpu-mem the cache figures per GPU are still given.
  const json cache = memory_json({"--model", "llama-3.1-70b", "--ctx", "131072", "--k", "f16", "--v", "f16", "--gpus", "2"});
  EXPECT_EQ(cache["bytes_per_sequence_per_gpu"], 20 * GiB);
  EXPECT_TRUE(cache["max_sequences"].is_null());
  EXPECT_TRUE(cache["free_bytes_per_gpu"].is_null());
}

// Qwen2.5-7B has 4 KV heads; on 8 GPUs each holds one (replicated), so a GPU's share is a quarter:
// 28 layers x 1 x 2 x 32768 x 128 x 2 B = 448 MiB (469762048 bytes) of the 1792 MiB sequence.
// bf16 weights 2 x 7615616512 = 15231233024, 1903904128 per GPU; (24 GiB - 1903904128) / 469762048 = 50.8.
TEST_F(MemoryCliTest, FewerKvHeadsThanGpusReplicatesThem) {
  const std::vector<std::string> args = {"--model", "qwen2.5-7b", "--ctx", "32768", "--k", "f16", "--v", "f16",
                                         "--gpu-mem", "24GiB", "--gpus", "8"};
  const json j = memory_json(args);
  EXPECT_EQ(j["kv_heads_per_gpu"], 1);
  EXPECT_EQ(j["total_bytes"], 1792ull << 20);
  EXPECT_EQ(j["bytes_per_sequence_per_gpu"], 448ull << 20);
  EXPECT_EQ(j["weight_bytes_per_gpu"], 1903904128ull);
  EXPECT_EQ(j["max_sequences"], 50);
  std::vector<std::string> text_args = args;
  text_args.insert(text_args.begin(), "memory");
  const RunResult text = run(text_args);
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("1 of 4 KV heads per GPU (replicated: more GPUs than KV heads)"));
}

// --- bad input: exit status 2 and a message naming what is wrong ---------------------------------

TEST_F(MemoryCliTest, BadGpuCountsExit2NamingTheOption) {
  const std::vector<std::string> base = {"--model", "llama-3.1-70b", "--ctx", "8192", "--k", "f16", "--v", "f16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return memory_error(args);
  };
  EXPECT_THAT(with({"--gpus", "0"}), HasSubstr("--gpus"));
  EXPECT_THAT(with({"--gpus", "two"}), HasSubstr("--gpus"));
  EXPECT_THAT(with({"--gpus", "4097"}), HasSubstr("--gpus"));
  EXPECT_THAT(with({"--gpu-mem", "2x80GiB", "--gpus", "4"}),
              HasSubstr("--gpus 4 disagrees with --gpu-mem 2xSIZE (2 GPUs)"));
  EXPECT_THAT(with({"--gpu-mem", "0x80GiB"}), HasSubstr("--gpu-mem '0x80GiB': the GPU count must be in 1..4096"));
  EXPECT_THAT(with({"--gpu-mem", "2x"}), HasSubstr("--gpu-mem '2x': no size after 'x'"));
  EXPECT_THAT(with({"--gpu-mem", "2.5x80GiB"}), HasSubstr("--gpu-mem '2.5x80GiB': the GPU count before 'x'"));
  EXPECT_THAT(with({"--gpu-mem", "2x80GX"}), HasSubstr("unknown unit 'GX'"));
  EXPECT_THAT(with({"--gpu-mem", "2x0"}), HasSubstr("a GPU needs more than 0 bytes"));
}

TEST_F(MemoryCliTest, UnknownModelListsThePresets) {
  const std::string err = memory_error({"--model", "llama-9", "--ctx", "1", "--k", "f16", "--v", "f16"});
  EXPECT_THAT(err, HasSubstr("unknown model 'llama-9'"));
  EXPECT_THAT(err, HasSubstr("llama-3.1-70b"));
  EXPECT_THAT(err, HasSubstr("gemma-2-9b"));
}

TEST_F(MemoryCliTest, BadSizesExit2NamingOptionAndValue) {
  const std::vector<std::string> base = {"--model", "llama-3.1-8b", "--ctx", "8192", "--k", "f16", "--v", "f16"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return memory_error(args);
  };
  EXPECT_THAT(with({"--gpu-mem", "80GX"}), HasSubstr("--gpu-mem '80GX'"));
  EXPECT_THAT(with({"--gpu-mem", "lots"}), HasSubstr("--gpu-mem 'lots'"));
  EXPECT_THAT(with({"--gpu-mem", "-80GiB"}), HasSubstr("--gpu-mem '-80GiB'"));
  EXPECT_THAT(with({"--gpu-mem", "80GiB", "--weights", "16 gigs"}), HasSubstr("--weights '16 gigs'"));
  EXPECT_THAT(with({"--gpu-mem", "0"}), HasSubstr("--gpu-mem '0'"));
  const std::string err = with({"--gpu-mem", "80 GB of HBM"});
  EXPECT_THAT(err, HasSubstr("80GiB, 141GB, 512MiB, 1.5TiB"));  // the accepted forms
}

TEST_F(MemoryCliTest, InconsistentOptionsExit2) {
  EXPECT_THAT(memory_error({"--model", "llama-3.1-8b", "--layers", "32", "--ctx", "1", "--k", "f16", "--v", "f16"}),
              HasSubstr("not both"));
  EXPECT_THAT(memory_error({"--layers", "32", "--kv-heads", "8", "--ctx", "1", "--k", "f16", "--v", "f16"}),
              HasSubstr("missing: --head-dim"));
  EXPECT_THAT(memory_error({"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--sliding-window", "4096",
                            "--ctx", "1", "--k", "f16", "--v", "f16"}),
              HasSubstr("--sliding-layers"));
  EXPECT_THAT(memory_error({"--model", "llama-3.1-8b", "--ctx", "1", "--k", "f16", "--v", "f16", "--weights", "1GB"}),
              HasSubstr("--weights needs --gpu-mem"));
  EXPECT_THAT(memory_error({"--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--ctx", "1", "--k", "f16", "--v",
                            "f16", "--gpu-mem", "80GiB"}),
              HasSubstr("--gpu-mem needs --weights"));
  EXPECT_THAT(memory_error({"--model", "llama-3.1-8b", "--k", "f16", "--v", "f16"}), HasSubstr("--ctx"));
  EXPECT_THAT(memory_error({"--model", "llama-3.1-8b", "--ctx", "0", "--k", "f16", "--v", "f16"}), HasSubstr("--ctx"));
}

TEST_F(MemoryCliTest, BadSchemesExit2NamingTheOption) {
  const std::string err = memory_error({"--model", "llama-3.1-8b", "--ctx", "8", "--k", "int:bits=9", "--v", "f16"});
  EXPECT_THAT(err, HasSubstr("--k"));
  EXPECT_THAT(err, HasSubstr("bits"));
  EXPECT_THAT(memory_error({"--model", "llama-3.1-8b", "--ctx", "8", "--k", "f16", "--v", "q9_9"}), HasSubstr("--v"));
  // q4_0 blocks are 32 channels; a head_dim of 80 cannot be stored.
  EXPECT_THAT(
      memory_error({"--layers", "2", "--kv-heads", "1", "--head-dim", "80", "--ctx", "8", "--k", "q4_0", "--v", "f16"}),
      HasSubstr("q4_0"));
}

TEST_F(MemoryCliTest, MalformedPresetFileNamesFileLineAndColumn) {
  write_text(path("bad.toml"), "layers = 2\nkv_heads = \"one\"\n");
  const std::string err =
      memory_error({"--model", path("bad.toml").string(), "--ctx", "8", "--k", "f16", "--v", "f16"});
  EXPECT_THAT(err, HasSubstr("bad.toml:2:12"));
  EXPECT_THAT(err, HasSubstr("'kv_heads' must be an integer"));
}

}  // namespace
}  // namespace kvtune::e2e
