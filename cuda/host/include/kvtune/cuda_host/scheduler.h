// The host mode's grid runner: every CUDA thread of a block is a fiber (Boost.Context), and the
// block's fibers run cooperatively on the calling OS thread until each has finished. A fiber runs
// until it reaches a barrier (__syncthreads, a warp operation), then the next ready one runs, in
// thread order. Blocks run one after another. A thread that never waits runs to completion on
// the fiber that ran the previous one, so a kernel without barriers costs about a function call
// per thread.
#pragma once

#include <cuda_runtime_api.h>
#include <vector_types.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <type_traits>

namespace kvtune::cuda_host {

// The built-in variables of one CUDA thread.
struct ThreadContext {
  uint3 thread_idx{};
  uint3 block_idx{};
  dim3 block_dim;
  dim3 grid_dim;
};

// The running CUDA thread's built-ins. Outside a kernel the process stops with a message: device
// code called from host code is a bug of the caller.
const ThreadContext& current_thread();

// __syncthreads: waits until every thread of the block has arrived or exited (exited threads
// count as arrived, as on the hardware).
void sync_block();

// __syncwarp(mask): waits until every lane of the warp has arrived. Only full-warp masks (every
// lane the warp has) are emulated; another mask, or a lane that exited, is a fault.
void sync_warp(unsigned mask);

// One warp-wide exchange: publishes `bits`, waits for every lane like sync_warp, and returns
// what lane `src` published. The device's shuffles (device.h) are built on it.
uint64_t exchange(unsigned mask, uint64_t bits, int src);

// The lane of the running thread within its warp.
int lane_id();

template <class T, class SrcOf>
T shuffle(unsigned mask, T var, SrcOf src_of) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffles move 8 bytes at most");
  uint64_t bits = 0;
  std::memcpy(&bits, &var, sizeof(T));
  const uint64_t got = exchange(mask, bits, src_of(lane_id()));
  T out;
  std::memcpy(&out, &got, sizeof(T));
  return out;
}

// Runs `thread` as every thread of every block of grid x block. Returns cudaSuccess;
// cudaErrorInvalidConfiguration for a shape the device would refuse; cudaErrorLaunchFailure when
// a block faulted (a deadlock, an emulated operation misused), whose description last_fault()
// returns and stderr shows. The error is also what cudaGetLastError and cudaDeviceSynchronize
// report next, as a real launch's would be.
cudaError_t run_grid(dim3 grid, dim3 block, const std::function<void()>& thread);

// The last fault's description on this OS thread ("" when none).
const std::string& last_fault();

// The error a launch left for cudaGetLastError / cudaPeekAtLastError (runtime_api.cpp).
cudaError_t take_launch_error(bool clear);
void set_launch_error(cudaError_t err);

}  // namespace kvtune::cuda_host
