// The CUDA backend's device query. Kernel tests join this suite with the CUDA kernels.
#include <gtest/gtest.h>

#include "host_mode.h"
#include "kvtune/cuda/device_info.h"

namespace {

TEST(CudaDevice, QueryNeverFailsAndDescribesTheDevice) {
  const int n = kvtune::cuda::device_count();
  ASSERT_GE(n, 0);
  const std::string what = kvtune::cuda::device_description();
  if (n == 0) {
    GTEST_SKIP() << "no CUDA device on this machine (" << what << "); the GPU suite runs on a machine with a device";
  }
  EXPECT_NE(what.find("sm_"), std::string::npos) << what;
  // The host mode says what it is, so no log mistakes its results for a device's.
  EXPECT_EQ(what.find("host emulation") != std::string::npos, kvtune::testing::kHostMode) << what;
}

}  // namespace
