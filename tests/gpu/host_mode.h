// Whether this build of the GPU suites runs the kernels on a device or in the host mode
// (cuda/host: every CUDA thread a fiber on the CPU, tests/gpu/CMakeLists.txt), and the sizes a
// test shrinks to there, where the emulation is slow at them. Each shrunk size is stated where it
// is used.
#pragma once

namespace kvtune::testing {

#if defined(KVTUNE_CUDA_HOST_MODE)
inline constexpr bool kHostMode = true;
#else
inline constexpr bool kHostMode = false;
#endif

template <class T>
constexpr T device_or_host(T on_device, T in_host_mode) {
  return kHostMode ? in_host_mode : on_device;
}

}  // namespace kvtune::testing
