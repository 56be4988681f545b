// KVTUNE_HD marks functions shared by host and device code: in-tree codecs are written once and
// compiled by both the C++ compiler (CPU path) and nvcc (kernels), so packed bytes agree by
// construction (DESIGN §3).
#pragma once

#if defined(__CUDACC__)
#define KVTUNE_HD __host__ __device__ __forceinline__
#else
#define KVTUNE_HD inline
#endif
