// Whole-file writes: atomic replacement of regular files, in-place writes to devices, and write
// errors that carry the OS's reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "kvtune/error.h"
#include "kvtune/file_io.h"

namespace kvtune {
namespace {

std::vector<std::byte> bytes_of(const std::string& text) {
  std::vector<std::byte> out(text.size());
  for (size_t i = 0; i < text.size(); ++i) out[i] = static_cast<std::byte>(text[i]);
  return out;
}

// Issue #13: a full disk used to read "write failed" with no reason. /dev/full fails every write
// with ENOSPC.
TEST(FileIo, WriteFailureSaysWhy) {
  ASSERT_TRUE(std::filesystem::exists("/dev/full")) << "the test needs Linux's /dev/full (every write fails with ENOSPC)";
  try {
    write_file_atomic("/dev/full", bytes_of("some bytes"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "/dev/full: write failed (No space left on device)");
  }
}

TEST(FileIo, WritesDevicesInPlaceAndFilesAtomically) {
  EXPECT_NO_THROW(write_file_atomic("/dev/null", bytes_of("discarded")));
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("kvtune-file-io-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "out.bin").string();
  write_file_atomic(file, bytes_of("first"));
  write_file_atomic(file, bytes_of("second"));
  const std::vector<std::byte> back = read_file(file);
  EXPECT_EQ(back, bytes_of("second"));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  try {
    write_file_atomic((dir / "missing" / "x.bin").string(), bytes_of("x"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("does not exist"));
  }
  {  // two spellings of one file not written yet, relative or not; a device is never "the same file"
    const std::filesystem::path cwd = std::filesystem::current_path();
    std::filesystem::current_path(dir);
    EXPECT_TRUE(same_file("new.bin", "./new.bin"));
    EXPECT_TRUE(same_file("new.bin", (dir / "new.bin").string()));
    EXPECT_FALSE(same_file("new.bin", "other.bin"));
    std::filesystem::current_path(cwd);
    EXPECT_FALSE(same_file("/dev/null", "/dev/null"));
  }
  try {  // a parent that is a file is not called missing
    write_file_atomic((dir / "out.bin" / "x.bin").string(), bytes_of("x"));
    FAIL() << "no error";
  } catch (const InputError& e) {
    EXPECT_THAT(e.what(), ::testing::HasSubstr("output directory " + file + " is not a directory"));
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kvtune
