#include "kvtune/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kvtune/error.h"

namespace kvtune {
namespace fs = std::filesystem;

std::vector<std::byte> read_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open for reading (" + std::strerror(errno) + ")");
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw InputError(path + ": not a regular file (cannot determine its size)");
  in.seekg(0);
  std::vector<std::byte> bytes(static_cast<size_t>(size));
  in.read(reinterpret_cast<char*>(bytes.data()), size);
  if (!in) throw InputError(path + ": read failed");
  return bytes;
}

namespace {
fs::path parent_of(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? fs::path(".") : parent;
}

// A device or pipe (/dev/stdout, /dev/full, a FIFO) cannot be replaced by a rename: it is written
// in place.
bool is_stream(const std::string& path) {
  std::error_code ec;
  const fs::file_type t = fs::status(path, ec).type();
  return !ec && (t == fs::file_type::character || t == fs::file_type::fifo || t == fs::file_type::socket);
}

// The OS's reason goes into every write error: "write failed" alone does not say the disk is full.
[[noreturn]] void fail(const std::string& path, const std::string& what, int err) {
  throw InputError(path + ": " + what + " (" + std::strerror(err) + ")");
}

// Writes every byte to fd, retrying short writes; returns 0 or the errno of the failure.
int write_all(int fd, std::span<const std::byte> bytes) {
  const char* p = reinterpret_cast<const char*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {
    const ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return 0;
}
}  // namespace

void require_writable(const std::string& path) {
  if (is_stream(path)) {
    if (::access(path.c_str(), W_OK) != 0) fail(path, "not writable", errno);
    return;
  }
  const fs::path dir = parent_of(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    const bool there = fs::exists(dir, ec);
    throw InputError(path + ": output directory " + dir.string() + (there ? " is not a directory" : " does not exist"));
  }
  if (::access(dir.c_str(), W_OK) != 0) throw InputError(path + ": output directory " + dir.string() + " is not writable");
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a file name");
}

bool same_file(const std::string& a, const std::string& b) {
  if (is_stream(a) || is_stream(b)) return false;  // a device or FIFO takes any number of writes
  std::error_code ea, eb;
  if (fs::exists(a, ea) && fs::exists(b, eb)) return fs::equivalent(a, b, ea) && !ea;
  // Absolute first: weakly_canonical leaves a relative path whose first part is missing relative.
  const fs::path p = fs::weakly_canonical(fs::absolute(a, ea), ea), q = fs::weakly_canonical(fs::absolute(b, eb), eb);
  return !ea && !eb && p == q;
}

void require_not_an_input(const std::string& path, const std::vector<std::string>& inputs, const std::string& what) {
  if (path.empty()) return;
  for (const std::string& input : inputs) {
    if (!input.empty() && same_file(path, input)) {
      throw InputError(what + " " + path + ": is also an input (" + input + "); write the output elsewhere");
    }
  }
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  require_writable(path);
  if (is_stream(path)) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) fail(path, "cannot open for writing", errno);
    const int err = write_all(fd, bytes);
    const int closed = ::close(fd) == 0 ? 0 : errno;
    if (err != 0 || closed != 0) fail(path, "write failed", err != 0 ? err : closed);
    return;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) fail(path, "cannot create", errno);
  const int err = write_all(fd, bytes);
  // close() can be where a delayed write error (NFS, quota) shows up.
  const int closed = ::close(fd) == 0 ? 0 : errno;
  if (err != 0 || closed != 0) {
    std::remove(tmp.c_str());
    fail(path, "write failed", err != 0 ? err : closed);
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot move into place (" + ec.message() + ")");
  }
}

}  // namespace kvtune
