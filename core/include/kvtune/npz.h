// NumPy .npz archives (numpy.savez, numpy.savez_compressed): a ZIP archive of .npy members, stored
// or deflated, ZIP64 included (APPNOTE.TXT 6.3.x: the central directory, local headers, the ZIP64
// end record and extra field). Opening reads the central directory only; each array is read, and
// checked like a .npy file (npy.h), when asked for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kvtune/npy.h"

namespace kvtune {

class NpzFile {
 public:
  // Reads and checks the directory: every member a .npy file, stored or deflated, unencrypted,
  // inside the file, no two overlapping, no name twice. Throws InputError naming the file.
  static NpzFile open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // the array names: members without ".npy", in order
  // The array `name`; InputError naming the file and the member for a missing member, a CRC
  // mismatch, a truncated or corrupt deflate stream and everything parse_npy refuses.
  NpyArray read(const std::string& name) const;

 private:
  struct Member {
    std::string name;  // without ".npy"
    uint16_t method = 0;
    uint32_t crc = 0;
    uint64_t compressed = 0, size = 0, data = 0;  // data: where the member's bytes begin
  };
  std::string path_;
  std::vector<Member> members_;
};

}  // namespace kvtune
