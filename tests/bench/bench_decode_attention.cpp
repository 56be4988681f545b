// kvtune_gpu_bench: effective bandwidth of the fused decode attention (kvtune/cuda/decode_attention.h)
// per K/V format, as a percentage of a device-to-device copy measured in the same run.
//
//   kvtune_gpu_bench [--out DIR] [--budget-seconds S] [--runs N] [--tokens LIST] [--batches LIST]
//
// DIR defaults to $OUT, else the current directory; LISTs are comma-separated (a quick smoke run:
// --tokens 4096 --batches 1).
//
// Shapes: T = 4k, 16k, 64k, 128k tokens per sequence, batch 1, 8, 64, 8 KV heads, GQA groups 1, 4,
// 8, head_dim 128, the same format for K and V. Each point is timed with CUDA events around one
// decode_attention() call (split count from choose_num_splits, merge included), L2 flushed before
// every run (a memset over twice the L2, as nvbench does), median of N >= 20 runs. Effective bytes
// = K and V codes and scales of every region + Q + O; the copy moves 2 x its size per run.
// Before timing a point its output is checked to be finite (the GPU tests check the values).
//
// Caches are filled with the CPU schemes' quantize() bytes of one [T, 128] block per format,
// copied into every (sequence, head) region. Points run in order of size; once the time budget
// would be exceeded the remaining (largest) points are skipped and listed as such.
// Writes DIR/bench_decode_attention.csv (one row per point) and DIR/bench_decode_attention.md.
// Exits 0 with a reason when the machine has no CUDA device.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"
#include "kvtune/codecs/packed_layout.h"
#include "kvtune/cuda/decode_attention.h"
#include "kvtune/cuda/device_buffer.h"
#include "kvtune/cuda/device_info.h"
#include "kvtune/version.h"

namespace {

namespace kc = kvtune::cuda;

constexpr int32_t kKvHeads = 8;
constexpr int32_t kHeadDim = 128;
const std::vector<int32_t> kGroups = {1, 4, 8};

// Targets in % of copy bandwidth: {>= 512 MiB of KV per call, 64-512 MiB}.
struct Target {
  double large, medium;
};

struct BenchFormat {
  std::string name;  // the column name in the results
  std::string spec;  // the CPU scheme
  Target target;
};

const std::vector<BenchFormat> kFormats = {
    {"f16", "f16", {85, 65}},
    {"bf16", "bf16", {85, 65}},
    {"fp8", "fp8:format=e4m3,scale=dynamic", {80, 60}},
    {"int8", "int:bits=8,axis=token,scale=f16", {80, 60}},
    {"q8_0", "q8_0", {80, 60}},
    {"int4", "int:bits=4,axis=token,group=32,scale=f16", {75, 55}},
    {"q4_0", "q4_0", {75, 55}},
    {"int2", "int:bits=2,axis=token,group=32,asym,scale=f16", {65, 45}},
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int64_t round_up16(int64_t n) { return (n + 15) / 16 * 16; }

// Times `work` (enqueued on the default stream) `runs` times with L2 flushed before each run;
// returns the milliseconds of every run.
template <class Work>
std::vector<double> time_runs(int runs, void* flush, size_t flush_bytes, Work&& work) {
  cudaEvent_t start, stop;
  kc::check(cudaEventCreate(&start), "cudaEventCreate");
  kc::check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    kc::check(cudaMemsetAsync(flush, r & 0xff, flush_bytes), "cudaMemsetAsync (L2 flush)");
    kc::check(cudaEventRecord(start), "cudaEventRecord");
    work();
    kc::check(cudaEventRecord(stop), "cudaEventRecord");
    kc::check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0.0f;
    kc::check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return ms;
}

// One K or V cache template: the CPU scheme's bytes of a [T, head_dim] block, on the device.
struct Template {
  kvtune::DeviceFormat format;
  int64_t bytes = 0;
  kc::DeviceBuffer<uint8_t> k, v;
};

// A device buffer that only grows.
struct Arena {
  kc::DeviceBuffer<uint8_t> buf;
  bool reserve(size_t bytes) {
    if (buf.size() >= bytes) return true;
    buf = kc::DeviceBuffer<uint8_t>();
    try {
      buf = kc::DeviceBuffer<uint8_t>(bytes);
    } catch (const std::exception&) {
      cudaGetLastError();
      return false;
    }
    return true;
  }
};

// dst[i * stride, (i + 1) * stride) = src[0, bytes) for i < n, by doubling copies on the device.
void replicate(uint8_t* dst, const uint8_t* src, int64_t bytes, int64_t stride, int64_t n) {
  kc::check(cudaMemcpyAsync(dst, src, static_cast<size_t>(bytes), cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
  for (int64_t done = 1; done < n;) {
    const int64_t count = std::min(done, n - done);
    kc::check(cudaMemcpyAsync(dst + done * stride, dst, static_cast<size_t>(count * stride), cudaMemcpyDeviceToDevice),
              "cudaMemcpyAsync");
    done += count;
  }
}

struct Row {
  std::string format, spec, status;
  int64_t tokens = 0;
  int32_t batch = 0, group = 0, splits = 0;
  double kv_mib = 0, bytes = 0, median_us = 0, min_us = 0, gbps = 0, pct = 0, target = 0, speedup = 0;
  bool timed = false, finite = false;
};

std::string fixed(double v, int digits) {
  char s[64];
  std::snprintf(s, sizeof s, "%.*f", digits, v);
  return s;
}

struct Options {
  std::string out = ".";
  double budget = 300.0;
  int runs = 25;
  std::vector<int64_t> tokens = {4096, 16384, 65536, 131072};
  std::vector<int32_t> batches = {1, 8, 64};
};

// "1,8,64" -> {1, 8, 64}; every entry a positive integer.
std::vector<int64_t> parse_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  size_t pos = 0;
  while (pos <= text.size()) {
    const size_t comma = std::min(text.find(',', pos), text.size());
    const std::string item = text.substr(pos, comma - pos);
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || v < 1)
      throw std::invalid_argument(what + ": '" + item + "' is not a positive integer");
    out.push_back(v);
    pos = comma + 1;
  }
  return out;
}

Options parse(int argc, char** argv) {
  Options o;
  if (const char* env = std::getenv("OUT"); env != nullptr && *env != '\0') o.out = env;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--out") {
      o.out = value();
    } else if (a == "--budget-seconds") {
      o.budget = std::stod(value());
    } else if (a == "--runs") {
      o.runs = std::stoi(value());
    } else if (a == "--tokens") {
      o.tokens = parse_list(value(), a);
    } else if (a == "--batches") {
      o.batches.clear();
      for (const int64_t b : parse_list(value(), a))
        o.batches.push_back(static_cast<int32_t>(std::min<int64_t>(b, 65535)));
    } else {
      throw std::invalid_argument("unknown argument " + a +
                                  " (use --out DIR, --budget-seconds S, --runs N, --tokens LIST, --batches LIST)");
    }
  }
  if (o.runs < 20) throw std::invalid_argument("--runs must be at least 20 (the median of >= 20 runs)");
  return o;
}

