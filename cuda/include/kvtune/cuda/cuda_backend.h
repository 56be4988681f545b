// The CUDA evaluator backend (kvtune/eval_backend.h). Round trips of schemes with a device format
// run as the GPU kernels compute them: quantize_append into a one-region cache, then dequantize,
// so the simulator's metrics come from the kernels' bytes (identical to the CPU's by design, and
// checked by tests/gpu). Schemes without a device format (policies, rotations, research schemes,
// plugins) run their CPU roundtrip. In kernel mode a pair whose formats the fused kernel decodes
// gets its attention output from decode_attention over the packed caches.
#pragma once

#include <string>

#include "kvtune/eval_backend.h"

namespace kvtune::cuda {

// Throws InputError naming `where` when the process sees no CUDA device.
EvalBackendPtr make_cuda_backend(bool kernel_mode, const std::string& where);

}  // namespace kvtune::cuda
