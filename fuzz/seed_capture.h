// The small capture (tests/support/capture_fixture.h's format) the manifest target keeps beside the
// manifests it is fed, and whose files write_seeds gives as seeds: both must be the same capture.
#pragma once

#include "capture_fixture.h"

namespace kvtune::fuzz {

inline testing::CaptureSpec seed_capture_spec() {
  testing::CaptureSpec s;
  s.head_dim = 8;
  s.queries = 2;
  s.samples = {{"a", 12}, {"b", 8}};
  return s;
}

}  // namespace kvtune::fuzz
