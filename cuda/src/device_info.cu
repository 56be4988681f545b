#include <cuda_runtime.h>

#include <string>

#include "kvtune/cuda/device_info.h"

namespace kvtune::cuda {

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

std::string device_description() {
  int n = 0;
  const cudaError_t err = cudaGetDeviceCount(&n);
  if (err != cudaSuccess) {
    cudaGetLastError();
    return std::string("no CUDA device: ") + cudaGetErrorString(err);
  }
  if (n == 0) return "no CUDA device";
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  return std::string(prop.name) + " (sm_" + std::to_string(prop.major) + std::to_string(prop.minor) + ", " +
         std::to_string(prop.totalGlobalMem >> 30) + " GiB)";
}

}  // namespace kvtune::cuda
