// The host mode's emulation layer itself (cuda/host): the built-ins, shared memory, barriers and
// shuffles against what CUDA specifies, the faults it reports instead of hanging, and the host
// runtime's checks. Compiled only into kvtune_gpu_host_tests, with cuda_host/device.h
// force-included like the kernel sources, so the small kernels below are written as CUDA.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kvtune/cuda/device_buffer.h"
#include "launch.cuh"

namespace {

namespace kc = kvtune::cuda;
using kc::detail::launch;

// ---- kernels ----------------------------------------------------------------------------------

// out[linear thread id] = a packed description of the thread's built-ins.
__global__ void builtins_kernel(uint32_t* out) {
  const unsigned tid = threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y;
  const unsigned block = blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y;
  const unsigned per_block = blockDim.x * blockDim.y * blockDim.z;
  out[block * per_block + tid] = (block << 16) | tid;
}

// Thread t writes s[t]; after the barrier it reads its neighbour's: needs __syncthreads to hold.
__global__ void neighbour_kernel(int* out) {
  __shared__ int s[256];
  const int t = static_cast<int>(threadIdx.x);
  s[t] = t * 3 + static_cast<int>(blockIdx.x);
  __syncthreads();
  out[blockIdx.x * blockDim.x + t] = s[(t + 1) % blockDim.x];
}

// Each thread's results of the four shuffles.
__global__ void shuffle_kernel(int* out, int width) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int v = 100 + static_cast<int>(threadIdx.x);
  int* o = out + 4 * threadIdx.x;
  o[0] = __shfl_xor_sync(0xffffffffu, v, 3, width);
  o[1] = __shfl_down_sync(0xffffffffu, v, 2, width);
  o[2] = __shfl_up_sync(0xffffffffu, v, 5, width);
  o[3] = __shfl_sync(0xffffffffu, v, lane + 7, width);
}

// A warp sum by butterfly, many times in a row (the alternating slots must keep them apart).
__global__ void butterfly_kernel(float* out) {
  float total = 0.0f;
  for (int round = 0; round < 50; ++round) {
    float v = static_cast<float>(threadIdx.x + round);
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    total += v;
  }
  out[threadIdx.x] = total;
}

// Half of warp 0 waits at __syncthreads, the other half at a warp barrier: a deadlock.
__global__ void deadlock_kernel() {
  if (threadIdx.x < 16) {
    __syncthreads();
  } else {
    __syncwarp();
  }
}

__global__ void partial_mask_kernel() { __syncwarp(0x0000ffffu); }

// Lane 0 leaves before its warp's shuffle.
__global__ void exited_lane_kernel(float* out) {
  if (threadIdx.x == 0) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}

// Threads that exit early count as arrived at __syncthreads, as on the hardware.
__global__ void early_exit_kernel(int* out) {
  __shared__ int s[64];
  if (threadIdx.x >= 48) return;
  s[threadIdx.x] = static_cast<int>(threadIdx.x);
  __syncthreads();
  out[threadIdx.x] = s[47 - threadIdx.x];
}

// ---- tests -------------------------------------------------------------------------------------

TEST(HostModeEmulation, BuiltinsCoverEveryThreadOfEveryBlock) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const int per_block = 24, blocks = 12;
  kc::DeviceBuffer<uint32_t> out(static_cast<size_t>(per_block * blocks));
  ASSERT_EQ(launch(builtins_kernel, grid, block, nullptr, out.data()), cudaSuccess);
  const std::vector<uint32_t> got = out.download();
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < per_block; ++t) {
      EXPECT_EQ(got[static_cast<size_t>(b * per_block + t)], (uint32_t(b) << 16) | uint32_t(t)) << b << " " << t;
    }
  }
}

TEST(HostModeEmulation, SyncthreadsOrdersSharedMemoryWithinEachBlock) {
  kc::DeviceBuffer<int> out(2 * 256);
  ASSERT_EQ(launch(neighbour_kernel, 2, 256, nullptr, out.data()), cudaSuccess);
  const std::vector<int> got = out.download();
  for (int b = 0; b < 2; ++b) {
    for (int t = 0; t < 256; ++t) EXPECT_EQ(got[size_t(b * 256 + t)], ((t + 1) % 256) * 3 + b) << b << " " << t;
  }
}

