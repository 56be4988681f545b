// The host mode's device layer: what cuda/src's kernels use of CUDA C++, for the host compiler.
// Force-included (-include) ahead of every cuda/src translation unit the host mode compiles, so
// the kernel sources stay as nvcc reads them (docs/kernels.md, "Host mode").
//
// Emulated: the execution qualifiers, threadIdx/blockIdx/blockDim/gridDim, __shared__ memory (one
// copy per block: blocks of a launch run one after another on one OS thread), __syncthreads,
// __syncwarp and the __shfl_*_sync family over full warps, __ldg, and the bit-cast, byte-permute
// and fused multiply-add intrinsics the kernels call. Every CUDA thread is a fiber
// (scheduler.h). The CUDA toolkit's own headers supply the vector types and the host versions of
// the f16/fp8 conversions.
#pragma once

#if defined(__CUDACC__)
#error "cuda/host is compiled by the host compiler; nvcc builds the real kernels"
#endif

#define KVTUNE_CUDA_HOST 1

// One copy per block, shared by its fibers: a function-local static. thread_local keeps two OS
// threads launching at once (two tests in one process) apart. Defined before the toolkit's
// headers, which define __shared__ only when it is not defined yet.
#define __shared__ static thread_local

#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>  // before __noinline__ below: libstdc++'s shared_ptr uses __attribute__((__noinline__))

#include "kvtune/cuda_host/scheduler.h"

// host_defines.h leaves these to nvcc.
#define __launch_bounds__(...)
#define __noinline__ __attribute__((noinline))

// The built-in variables of the running fiber. The toolkit's headers declare the real ones as
// extern variables (device_launch_parameters.h); from here on the names mean the fiber's.
#define threadIdx (::kvtune::cuda_host::current_thread().thread_idx)
#define blockIdx (::kvtune::cuda_host::current_thread().block_idx)
#define blockDim (::kvtune::cuda_host::current_thread().block_dim)
#define gridDim (::kvtune::cuda_host::current_thread().grid_dim)

// ---- synchronization -----------------------------------------------------------------------

inline void __syncthreads() { ::kvtune::cuda_host::sync_block(); }
inline void __syncwarp(unsigned mask = 0xffffffffu) { ::kvtune::cuda_host::sync_warp(mask); }

// Shuffles exchange up to 8 bytes. A source lane outside the caller's `width` segment reads the
// caller's own value, as on the device.
template <class T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = 32) {
  return ::kvtune::cuda_host::shuffle(mask, var, [=](int lane) { return (lane & -width) + (src_lane & (width - 1)); });
}
template <class T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) {
  return ::kvtune::cuda_host::shuffle(mask, var, [=](int lane) {
    const int src = lane ^ lane_mask;
    return (src & -width) == (lane & -width) ? src : lane;
  });
}
template <class T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::kvtune::cuda_host::shuffle(mask, var, [=](int lane) {
    const int src = lane + static_cast<int>(delta);
    return (src & -width) == (lane & -width) ? src : lane;
  });
}
template <class T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) {
  return ::kvtune::cuda_host::shuffle(mask, var, [=](int lane) {
    const int src = lane - static_cast<int>(delta);
    return src >= (lane & -width) ? src : lane;
  });
}

// ---- loads and bit manipulation ------------------------------------------------------------

template <class T>
T __ldg(const T* p) {  // the read-only cache path: a plain load on the host
  return *p;
}

inline float __uint_as_float(unsigned x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline float __int_as_float(int x) {
  float f;
  std::memcpy(&f, &x, sizeof f);
  return f;
}
inline unsigned __float_as_uint(float f) {
  unsigned x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}
inline int __float_as_int(float f) {
  int x;
  std::memcpy(&x, &f, sizeof x);
  return x;
}

// PTX prmt's default mode: byte n of the result is byte (s >> 4n) & 7 of the pair {y, x}
// (x holds bytes 0-3, y bytes 4-7).
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
  const uint64_t bytes = static_cast<uint64_t>(x) | (static_cast<uint64_t>(y) << 32);
  unsigned r = 0;
  for (int n = 0; n < 4; ++n) {
    const unsigned pick = (s >> (4 * n)) & 7u;
    r |= static_cast<unsigned>((bytes >> (8 * pick)) & 0xffu) << (8 * n);
  }
  return r;
}

inline float __fmaf_rn(float a, float b, float c) { return std::fma(a, b, c); }
