// The .safetensors reader: every dtype it takes, slices of a rank-3 tensor, metadata, and each bad
// input named with the file and the tensor (docs/real-caches.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kvtune/error.h"
#include "kvtune/numeric/half.h"
#include "kvtune/safetensors.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A safetensors image: the 8-byte length, `header` as given, then `data`.
std::string image(const std::string& header, const std::string& data) {
  std::string out;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out += char((n >> (8 * i)) & 0xFF);
  return out + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& values) {
  std::string s(values.size() * sizeof(T), '\0');
  std::memcpy(s.data(), values.data(), s.size());
  return s;
}

class Safetensors : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("kvtune-st-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  std::string error_of(const std::string& bytes, const std::string& tensor = "", int64_t index = -1) {
    const std::string p = write("bad.safetensors", bytes);
    try {
      const SafetensorsFile f = SafetensorsFile::open(p);
      if (!tensor.empty()) f.read_matrix(tensor, index);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(Safetensors, ReadsEveryDtypeSlicesAndMetadata) {
  // f16 bits of 0.5, -1.25, 3, 65504; bf16 bits of 1, -2, 0.5, 3.140625 (0x4049).
  const std::vector<uint16_t> f16 = {0x3800, 0xBD00, 0x4200, 0x7BFF};
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC000, 0x3F00, 0x4049};
  const std::vector<float> f32 = {1.5f, -2.25f, 0.0f, 7.0f, 8.5f, -9.0f};  // [3, 2]
  const std::vector<double> f64 = {0.1, -0.2};
  const std::vector<int64_t> i64 = {0, 1, 4095};
  std::string data = raw(f16) + raw(bf16) + raw(f32) + raw(f64) + raw(i64);
  const std::string header =
      R"({"__metadata__":{"format":"kvtune-capture","layer":"3"},)"
      R"("k":{"dtype":"F16","shape":[2,1,2],"data_offsets":[0,8]},)"
      R"("v":{"dtype":"BF16","shape":[2,2],"data_offsets":[8,16]},)"
      R"("w":{"dtype":"F32","shape":[3,2],"data_offsets":[16,40]},)"
      R"("d":{"dtype":"F64","shape":[2],"data_offsets":[40,56]},)"
      R"("positions":{"dtype":"I64","shape":[3],"data_offsets":[56,80]}})";
  const SafetensorsFile f = SafetensorsFile::open(write("ok.safetensors", image(header, data)));
  EXPECT_EQ(f.metadata().at("layer"), "3");
  ASSERT_EQ(f.tensors().size(), 5u);
  EXPECT_EQ(f.tensors()[0].name, "k");  // in file order
  const Matrix k1 = f.read_matrix("k", 1);
  ASSERT_EQ(k1.rows(), 1);
  EXPECT_EQ(k1(0, 0), 3.0f);
  EXPECT_EQ(k1(0, 1), 65504.0f);
  const Matrix v = f.read_matrix("v");
  EXPECT_EQ(v(0, 0), 1.0f);
  EXPECT_EQ(v(0, 1), -2.0f);
  EXPECT_EQ(v(1, 1), 3.140625f);
  const Matrix w = f.read_matrix("w");
  EXPECT_EQ(w.rows(), 3);
  EXPECT_EQ(w(2, 1), -9.0f);
  const Matrix d = f.read_matrix("d");
  EXPECT_EQ(d.rows(), 1);
  EXPECT_EQ(d(0, 0), static_cast<float>(0.1));
  EXPECT_EQ(f.read_integers("positions"), i64);
  EXPECT_THAT(testing::input_error([&] { f.get("q"); }), HasSubstr("no tensor 'q' (the file has: k, v, w, d, positions)"));
}

TEST_F(Safetensors, RefusesHeadersThatLieOrDoNotFit) {
  const std::string ok = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string two_floats = raw(std::vector<float>{1.0f, 2.0f});
  EXPECT_THAT(error_of("abc"), HasSubstr("bad.safetensors: not a safetensors file (3 bytes"));
  EXPECT_THAT(error_of(image("{" + ok + "}", two_floats).substr(0, 20)), HasSubstr("truncated: the header claims"));
  std::string huge(8, '\0');
  huge[3] = char(0x10);  // 2^28 bytes: above the 100 MB cap
  EXPECT_THAT(error_of(huge + "{}"), HasSubstr("exceeds the cap of 100000000 bytes"));
  EXPECT_THAT(error_of(image("{\"t\":", "")), HasSubstr("the header is not valid JSON"));
  EXPECT_THAT(error_of(image("{\"t\":1e999999}", "")), HasSubstr("the header is not valid JSON"));  // out_of_range
  EXPECT_THAT(error_of(image("[1]", "")), HasSubstr("the header is not a JSON object"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", "ab")),
              HasSubstr("tensor 't': unsupported dtype 'F8_E4M3'"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two_floats)),
              HasSubstr("tensor 't': data_offsets span 8 bytes, but shape [3] of F32 needs 12"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", two_floats)),
              HasSubstr("data_offsets end 0 is before begin"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two_floats)),
              HasSubstr("shape entries must be non-negative integers"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[2]}})", two_floats)), HasSubstr("'data_offsets' must be"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", two_floats)),
              HasSubstr("unknown header key 'x'"));
  EXPECT_THAT(error_of(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                             R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                             two_floats)),
              HasSubstr("overlaps another tensor's bytes"));
  EXPECT_THAT(error_of(image(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", two_floats)),
              HasSubstr("bytes 0..4 of the data belong to no tensor"));
  EXPECT_THAT(error_of(image("{" + ok + "}", two_floats + "xyzw")), HasSubstr("4 bytes after the last tensor belong to none"));
  EXPECT_THAT(error_of(image("{" + ok + "}", two_floats.substr(0, 6))), HasSubstr("truncated: the tensors need 8 bytes"));
  EXPECT_THAT(error_of(image(R"({"__metadata__":{"a":1}})", "")), HasSubstr("__metadata__ value of 'a' is not a string"));
}

TEST_F(Safetensors, RefusesNonFiniteValuesNamingTheElement) {
  const std::vector<uint16_t> f16 = {0x3C00, 0x7E00, 0x3C00, 0x7C00};  // 1, NaN, 1, +Inf
  const std::string header = R"({"k":{"dtype":"F16","shape":[2,1,2],"data_offsets":[0,8]}})";
  EXPECT_THAT(error_of(image(header, raw(f16)), "k", 0), HasSubstr("tensor 'k': non-finite value (NaN) at [0, 0, 1]"));
  EXPECT_THAT(error_of(image(header, raw(f16)), "k", 1), HasSubstr("tensor 'k': non-finite value (Inf) at [1, 0, 1]"));
  EXPECT_THAT(error_of(image(header, raw(f16)), "k", 2), HasSubstr("slice 2 is outside its first axis of 2"));
  EXPECT_THAT(error_of(image(header, raw(f16)), "k"), HasSubstr("needs a slice of its first axis"));
  const std::string big = R"({"d":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})";
  EXPECT_THAT(error_of(image(big, raw(std::vector<double>{1e300})), "d"), HasSubstr("value 1e+300 at flat index 0 overflows float32"));
  const std::string ints = R"({"p":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})";
  EXPECT_THAT(error_of(image(ints, raw(std::vector<int64_t>{7})), "p"), HasSubstr("dtype I64 where floating-point values"));
}

}  // namespace
}  // namespace kvtune
