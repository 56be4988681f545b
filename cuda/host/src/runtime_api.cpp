// The part of the CUDA runtime API the kernels' host code and tests/gpu call, for the host mode:
// one "device" whose memory is host memory. Allocations are tracked, so a copy or a memset into
// memory cudaMalloc did not hand out (a host pointer passed as a device one) fails as
// cudaErrorInvalidValue here instead of passing silently; fresh allocations are filled with 0xff
// (NaN as f16, f32 and bf16), so a read of memory nothing wrote shows. Launches run synchronously
// (scheduler.h), so every synchronization call only reports the sticky launch error.
#include <cuda_runtime_api.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "kvtune/cuda_host/scheduler.h"

namespace {

constexpr int kSmCount = 16;  // what choose_num_splits sees: a small device, so tests split often
constexpr size_t kAlignment = 256;  // cudaMalloc's guarantee

std::mutex allocations_mutex;
std::map<const char*, size_t> allocations;  // start -> bytes

// Whether [p, p + bytes) lies inside one allocation.
bool allocated(const void* p, size_t bytes) {
  const auto* c = static_cast<const char*>(p);
  std::lock_guard<std::mutex> lock(allocations_mutex);
  auto it = allocations.upper_bound(c);
  if (it == allocations.begin()) return false;
  --it;
  return c >= it->first && static_cast<size_t>(c - it->first) + bytes <= it->second;
}

}  // namespace

extern "C" {

cudaError_t cudaMalloc(void** dev_ptr, size_t size) {
  if (dev_ptr == nullptr) return cudaErrorInvalidValue;
  const size_t rounded = (size + kAlignment - 1) / kAlignment * kAlignment;
  void* p = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (p == nullptr) return cudaErrorMemoryAllocation;
  std::memset(p, 0xff, rounded);
  {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    allocations[static_cast<const char*>(p)] = size;
  }
  *dev_ptr = p;
  return cudaSuccess;
}

cudaError_t cudaFree(void* dev_ptr) {
  if (dev_ptr == nullptr) return cudaSuccess;
  {
    std::lock_guard<std::mutex> lock(allocations_mutex);
    if (allocations.erase(static_cast<const char*>(dev_ptr)) == 0) return cudaErrorInvalidValue;
  }
  std::free(dev_ptr);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind) {
  if (count == 0) return cudaSuccess;
  const bool dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (dst == nullptr || src == nullptr || (dst_device && !allocated(dst, count)) ||
      (src_device && !allocated(src, count))) {
    return cudaErrorInvalidValue;
  }
  std::memmove(dst, src, count);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* dev_ptr, int value, size_t count) {
  if (count == 0) return cudaSuccess;
  if (!allocated(dev_ptr, count)) return cudaErrorInvalidValue;
  std::memset(dev_ptr, value, count);
  return cudaSuccess;
}

cudaError_t cudaGetLastError(void) { return kvtune::cuda_host::take_launch_error(true); }
cudaError_t cudaPeekAtLastError(void) { return kvtune::cuda_host::take_launch_error(false); }
cudaError_t cudaDeviceSynchronize(void) { return kvtune::cuda_host::take_launch_error(false); }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return kvtune::cuda_host::take_launch_error(false); }

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    default:
      return "cudaErrorUnknown";
  }
}

const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidConfiguration:
      return "invalid configuration argument";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorLaunchFailure: {
      thread_local std::string text;
      text = "unspecified launch failure (host mode: " + kvtune::cuda_host::last_fault() + ")";
      return text.c_str();
    }
    default:
      return "unknown error (host mode)";
  }
}

cudaError_t cudaGetDeviceCount(int* count) {
  if (count == nullptr) return cudaErrorInvalidValue;
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (device == nullptr) return cudaErrorInvalidValue;
  *device = 0;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) { return device == 0 ? cudaSuccess : cudaErrorInvalidDevice; }

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (prop == nullptr) return cudaErrorInvalidValue;
  if (device != 0) return cudaErrorInvalidDevice;
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "kvtune host emulation (cuda/host)", sizeof prop->name - 1);
  prop->major = 0;  // no compute capability: device code takes its pre-sm_89 paths (docs/kernels.md)
  prop->minor = 0;
  prop->multiProcessorCount = kSmCount;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->sharedMemPerBlock = size_t{48} << 10;
  prop->totalGlobalMem = static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (value == nullptr) return cudaErrorInvalidValue;
  if (device != 0) return cudaErrorInvalidDevice;
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *value = kSmCount;
      return cudaSuccess;
    case cudaDevAttrWarpSize:
      *value = 32;
      return cudaSuccess;
    case cudaDevAttrMaxThreadsPerBlock:
      *value = 1024;
      return cudaSuccess;
    case cudaDevAttrComputeCapabilityMajor:
    case cudaDevAttrComputeCapabilityMinor:
      *value = 0;
      return cudaSuccess;
    default:
      return cudaErrorInvalidValue;  // not emulated
  }
}

}  // extern "C"
