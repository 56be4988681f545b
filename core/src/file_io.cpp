#include "kvtune/file_io.h"

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
}  // namespace

void require_writable(const std::string& path) {
  const fs::path dir = parent_of(path);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw InputError(path + ": output directory " + dir.string() + " does not exist");
  if (::access(dir.c_str(), W_OK) != 0) throw InputError(path + ": output directory " + dir.string() + " is not writable");
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, expected a file name");
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  require_writable(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw InputError(path + ": cannot create (" + std::strerror(errno) + ")");
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      out.close();
      std::remove(tmp.c_str());
      throw InputError(path + ": write failed");
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw InputError(path + ": cannot move into place (" + ec.message() + ")");
  }
}

}  // namespace kvtune