int run(const Options& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  cudaDeviceProp prop{};
  kc::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const std::string device = kc::device_description();
  std::printf("kvtune_gpu_bench %s (%s) on %s\n", KVTUNE_VERSION, KVTUNE_GIT_COMMIT, device.c_str());

  // L2 flush buffer and the copy reference.
  const size_t flush_bytes = std::max<size_t>(size_t{2} * static_cast<size_t>(prop.l2CacheSize), size_t{64} << 20);
  kc::DeviceBuffer<uint8_t> flush(flush_bytes);
  const size_t copy_bytes = size_t{1} << 30;
  double copy_gbps = 0.0;
  {
    kc::DeviceBuffer<uint8_t> src(copy_bytes), dst(copy_bytes);
    kc::check(cudaMemset(src.data(), 1, copy_bytes), "cudaMemset");
    auto copy = [&] {
      kc::check(cudaMemcpyAsync(dst.data(), src.data(), copy_bytes, cudaMemcpyDeviceToDevice), "cudaMemcpyAsync");
    };
    time_runs(3, flush.data(), flush_bytes, copy);  // warm-up
    const double ms = median(time_runs(opt.runs, flush.data(), flush_bytes, copy));
    copy_gbps = 2.0 * static_cast<double>(copy_bytes) / (ms * 1e-3) / 1e9;  // read + write
  }
  std::printf("device-to-device copy: %.0f GB/s (median of %d runs of %zu MiB)\n", copy_gbps, opt.runs,
              copy_bytes >> 20);

  // Key-like and value-like data for the largest T; smaller T use the first rows.
  std::vector<int64_t> token_list = opt.tokens;
  std::sort(token_list.begin(), token_list.end());
  std::vector<int32_t> batch_list = opt.batches;
  std::sort(batch_list.begin(), batch_list.end());
  const int64_t t_max = token_list.back();
  kvtune::Matrix keys_data(t_max, kHeadDim), values_data(t_max, kHeadDim);
  {
    std::mt19937_64 engine(1);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int64_t i = 0; i < keys_data.size(); ++i) {
      keys_data.data()[i] = normal(engine) * ((i % kHeadDim) % 16 == 3 ? 6.0f : 1.5f);
    }
    for (int64_t i = 0; i < values_data.size(); ++i) values_data.data()[i] = normal(engine);
  }
  const kvtune::Matrix& keys = keys_data;
  const kvtune::Matrix& values = values_data;

  std::vector<Row> rows;
  std::vector<std::string> notes;
  Arena k_cache, v_cache, workspace, q_buf, out_buf;
  bool out_of_time = false;
  const int sm_count = prop.multiProcessorCount;

  for (const int64_t tokens : token_list) {
    // Templates for every format at this T, quantized on the CPU in parallel (not once the budget
    // is spent: then only their sizes are needed, for the skipped rows).
    std::vector<Template> templates(kFormats.size());
    if (out_of_time) {
      for (size_t i = 0; i < kFormats.size(); ++i) {
        templates[i].bytes =
            static_cast<int64_t>(kvtune::builtin_registry().make(kFormats[i].spec)->footprint(tokens, kHeadDim));
      }
    } else {
      std::vector<std::future<std::pair<std::vector<std::byte>, std::vector<std::byte>>>> jobs;
      std::vector<kvtune::SchemePtr> schemes;
      for (const BenchFormat& f : kFormats) {
        schemes.push_back(kvtune::builtin_registry().make(f.spec));
        const kvtune::SchemePtr s = schemes.back();
        const kvtune::ConstMatrixView k_rows = keys.view().row_range(0, tokens);
        const kvtune::ConstMatrixView v_rows = values.view().row_range(0, tokens);
        jobs.push_back(std::async(std::launch::async, [s, k_rows, v_rows] {
          kvtune::QuantContext kctx, vctx;
          kctx.role = kvtune::Role::key;
          vctx.role = kvtune::Role::value;
          return std::make_pair(s->quantize(k_rows, kctx), s->quantize(v_rows, vctx));
        }));
      }
      for (size_t i = 0; i < kFormats.size(); ++i) {
        auto [kb, vb] = jobs[i].get();
        const auto format = schemes[i]->device_format();
        if (!format) throw std::runtime_error(kFormats[i].spec + " has no device format");
        templates[i].format = *format;
        templates[i].bytes = static_cast<int64_t>(kb.size());
        std::vector<uint8_t> kh(kb.size()), vh(vb.size());
        std::memcpy(kh.data(), kb.data(), kb.size());
        std::memcpy(vh.data(), vb.data(), vb.size());
        templates[i].k = kc::DeviceBuffer<uint8_t>(kh);
        templates[i].v = kc::DeviceBuffer<uint8_t>(vh);
      }
    }

    for (const int32_t batch : batch_list) {
      const int64_t regions = int64_t{batch} * kKvHeads;
      const int32_t splits = kc::choose_num_splits(batch, kKvHeads, tokens, sm_count);
      std::map<int32_t, double> f16_group_ms;  // group -> f16's median at this (T, batch)
      for (size_t fi = 0; fi < kFormats.size(); ++fi) {
        const BenchFormat& f = kFormats[fi];
        const Template& tpl = templates[fi];
        const int64_t head_stride = round_up16(tpl.bytes);
        const int64_t cache_bytes = regions * head_stride;
        const double kv_mib = 2.0 * static_cast<double>(regions * tpl.bytes) / (1 << 20);
        auto shape_row = [&](int32_t group) {  // a row's shape, before anything is measured
          Row r;
          r.format = f.name;
          r.spec = f.spec;
          r.tokens = tokens;
          r.batch = batch;
          r.group = group;
          r.splits = splits;
          r.kv_mib = kv_mib;
          return r;
        };
        auto skip = [&](const std::string& why) {
          for (const int32_t group : kGroups) {
            Row r = shape_row(group);
            r.status = why;
            rows.push_back(r);
          }
        };
        // Pessimistic estimate: 3 groups x (runs + 2) calls at a quarter of the copy bandwidth.
        const double est =
            3.0 * (opt.runs + 2) * (2.0 * static_cast<double>(cache_bytes)) / (0.25 * copy_gbps * 1e9) + 2.0;
        if (out_of_time || seconds_since(t0) + est > opt.budget) {
          out_of_time = true;
          skip("skipped: time budget");
          continue;
        }
        const std::string unsupported =
            kc::decode_attention_unsupported(tpl.format, tpl.format, kHeadDim, kc::kMaxGroup);
        if (!unsupported.empty()) {
          skip("unsupported: " + unsupported);
          continue;
        }
        const size_t q_bytes = static_cast<size_t>(regions) * 8 * kHeadDim * sizeof(float);
        const size_t ws_bytes = kc::decode_attention_workspace_bytes(batch, kKvHeads, 8, kHeadDim, splits);
        if (!k_cache.reserve(static_cast<size_t>(cache_bytes)) || !v_cache.reserve(static_cast<size_t>(cache_bytes)) ||
            !q_buf.reserve(q_bytes) || !out_buf.reserve(q_bytes) ||
            !workspace.reserve(std::max<size_t>(ws_bytes, 16))) {
          skip("skipped: does not fit in device memory");
          continue;
        }
        replicate(k_cache.buf.data(), tpl.k.data(), tpl.bytes, head_stride, regions);
        replicate(v_cache.buf.data(), tpl.v.data(), tpl.bytes, head_stride, regions);
        {
          std::vector<float> q(static_cast<size_t>(regions) * 8 * kHeadDim);
          std::mt19937_64 engine(7);
          std::normal_distribution<float> normal(0.0f, 1.0f);
          for (float& x : q) x = normal(engine);
          kc::check(cudaMemcpy(q_buf.buf.data(), q.data(), q_bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
        }
        std::vector<int32_t> lens(static_cast<size_t>(batch), static_cast<int32_t>(tokens));
        kc::DeviceBuffer<int32_t> seq_lens(lens);

        for (const int32_t group : kGroups) {
          Row r = shape_row(group);
          kc::DecodeAttentionParams p;
          p.q = reinterpret_cast<const float*>(q_buf.buf.data());
          p.k_cache = k_cache.buf.data();
          p.v_cache = v_cache.buf.data();
          kc::CacheDesc desc;
          desc.format = tpl.format;
          desc.head_dim = kHeadDim;
          desc.capacity = tokens;
          desc.kv_heads = kKvHeads;
          desc.head_stride = head_stride;
          desc.seq_stride = kKvHeads * head_stride;
          p.k = p.v = desc;
          p.seq_lens = seq_lens.data();
          p.out = reinterpret_cast<float*>(out_buf.buf.data());
          p.batch = batch;
          p.group = group;
          p.max_seq_len = tokens;
          p.num_splits = splits;
          p.softmax_scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
          p.workspace = splits > 1 ? reinterpret_cast<float*>(workspace.buf.data()) : nullptr;
          auto call = [&] { kc::check(kc::decode_attention(p), "decode_attention"); };

          // Verify before timing: the output of one call is finite.
          call();
          kc::check(cudaDeviceSynchronize(), "decode_attention kernels");
          const size_t n_out = static_cast<size_t>(regions) * group * kHeadDim;
          std::vector<float> out(n_out);
          kc::check(cudaMemcpy(out.data(), p.out, n_out * sizeof(float), cudaMemcpyDeviceToHost), "cudaMemcpy");
          r.finite = std::all_of(out.begin(), out.end(), [](float x) { return std::isfinite(x); });

          const std::vector<double> ms = time_runs(opt.runs, flush.data(), flush_bytes, call);
          const double med = median(ms);
          r.timed = true;
          r.median_us = med * 1e3;
          r.min_us = *std::min_element(ms.begin(), ms.end()) * 1e3;
          r.bytes = 2.0 * static_cast<double>(regions * tpl.bytes) + 2.0 * static_cast<double>(n_out * sizeof(float));
          r.gbps = r.bytes / (med * 1e-3) / 1e9;
          r.pct = 100.0 * r.gbps / copy_gbps;
          r.target = r.kv_mib >= 512 ? f.target.large : (r.kv_mib >= 64 ? f.target.medium : 0.0);
          r.status = r.finite ? "ok" : "non-finite output";
          if (f.name == "f16") f16_group_ms[group] = med;
          if (f16_group_ms.count(group)) r.speedup = f16_group_ms[group] / med;
          std::printf(
              "%-5s T=%-6lld batch=%-2d group=%d splits=%-3d KV %9.1f MiB  %10.1f us  %7.0f GB/s  %5.1f%% of copy%s\n",
              f.name.c_str(), static_cast<long long>(tokens), batch, group, splits, r.kv_mib, r.median_us, r.gbps,
              r.pct, r.finite ? "" : "  NON-FINITE OUTPUT");
          std::fflush(stdout);
          rows.push_back(r);
        }
      }
    }
  }
  if (out_of_time) notes.push_back("The time budget ran out: the largest points were skipped (rows marked so).");

  // ---- results ----
  std::filesystem::create_directories(opt.out);
  const std::string csv_path = opt.out + "/bench_decode_attention.csv";
  std::ofstream csv(csv_path);
  csv << "format,spec,tokens,batch,kv_heads,group,head_dim,num_splits,kv_mib,bytes,median_us,min_us,gbps,copy_gbps,"
         "pct_of_copy,target_pct,meets_target,speedup_vs_f16,finite,status,device,version,commit\n";
  for (const Row& r : rows) {
    csv << r.format << ",\"" << r.spec << "\"," << r.tokens << ',' << r.batch << ',' << kKvHeads << ',' << r.group
        << ',' << kHeadDim << ',' << r.splits << ',' << fixed(r.kv_mib, 1) << ',';
    if (r.timed) {
      csv << fixed(r.bytes, 0) << ',' << fixed(r.median_us, 2) << ',' << fixed(r.min_us, 2) << ',' << fixed(r.gbps, 1)
          << ',' << fixed(copy_gbps, 1) << ',' << fixed(r.pct, 1) << ',' << (r.target > 0 ? fixed(r.target, 0) : "")
          << ',' << (r.target == 0 ? "" : (r.pct >= r.target ? "yes" : "no")) << ','
          << (r.speedup > 0 ? fixed(r.speedup, 2) : "") << ',' << (r.finite ? "yes" : "no") << ',';
    } else {
      csv << ",,,,,,,,,,";
    }
    csv << '"' << r.status << "\",\"" << device << "\"," << KVTUNE_VERSION << ',' << KVTUNE_GIT_COMMIT << '\n';
  }

  const std::string md_path = opt.out + "/bench_decode_attention.md";
  std::ofstream md(md_path);
  md << "# Fused decode attention: effective bandwidth\n\n"
     << "kvtune " << KVTUNE_VERSION << " (" << KVTUNE_GIT_COMMIT << ") on " << device << ".\n"
     << "Device-to-device copy: **" << fixed(copy_gbps, 0) << " GB/s** (read + write, median of " << opt.runs
     << " runs). " << kKvHeads << " KV heads, head_dim " << kHeadDim << ", K and V in the same format, median of "
     << opt.runs << " runs with L2 flushed before each.\n"
     << "Effective bytes = K/V codes and scales + Q + O. Targets (% of copy): >= 512 MiB of KV per call "
        "f16 85, 8-bit 80, 4-bit 75, 2-bit 65; 64-512 MiB: 65 / 60 / 55 / 45; smaller calls have none.\n\n";
  int met = 0, missed = 0, failed = 0;
  for (const Row& r : rows) {
    if (!r.timed) continue;
    if (!r.finite) ++failed;
    if (r.target > 0) (r.pct >= r.target ? met : missed)++;
  }
  md << "Targets met: " << met << ", missed: " << missed << "; points with non-finite output: " << failed << ".\n\n";
  for (const std::string& n : notes) md << "**" << n << "**\n\n";
  md << "| format | T | batch | group | splits | KV MiB | median µs | GB/s | % of copy | target | speed-up vs f16 | "
        "status |\n"
     << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const Row& r : rows) {
    md << "| " << r.format << " | " << r.tokens << " | " << r.batch << " | " << r.group << " | " << r.splits << " | "
       << fixed(r.kv_mib, 1) << " | ";
    if (r.timed) {
      md << fixed(r.median_us, 1) << " | " << fixed(r.gbps, 0) << " | " << fixed(r.pct, 1) << " | "
         << (r.target > 0 ? fixed(r.target, 0) + (r.pct >= r.target ? " met" : " **missed**") : "-") << " | "
         << (r.speedup > 0 ? fixed(r.speedup, 2) + "x" : "-") << " | " << r.status << " |\n";
    } else {
      md << "- | - | - | - | - | " << r.status << " |\n";
    }
  }
  md << "\nFormats: ";
  for (size_t i = 0; i < kFormats.size(); ++i)
    md << (i ? ", " : "") << kFormats[i].name << " = `" << kFormats[i].spec << '`';
  md << ".\n";
  std::printf("wrote %s and %s (%.0f s)\n", csv_path.c_str(), md_path.c_str(), seconds_since(t0));
  return failed > 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options opt = parse(argc, argv);
    if (kc::device_count() == 0) {
      std::printf("kvtune_gpu_bench: nothing to measure: %s\n", kc::device_description().c_str());
      return 0;
    }
    return run(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvtune_gpu_bench: %s\n", e.what());
    return 1;
  }
}
