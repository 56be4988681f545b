// What CUDA devices this process can use. Plain C++ header: no CUDA types leak out of cuda/.
#pragma once

#include <string>

namespace kvtune::cuda {

// Number of usable devices; 0 when there is no driver or no GPU (never throws).
int device_count();

// "NVIDIA H200 (sm_90, 139 GiB)" for device 0, or why there is none.
std::string device_description();

}  // namespace kvtune::cuda
