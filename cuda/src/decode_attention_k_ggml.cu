// Fused decode attention with ggml-block K (q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl): the 5 V families
// x 3 head dims x 3 group bounds of this K family (decode_attention_kernel.cuh). One translation
// unit per K family so the instances compile in parallel.
#include "decode_attention_kernel.cuh"

namespace kvtune::cuda::detail {

cudaError_t launch_decode_attention_k_ggml(const KernelParams& p, Family v, int head_dim, dim3 grid, cudaStream_t s) {
  return launch_with_k<GgmlDecoder>(p, v, head_dim, grid, s);
}

}  // namespace kvtune::cuda::detail