// CUDA's rules (Programming Guide, warp shuffle functions): a source lane outside the caller's
// width segment, or beyond it for up/down, leaves the caller's own value; __shfl_sync takes the
// source lane modulo width within the segment.
TEST(HostModeEmulation, ShufflesFollowCudasLaneRules) {
  for (const int width : {32, 8}) {
    kc::DeviceBuffer<int> out(64 * 4);
    ASSERT_EQ(launch(shuffle_kernel, 1, 64, nullptr, out.data(), width), cudaSuccess);
    const std::vector<int> got = out.download();
    for (int t = 0; t < 64; ++t) {
      const int lane = t % 32, warp0 = t - lane, seg = lane - lane % width, own = 100 + t;
      const int x = lane ^ 3, down = lane + 2, up = lane - 5;
      const auto in_segment = [&](int l) { return l >= seg && l < seg + width; };
      SCOPED_TRACE("width " + std::to_string(width) + " thread " + std::to_string(t));
      EXPECT_EQ(got[size_t(4 * t)], in_segment(x) ? 100 + warp0 + x : own);
      EXPECT_EQ(got[size_t(4 * t + 1)], in_segment(down) ? 100 + warp0 + down : own);
      EXPECT_EQ(got[size_t(4 * t + 2)], in_segment(up) ? 100 + warp0 + up : own);
      EXPECT_EQ(got[size_t(4 * t + 3)], 100 + warp0 + seg + (lane + 7) % width);
    }
  }
}

TEST(HostModeEmulation, BackToBackShufflesKeepTheirValuesApart) {
  kc::DeviceBuffer<float> out(64);
  ASSERT_EQ(launch(butterfly_kernel, 1, 64, nullptr, out.data()), cudaSuccess);
  const std::vector<float> got = out.download();
  for (int t = 0; t < 64; ++t) {
    const int warp0 = t - t % 32;
    double want = 0.0;
    for (int round = 0; round < 50; ++round) {
      for (int l = 0; l < 32; ++l) want += warp0 + l + round;
    }
    EXPECT_EQ(got[size_t(t)], static_cast<float>(want)) << t;
  }
}

TEST(HostModeEmulation, ExitedThreadsCountAsArrivedAtSyncthreads) {
  kc::DeviceBuffer<int> out(64);
  ASSERT_EQ(launch(early_exit_kernel, 1, 64, nullptr, out.data()), cudaSuccess);
  const std::vector<int> got = out.download();
  for (int t = 0; t < 48; ++t) EXPECT_EQ(got[size_t(t)], 47 - t);
}

// A fault fails the launch with a description instead of hanging or crashing, leaves the error
// for cudaGetLastError once, and the next launch runs normally.
void expect_fault(cudaError_t err, const std::string& words) {
  EXPECT_EQ(err, cudaErrorLaunchFailure);
  EXPECT_NE(kvtune::cuda_host::last_fault().find(words), std::string::npos) << kvtune::cuda_host::last_fault();
  EXPECT_NE(std::string(cudaGetErrorString(err)).find(words), std::string::npos) << cudaGetErrorString(err);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaErrorLaunchFailure);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  kc::DeviceBuffer<int> out(2 * 256);
  EXPECT_EQ(launch(neighbour_kernel, 2, 256, nullptr, out.data()), cudaSuccess);
}

TEST(HostModeEmulation, ADeadlockIsAFaultNamingTheWaitingThreads) {
  expect_fault(launch(deadlock_kernel, 1, 64, nullptr), "deadlock: 16 threads wait at __syncthreads");
}

TEST(HostModeEmulation, PartialWarpMasksAreAFault) {
  expect_fault(launch(partial_mask_kernel, 1, 32, nullptr), "full-warp masks only");
}

TEST(HostModeEmulation, AShuffleAfterALaneExitedIsAFault) {
  kc::DeviceBuffer<float> out(32);
  expect_fault(launch(exited_lane_kernel, 1, 32, nullptr, out.data()), "exited");
}

TEST(HostModeEmulation, ShapesTheDeviceRefusesAreRefused) {
  EXPECT_EQ(launch(deadlock_kernel, 1, 1025, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(deadlock_kernel, dim3(1, 65536), 32, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(launch(deadlock_kernel, 0, 32, nullptr), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);  // the first error sticks until read
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
}

// Values checked against the PTX ISA's prmt description (default mode).
TEST(HostModeEmulation, BytePermSelectsBytesOfThePair) {
  EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
  EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  EXPECT_EQ(__byte_perm(0x33221100u, 0x77665544u, 0x0123u), 0x00112233u);
  EXPECT_EQ(__byte_perm(0x0000bbaau, 0u, 0x1404u), 0xbb00aa00u);  // the fp8 decoder's [0, b0, 0, b1]
}

TEST(HostModeRuntime, CopiesOutsideDeviceAllocationsAreRefused) {
  std::vector<int> host(16, 7);
  int* dev = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&dev), 16 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), 16 * sizeof(int), cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(dev, host.data(), 17 * sizeof(int), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemcpy(host.data(), host.data() + 8, 4, cudaMemcpyHostToDevice), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host.data(), 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(dev + 8, 0, 8 * sizeof(int)), cudaSuccess);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(dev), cudaSuccess);
  EXPECT_EQ(cudaFree(dev), cudaErrorInvalidValue);  // twice
}

TEST(HostModeRuntime, FreshAllocationsReadAsNaN) {
  kc::DeviceBuffer<float> buf(8);
  for (const float v : buf.download()) EXPECT_TRUE(std::isnan(v));
}

}  // namespace
