// Helpers for the end-to-end tests: run the built `kvtune` binary and capture what it printed,
// write and read small .npy files byte by byte (independently of the library's own reader), and
// give each test a scratch directory of its own.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace kvtune::e2e {

namespace fs = std::filesystem;

// What one run of the binary left behind. `status` is the exit status, or 128 + signal number when
// the process was killed (a crash must not pass for "exit 2").
struct RunResult {
  int status = -1;
  std::string out, err;
};

inline std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline std::vector<unsigned char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

// Quotes one argument for /bin/sh, so paths and specs pass through unchanged.
inline std::string shell_quote(const std::string& arg) {
  std::string quoted = "'";
  for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs `kvtune ARGS...` with stdout and stderr redirected to files in `scratch`; `env`, when given,
// is an env(1) prefix for the environment ("env -u CI SLURM_ARRAY_TASK_ID=3 ").
inline RunResult run_kvtune(const std::vector<std::string>& args, const fs::path& scratch,
                            const std::string& env = "") {
  const fs::path out_file = scratch / "stdout.txt", err_file = scratch / "stderr.txt";
  std::string command = env + shell_quote(KVTUNE_BINARY);
  for (const std::string& a : args) command += " " + shell_quote(a);
  command += " >" + shell_quote(out_file.string()) + " 2>" + shell_quote(err_file.string()) + " </dev/null";
  const int raw = std::system(command.c_str());
  RunResult r;
  if (raw != -1 && WIFEXITED(raw)) {
    r.status = WEXITSTATUS(raw);
  } else if (raw != -1 && WIFSIGNALED(raw)) {
    r.status = 128 + WTERMSIG(raw);
  }
  r.out = read_text(out_file);
  r.err = read_text(err_file);
  fs::remove(out_file);
  fs::remove(err_file);
  return r;
}

// A format-1.0 .npy image: magic, version 1.0, little-endian uint16 header length, the header dict
// padded with spaces and ended by '\n' so the data starts on a 64-byte boundary, then `data`.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  header.append((64 - (10 + header.size() + 1) % 64) % 64, ' ');
  header.push_back('\n');
  std::string image = "\x93NUMPY";
  image += '\x01';
  image += '\x00';
  image += static_cast<char>(header.size() & 0xff);
  image += static_cast<char>(header.size() >> 8);
  return image + header + data;
}

// The raw little-endian bytes of `values` (the tests run on little-endian hosts, as .npy '<' means).
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A float32 [rows, cols] .npy holding a deterministic, non-trivial pattern.
inline void write_float32_matrix(const fs::path& path, int rows, int cols, float phase = 0.0f) {
  std::vector<float> values(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 37 + 11) % 101) / 50.0f - 1.0f + phase;
  write_text(path, npy_bytes("<f4", "(" + std::to_string(rows) + ", " + std::to_string(cols) + ")", raw_bytes(values)));
}

// A float32 .npy read back minimally: its header text and its values. Fails the test (returns
// empty) when the magic, version or dtype is not what kvtune promises to write.
struct Float32Npy {
  std::string header;
  std::vector<float> values;
};

inline Float32Npy read_float32_npy(const fs::path& path) {
  const std::vector<unsigned char> bytes = read_bytes(path);
  Float32Npy npy;
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY\x01\x00", 8) != 0) {
    ADD_FAILURE() << path << " does not start with the .npy 1.0 magic";
    return npy;
  }
  const size_t header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
  EXPECT_EQ((10 + header_len) % 64, 0u) << path << ": data does not start on a 64-byte boundary";
  if (bytes.size() < 10 + header_len) {
    ADD_FAILURE() << path << ": header runs past the end of the file";
    return npy;
  }
  npy.header.assign(bytes.begin() + 10, bytes.begin() + 10 + static_cast<std::ptrdiff_t>(header_len));
  EXPECT_NE(npy.header.find("'descr': '<f4'"), std::string::npos) << npy.header;
  const size_t data_bytes = bytes.size() - 10 - header_len;
  EXPECT_EQ(data_bytes % 4, 0u);
  npy.values.resize(data_bytes / 4);
  std::memcpy(npy.values.data(), bytes.data() + 10 + header_len, npy.values.size() * 4);
  return npy;
}

// Gives every test its own scratch directory under the system temp directory, removed afterwards.
class ScratchDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() / ("kvtune-e2e-" + std::string(info->name()) + "-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }

  fs::path path(const std::string& name) const { return dir_ / name; }
  RunResult run(const std::vector<std::string>& args) const { return run_kvtune(args, dir_); }

  fs::path dir_;
};

}  // namespace kvtune::e2e
