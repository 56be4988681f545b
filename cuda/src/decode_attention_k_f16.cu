// Fused decode attention with f16 K: the 6 V families x 3 head dims of this K family
// (decode_attention_kernel.cuh). One translation unit per K family so the instances compile in
// parallel.
#include "decode_attention_kernel.cuh"

namespace kvtune::cuda::detail {

cudaError_t launch_decode_attention_k_f16(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s) {
  return launch_with_k<HalfDecoder<false>>(p, v, head_dim, grid, s);
}

}  // namespace kvtune::cuda::detail
