#include <gtest/gtest.h>
#include "kvtune/numeric/half.h"
TEST(Half, One) { EXPECT_EQ(kvtune::f32_to_f16_bits(1.0f), 0x3c00); }
