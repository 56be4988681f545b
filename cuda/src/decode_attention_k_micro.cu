// Fused decode attention with block-scaled float K (mxfp4, mxfp8, nvfp4): the 5 V families x 3
// head dims x 3 group bounds of this K family (decode_attention_kernel.cuh). One translation unit
// per K family so the instances compile in parallel.
#include "decode_attention_kernel.cuh"

namespace kvtune::cuda::detail {

cudaError_t launch_decode_attention_k_micro(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s) {
  return launch_with_k<MicroDecoder>(p, v, head_dim, grid, s);
}

}  // namespace kvtune::cuda::detail
