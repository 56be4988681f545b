// One way to launch a kernel that both compilers accept: nvcc's <<<grid, block, 0, stream>>>, or,
// in the host mode (cuda/host, the tests' build without a GPU), every thread of the grid as a
// fiber, run to the end before launch() returns.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>
#include <utility>

#if defined(KVTUNE_CUDA_HOST)
#include <tuple>

#include "kvtune/cuda_host/scheduler.h"
#endif

namespace kvtune::cuda::detail {

// Launches kernel(args...) on grid x block in `stream`; returns the launch's error (a fault the
// host mode found inside the kernel included).
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, dim3 block, cudaStream_t stream, Args&&... args) {
#if defined(KVTUNE_CUDA_HOST)
  (void)stream;
  // Converted once, as the launch copies them; every thread receives its own copy, by value.
  const std::tuple<std::decay_t<Params>...> params(std::forward<Args>(args)...);
  return ::kvtune::cuda_host::run_grid(grid, block, [&] { std::apply(kernel, params); });
#else
  kernel<<<grid, block, 0, stream>>>(std::forward<Args>(args)...);
  return cudaGetLastError();
#endif
}

}  // namespace kvtune::cuda::detail
