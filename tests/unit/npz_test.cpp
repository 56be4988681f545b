// The .npz reader against archives NumPy wrote (tests/data/npz: stored, deflated, Fortran order),
// and each corruption of them named with the file and the array.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <zlib.h>

#include "kvtune/error.h"
#include "kvtune/npz.h"
#include "test_support.h"

namespace kvtune {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void expect_fixture_arrays(const NpzFile& f) {
  EXPECT_EQ(f.names(), (std::vector<std::string>{"k", "v", "q"}));
  const NpyArray k = f.read("k");
  EXPECT_EQ(k.dtype, "float16");
  ASSERT_EQ(k.shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(k.values(0, 3), 65504.0f);
  EXPECT_EQ(k.values(1, 0), 1.0001659393310547e-4f);  // float16 bits 1678
  const NpyArray v = f.read("v");
  EXPECT_EQ(v.dtype, "float32");
  EXPECT_EQ(v.values(2, 3), 0.875f);
  const NpyArray q = f.read("q");
  EXPECT_EQ(q.shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(q.values(0, 2), static_cast<float>(1.0 / 3.0));
}

TEST(Npz, ReadsWhatNumpyWritesStoredOrDeflated) {
  expect_fixture_arrays(NpzFile::open(testing::data_path("npz/stored.npz")));
  expect_fixture_arrays(NpzFile::open(testing::data_path("npz/deflated.npz")));
  const NpyArray v = NpzFile::open(testing::data_path("npz/fortran.npz")).read("v");
  EXPECT_EQ(v.values(0, 1), -0.375f);
  EXPECT_EQ(v.values(2, 0), 0.5f);
}

uint32_t le32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | uint8_t(b[at + size_t(i)]);
  return v;
}
uint16_t le16(const std::string& b, size_t at) { return uint16_t(uint8_t(b[at]) | uint8_t(b[at + 1]) << 8); }

// Where the first member's data begins: after its local header, name and extra field (NumPy
// writes a ZIP64 extra field there).
size_t first_data(const std::string& zip) { return 30 + size_t(le16(zip, 26)) + size_t(le16(zip, 28)); }

// Rewrites the first (stored) member's CRC-32 in its local header and its directory entry, so a
// change to its bytes reaches the .npy rules.
void fix_first_crc(std::string& zip) {
  const size_t data = first_data(zip), size = le32(zip, 18);
  const uint32_t crc = uint32_t(crc32(0L, reinterpret_cast<const Bytef*>(zip.data() + data), uInt(size)));
  const size_t cd = zip.find(std::string("PK\x01\x02", 4));
  for (size_t at : {size_t(14), cd + 16}) {
    for (int i = 0; i < 4; ++i) zip[at + size_t(i)] = char((crc >> (8 * i)) & 0xFF);
  }
}

class NpzCorrupt : public ::testing::Test {
 protected:
  fs::path dir_ = fs::temp_directory_path() / ("kvtune-npz-" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
  void SetUp() override { fs::create_directories(dir_); }
  void TearDown() override { fs::remove_all(dir_); }
  std::string error_of(const std::string& bytes, const std::string& array = "") {
    const std::string p = (dir_ / "bad.npz").string();
    std::ofstream(p, std::ios::binary) << bytes;
    try {
      const NpzFile f = NpzFile::open(p);
      f.read(array.empty() ? "k" : array);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  }
};

TEST_F(NpzCorrupt, EachCorruptionIsNamed) {
  const std::string stored = file_bytes(testing::data_path("npz/stored.npz"));
  const std::string deflated = file_bytes(testing::data_path("npz/deflated.npz"));
  EXPECT_THAT(error_of("PK"), HasSubstr("bad.npz: not a .npz file"));
  EXPECT_THAT(error_of(std::string(100, 'x')), HasSubstr("no ZIP end-of-central-directory record"));
  // Cut off the front: the directory points past what is left.
  EXPECT_THAT(error_of(stored.substr(200)), HasSubstr("bad.npz"));
  // A flipped byte inside k's data (the first member's .npy header starts at offset 30 + name):
  std::string flipped = stored;
  flipped[first_data(stored) + 140] ^= 0x01;
  EXPECT_THAT(error_of(flipped, "k"), HasSubstr("array 'k': CRC-32 mismatch"));
  std::string bad_deflate = deflated;
  bad_deflate[first_data(deflated) + 10] ^= 0x55;
  EXPECT_THAT(error_of(bad_deflate, "k"), ::testing::AnyOf(HasSubstr("corrupt deflate data"), HasSubstr("CRC-32 mismatch")));
  EXPECT_THAT(error_of(stored, "x"), HasSubstr("no array 'x' (the archive has: k, v, q)"));
  // The first local header's signature broken.
  std::string no_local = stored;
  no_local[0] = 'X';
  EXPECT_THAT(error_of(no_local), HasSubstr("member 'k.npy': no local header at offset 0"));
  // The compression method set to 12 (bzip2) in the first central directory entry.
  std::string bzip = stored;
  const size_t cd = bzip.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  bzip[cd + 10] = 12;
  EXPECT_THAT(error_of(bzip), HasSubstr("member 'k.npy': compression method 12"));
  // Encrypted flag.
  std::string encrypted = stored;
  encrypted[cd + 8] |= 1;
  EXPECT_THAT(error_of(encrypted), HasSubstr("member 'k.npy' is encrypted"));
  // A member that is not .npy: rename k.npy to k.npx in the directory.
  std::string renamed = stored;
  renamed[cd + 46 + 4] = 'x';
  EXPECT_THAT(error_of(renamed), HasSubstr("member 'k.npx' is not a .npy array"));
  // Two members with one name: rename v.npy to k.npy in the directory.
  std::string twice = stored;
  const size_t cd2 = twice.find(std::string("PK\x01\x02", 4), cd + 4);
  twice[cd2 + 46] = 'k';
  EXPECT_THAT(error_of(twice), HasSubstr("array 'k' appears twice"));
  // A member's .npy refused by the .npy rules (its dtype '<f2' made '<i2'), named with the archive.
  std::string dtype = stored;
  const size_t descr = dtype.find("'<f2'");
  ASSERT_NE(descr, std::string::npos);
  dtype[descr + 2] = 'i';
  fix_first_crc(dtype);
  EXPECT_THAT(error_of(dtype, "k"), HasSubstr("bad.npz: array 'k': unsupported dtype '<i2'"));
  // A deflated member claiming more than deflate can expand to (1032:1) is refused before its
  // claimed size is allocated: k's uncompressed size set to 4 000 000 000 in the directory.
  std::string claim = deflated;
  const size_t dcd = claim.find(std::string("PK\x01\x02", 4));
  ASSERT_NE(dcd, std::string::npos);
  for (int i = 0; i < 4; ++i) claim[dcd + 24 + size_t(i)] = char((4000000000u >> (8 * i)) & 0xFF);
  EXPECT_THAT(error_of(claim), HasSubstr("member 'k.npy': 4000000000 bytes cannot inflate from"));
}

}  // namespace
}  // namespace kvtune
