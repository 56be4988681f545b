#include "kvtune/cuda/cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "kvtune/cuda/decode_attention.h"
#include "kvtune/cuda/device_buffer.h"
#include "kvtune/cuda/device_info.h"
#include "kvtune/cuda/kv_cache.h"
#include "kvtune/error.h"

namespace kvtune::cuda {
namespace {

// x [T, D] quantized into a one-region cache by quantize_append (the whole block in one call).
DeviceBuffer<uint8_t> quantize_on_device(const DeviceFormat& format, ConstMatrixView x, CacheDesc& cache) {
  cache = dense_cache(format, x.rows, static_cast<int32_t>(x.cols), 1);
  DeviceBuffer<float> dx(std::vector<float>(x.data, x.data + x.size()));
  DeviceBuffer<uint8_t> packed(static_cast<size_t>(cache_bytes(cache, 1)));
  packed.zero();
  QuantizeParams q;
  q.x = dx.data();
  q.cache = packed.data();
  q.cache_desc = cache;
  q.batch = 1;
  q.first_token = 0;
  q.new_tokens = x.rows;
  check(quantize_append(q), "quantize_append");
  check(cudaDeviceSynchronize(), "quantize_append (sync)");
  return packed;
}

class CudaBackend final : public EvalBackend {
 public:
  explicit CudaBackend(bool kernel_mode) : kernel_mode_(kernel_mode) {}

  std::string name() const override { return kernel_mode_ ? "cuda-kernel" : "cuda"; }

  void roundtrip(const Scheme& scheme, ConstMatrixView x, const QuantContext& ctx, MatrixView out) const override {
    const std::optional<DeviceFormat> format = scheme.device_format();
    if (!format) return scheme.roundtrip(x, ctx, out);  // no device codec: the CPU path
    CacheDesc cache;
    const DeviceBuffer<uint8_t> packed = quantize_on_device(*format, x, cache);
    DeviceBuffer<float> dy(static_cast<size_t>(x.size()));
    DequantizeParams d;
    d.cache = packed.data();
    d.cache_desc = cache;
    d.out = dy.data();
    d.batch = 1;
    d.tokens = x.rows;
    check(dequantize(d), "dequantize");
    const std::vector<float> y = dy.download();  // synchronizes
    std::copy(y.begin(), y.end(), out.data);
  }

  bool fuses_attention() const override { return kernel_mode_; }

  // The one test of whether the fused kernel takes a pair; fused_attention declines exactly these.
  std::string fused_attention_gap(const Scheme& k, const Scheme& v, int64_t head_dim) const override {
    if (!kernel_mode_) return "backend '" + name() + "' does not run attention";
    const std::optional<DeviceFormat> kf = k.device_format(), vf = v.device_format();
    if (!kf) return "no device format for '" + k.spec() + "'";
    if (!vf) return "no device format for '" + v.spec() + "'";
    if (k.estimates_logits()) return "'" + k.spec() + "' estimates logits instead of storing keys";
    return decode_attention_unsupported(*kf, *vf, static_cast<int32_t>(head_dim), kMaxGroup);
  }

  std::optional<std::vector<double>> fused_attention(const Scheme& k, const Scheme& v, const Case& c) const override {
    const int64_t d = c.keys.cols(), tokens = c.keys.rows(), queries = c.queries.rows();
    if (!fused_attention_gap(k, v, d).empty()) return std::nullopt;
    const std::optional<DeviceFormat> kf = k.device_format(), vf = v.device_format();

    CacheDesc kc, vc;
    const DeviceBuffer<uint8_t> kp = quantize_on_device(*kf, c.keys.view(), kc);
    const DeviceBuffer<uint8_t> vp = quantize_on_device(*vf, c.values.view(), vc);
    // Every query attends to the same cache: sequences of kMaxGroup query heads over shared regions.
    kc.seq_stride = vc.seq_stride = 0;
    const int32_t batch = static_cast<int32_t>((queries + kMaxGroup - 1) / kMaxGroup);
    std::vector<float> q(static_cast<size_t>(batch) * kMaxGroup * d, 0.0f);
    std::copy(c.queries.data(), c.queries.data() + c.queries.size(), q.begin());
    DeviceBuffer<float> dq(q), dout(q.size());
    DeviceBuffer<int32_t> lens(std::vector<int32_t>(static_cast<size_t>(batch), static_cast<int32_t>(tokens)));

    DecodeAttentionParams p;
    p.q = dq.data();
    p.k_cache = kp.data();
    p.v_cache = vp.data();
    p.k = kc;
    p.v = vc;
    p.seq_lens = lens.data();
    p.out = dout.data();
    p.batch = batch;
    p.group = kMaxGroup;
    p.max_seq_len = tokens;
    p.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    int sms = 0;
    check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), "cudaDeviceGetAttribute");
    p.num_splits = choose_num_splits(batch, 1, tokens, sms);
    DeviceBuffer<float> workspace(
        decode_attention_workspace_bytes(batch, 1, kMaxGroup, static_cast<int32_t>(d), p.num_splits) / sizeof(float) + 1);
    p.workspace = workspace.data();
    check(decode_attention(p), "decode_attention");
    const std::vector<float> o = dout.download();
    return std::vector<double>(o.begin(), o.begin() + queries * d);
  }

 private:
  bool kernel_mode_;
};

}  // namespace

EvalBackendPtr make_cuda_backend(bool kernel_mode, const std::string& where) {
  if (device_count() == 0) {
    throw InputError(where + ": backend '" + std::string(kernel_mode ? "cuda-kernel" : "cuda") +
                     "' needs a CUDA device: " + device_description());
  }
  return std::make_shared<CudaBackend>(kernel_mode);
}

}  // namespace kvtune::cuda
