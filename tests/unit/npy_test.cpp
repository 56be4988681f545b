// .npy reading: dtypes, orders, ranks and every refusal naming the file and the problem.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <cstring>

#include "kvtune/error.h"
#include "kvtune/npy.h"
#include "test_support.h"

namespace kvtune {
namespace {

using ::testing::HasSubstr;

// A format-1.0 .npy image with the given header fields and raw data bytes.
std::vector<std::byte> npy_bytes(const std::string& descr, const std::string& shape, const void* data, size_t n,
                                 bool fortran = false) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") +
                       ", 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::vector<std::byte> out(10 + header.size() + n);
  std::memcpy(out.data(), "\x93NUMPY\x01\x00", 8);
  out[8] = std::byte(header.size() & 0xff);
  out[9] = std::byte(header.size() >> 8);
  std::memcpy(out.data() + 10, header.data(), header.size());
  if (n) std::memcpy(out.data() + 10 + header.size(), data, n);
  return out;
}

std::string error_of(const std::vector<std::byte>& bytes) {
  try {
    parse_npy(bytes, "x.npy");
  } catch (const InputError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Npy, ReadsFloat16Float32Float64) {
  const uint16_t h[2] = {0x3c00, 0xc000};
  EXPECT_EQ(parse_npy(npy_bytes("<f2", "(2,)", h, 4), "h").values(0, 1), -2.0f);
  const float f[2] = {1.5f, 2.5f};
  const NpyArray a = parse_npy(npy_bytes("<f4", "(1, 2)", f, 8), "f");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(a.values(0, 1), 2.5f);
  const double d[2] = {0.25, -8.0};
  EXPECT_EQ(parse_npy(npy_bytes("<f8", "(2,)", d, 16), "d").values(0, 0), 0.25f);
}

TEST(Npy, FortranOrderIsTransposedIntoRowMajor) {
  const float f[6] = {1, 4, 2, 5, 3, 6};  // column-major [[1,2,3],[4,5,6]]
  const NpyArray a = parse_npy(npy_bytes("<f4", "(2, 3)", f, 24, true), "f");
  EXPECT_EQ(a.values(0, 2), 3.0f);
  EXPECT_EQ(a.values(1, 0), 4.0f);
}

TEST(Npy, WriteThenReadIsIdentity) {
  const Matrix m = testing::normal_matrix(5, 7, 1);
  EXPECT_EQ(parse_npy(npy_image(m), "m").values, m);
  const NpyArray v = parse_npy(npy_image(m.view().row_range(0, 1), true), "v");
  EXPECT_EQ(v.shape, (std::vector<int64_t>{7}));
}

TEST(Npy, RefusesUnsupportedDtype) {
  const int32_t i[2] = {1, 2};
  const std::string e = error_of(npy_bytes("<i4", "(2,)", i, 8));
  EXPECT_THAT(e, HasSubstr("x.npy"));
  EXPECT_THAT(e, HasSubstr("unsupported dtype '<i4'"));
  EXPECT_THAT(error_of(npy_bytes(">f4", "(2,)", i, 8)), HasSubstr("unsupported dtype '>f4'"));
}

TEST(Npy, RefusesWrongRank) {
  const float f[8] = {};
  EXPECT_THAT(error_of(npy_bytes("<f4", "(2, 2, 2)", f, 32)), HasSubstr("rank 3"));
  EXPECT_THAT(error_of(npy_bytes("<f4", "()", f, 4)), HasSubstr("rank 0"));
}

TEST(Npy, RefusesTruncatedData) {
  const float f[3] = {};
  EXPECT_THAT(error_of(npy_bytes("<f4", "(2, 2)", f, 12)), HasSubstr("truncated data: shape needs 16 bytes, file has 12"));
  auto bytes = npy_bytes("<f4", "(2,)", f, 8);
  bytes.resize(20);
  EXPECT_THAT(error_of(bytes), HasSubstr("truncated"));
}

// More bytes than the shape needs is not the array the header describes (a wrong shape, or two
// files run together).
TEST(Npy, RefusesBytesAfterTheData) {
  const float f[5] = {};
  EXPECT_THAT(error_of(npy_bytes("<f4", "(2, 2)", f, 20)),
              HasSubstr("x.npy: 4 bytes after the data (the shape needs 16)"));
}

// The header is a dictionary numpy wrote: closed, each key once.
TEST(Npy, RefusesMalformedHeaderDictionaries) {
  const float f[4] = {};
  std::vector<std::byte> open = npy_bytes("<f4", "(2, 2)", f, 16);
  const auto brace = std::find(open.begin() + 10, open.end(), std::byte{'}'});
  *brace = std::byte{' '};
  EXPECT_THAT(error_of(open), HasSubstr("malformed .npy header: not a {...} dictionary"));
  EXPECT_THAT(error_of(npy_bytes("<f4', 'descr': '<f8", "(2, 2)", f, 16)),
              HasSubstr("malformed .npy header: 'descr' is given twice"));
}

TEST(Npy, RefusesShapesLargerThanTheFile) {
  const float f[4] = {};
  // rows * cols would wrap to 0 in 64-bit arithmetic.
  EXPECT_THAT(error_of(npy_bytes("<f4", "(4611686018427387904, 4)", f, 16)), HasSubstr("is too large"));
  EXPECT_THAT(error_of(npy_bytes("<f4", "(3037000500, 3037000500)", f, 16)), HasSubstr("is too large"));
  EXPECT_THAT(error_of(npy_bytes("<f4", "(1000000, 4)", f, 16)), HasSubstr("truncated data"));
  EXPECT_THAT(error_of(npy_bytes("<f4", "(99999999999999999999999, 4)", f, 16)), HasSubstr("too large"));
}

TEST(Npy, RefusesNonFiniteValuesNamingTheIndex) {
  const float f[4] = {1, 2, NAN, 4};
  EXPECT_THAT(error_of(npy_bytes("<f4", "(2, 2)", f, 16)), HasSubstr("non-finite value (NaN) at [1, 0]"));
  const float g[2] = {INFINITY, 0};
  EXPECT_THAT(error_of(npy_bytes("<f4", "(2,)", g, 8)), HasSubstr("(Inf) at [0]"));
  const double big[1] = {1e300};
  EXPECT_THAT(error_of(npy_bytes("<f8", "(1,)", big, 8)), HasSubstr("value 1e+300 at flat index 0 overflows float32"));
}

TEST(Npy, RefusesFilesThatAreNotNpy) {
  std::vector<std::byte> junk(32, std::byte{'a'});
  EXPECT_THAT(error_of(junk), HasSubstr("not a .npy file"));
  EXPECT_THAT([] {
    try {
      read_npy("/nonexistent/k.npy");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string();
  }(), HasSubstr("/nonexistent/k.npy: cannot open"));
}

}  // namespace
}  // namespace kvtune
