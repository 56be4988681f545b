// Capabilities are declared by the schemes (Scheme::traits), not read from their specs: each
// built-in declaration, and that policy wrappers merge their inner scheme's.
#include <gtest/gtest.h>

#include "test_support.h"

namespace kvtune {
namespace {

SchemeTraits traits_of(const std::string& spec) { return builtin_registry().make(spec)->traits(); }

TEST(SchemeTraits, EachSchemeDeclaresWhatItDoes) {
  EXPECT_FALSE(traits_of("q4_0").rotates_rows);
  EXPECT_TRUE(traits_of("q4_0").device_format);
  EXPECT_FALSE(traits_of("q4_0").policy_wrapper);
  EXPECT_TRUE(traits_of("q4_0:rotation=hadamard").rotates_rows);
  EXPECT_TRUE(traits_of("q4_0:rotation=hadamard").policy_wrapper);
  EXPECT_FALSE(traits_of("q4_0:rotation=hadamard").device_format);  // the kernels know no rotation
  EXPECT_TRUE(traits_of("int:bits=4,rotation=random,rotation_seed=3").rotates_rows);
  EXPECT_TRUE(traits_of("turboquant").rotates_rows);
  EXPECT_TRUE(traits_of("qjl").estimates_logits);
  EXPECT_FALSE(traits_of("qjl").device_format);
  EXPECT_TRUE(traits_of("fp8:format=e4m3,scale=calibrated").static_scales);
  EXPECT_FALSE(traits_of("fp8:format=e4m3,scale=unit").static_scales);
  EXPECT_TRUE(traits_of("kvquant:bits=3,role=k").static_scales);
  const SchemeTraits pre = traits_of("int:bits=4,axis=channel,rope_stage=pre");
  EXPECT_TRUE(pre.needs_rope);
  EXPECT_TRUE(pre.needs_positions);
  EXPECT_TRUE(pre.policy_wrapper);
  EXPECT_FALSE(traits_of("int:bits=4,axis=channel,sink_tokens=4").needs_rope);
  EXPECT_TRUE(traits_of("qjl:sink_tokens=4").estimates_logits);  // the wrapper keeps the inner trait
  EXPECT_FALSE(traits_of("q8_0").from_plugin);
}

}  // namespace
}  // namespace kvtune
