#include "kvtune/npz.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <set>

#include "kvtune/error.h"

namespace kvtune {
namespace {

// A member larger than this is refused before it is inflated (a corrupt size must not allocate
// terabytes): 4 GiB, what one zlib call takes (its lengths are 32-bit).
constexpr uint64_t kMaxMemberBytes = 0xFFFFFFFFull;
// Deflate expands at most 1032:1 (zlib's "Technical Details", https://zlib.net/zlib_tech.html):
// a member claiming more from its compressed bytes is corrupt, and is refused before its claimed
// size is allocated (found by fuzz/fuzz_npz.cpp: 632 bytes claiming gigabytes).
constexpr uint64_t kMaxDeflateRatio = 1032;

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw InputError(path + ": cannot open the file");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<uint64_t>(in_.tellg());
  }
  uint64_t size() const { return size_; }
  std::vector<unsigned char> bytes(uint64_t at, uint64_t count, const std::string& what) {
    if (at > size_ || count > size_ - at) {
      throw InputError(path_ + ": truncated: " + what + " needs bytes " + std::to_string(at) + ".." +
                       std::to_string(at + count) + ", the file has " + std::to_string(size_));
    }
    std::vector<unsigned char> out(static_cast<size_t>(count));
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(at));
    in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count));
    if (!in_) throw InputError(path_ + ": cannot read " + what);
    return out;
  }

 private:
  std::string path_;
  std::ifstream in_;
  uint64_t size_ = 0;
};

uint64_t le(const unsigned char* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

}  // namespace

NpzFile NpzFile::open(const std::string& path) {
  Reader r(path);
  const std::string not_zip = path + ": not a .npz file (no ZIP end-of-central-directory record)";
  if (r.size() < 22) throw InputError(not_zip);
  // The end record is the last 22 bytes plus a comment of at most 65535.
  const uint64_t tail = std::min<uint64_t>(r.size(), 22 + 65535);
  const std::vector<unsigned char> end = r.bytes(r.size() - tail, tail, "the end record");
  int64_t eocd = -1;
  for (int64_t i = int64_t(tail) - 22; i >= 0; --i) {
    if (le(&end[size_t(i)], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd < 0) throw InputError(not_zip);
  const unsigned char* e = &end[size_t(eocd)];
  uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
  const uint64_t eocd_at = r.size() - tail + uint64_t(eocd);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {
    // ZIP64: a locator just before the end record points at the ZIP64 end record.
    if (eocd_at < 20) throw InputError(path + ": ZIP64 archive without its end-record locator");
    const std::vector<unsigned char> loc = r.bytes(eocd_at - 20, 20, "the ZIP64 locator");
    if (le(loc.data(), 4) != 0x07064b50) throw InputError(path + ": ZIP64 archive without its end-record locator");
    const std::vector<unsigned char> z = r.bytes(le(loc.data() + 8, 8), 56, "the ZIP64 end record");
    if (le(z.data(), 4) != 0x06064b50) throw InputError(path + ": the ZIP64 end record is not where its locator says");
    entries = le(z.data() + 32, 8);
    cd_size = le(z.data() + 40, 8);
    cd_offset = le(z.data() + 48, 8);
  }
  const std::vector<unsigned char> cd = r.bytes(cd_offset, cd_size, "the central directory");
  NpzFile f;
  f.path_ = path;
  std::set<std::string> seen;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [local header, end of data) per member
  size_t at = 0;
  for (uint64_t i = 0; i < entries; ++i) {
    if (at + 46 > cd.size() || le(&cd[at], 4) != 0x02014b50) {
      throw InputError(path + ": central directory entry " + std::to_string(i) + " is malformed or missing");
    }
    const unsigned char* h = &cd[at];
    const uint64_t flags = le(h + 8, 2), method = le(h + 10, 2), name_len = le(h + 28, 2), extra_len = le(h + 30, 2),
                   comment_len = le(h + 32, 2);
    if (at + 46 + name_len + extra_len + comment_len > cd.size()) {
      throw InputError(path + ": central directory entry " + std::to_string(i) + " runs past the directory");
    }
    Member m;
    std::string name(reinterpret_cast<const char*>(h + 46), name_len);
    m.crc = uint32_t(le(h + 16, 4));
    m.compressed = le(h + 20, 4);
    m.size = le(h + 24, 4);
    uint64_t local = le(h + 42, 4);
    // ZIP64 extra field (id 1): the 8-byte values of the fields set to 0xFFFFFFFF, in this order.
    for (size_t x = 0; x + 4 <= extra_len;) {
      const unsigned char* p = h + 46 + name_len + x;
      const uint64_t id = le(p, 2), len = le(p + 2, 2);
      if (x + 4 + len > extra_len) throw InputError(path + ": member '" + name + "': malformed extra field");
      if (id == 1) {
        size_t k = 4;
        for (uint64_t* field : {&m.size, &m.compressed, &local}) {
          if (*field != 0xFFFFFFFF) continue;
          if (k + 8 > 4 + len) throw InputError(path + ": member '" + name + "': short ZIP64 extra field");
          *field = le(p + k, 8);
          k += 8;
        }
      }
      x += 4 + len;
    }
    at += 46 + name_len + extra_len + comment_len;
    const std::string what = path + ": member '" + name + "'";
    if (flags & 1) throw InputError(what + " is encrypted");
    if (method != 0 && method != 8) {
      throw InputError(what + ": compression method " + std::to_string(method) + "; expected stored (0) or deflate (8)");
    }
    if (name.size() < 5 || name.compare(name.size() - 4, 4, ".npy") != 0) {
      throw InputError(what + " is not a .npy array");
    }
    if (m.size > kMaxMemberBytes || m.compressed > kMaxMemberBytes) throw InputError(what + ": " + std::to_string(m.size) + " bytes exceeds the cap of 4 GiB per array");
    if (method == 0 && m.compressed != m.size) throw InputError(what + ": a stored member whose sizes disagree");
    if (method == 8 && m.size > (m.compressed + 1) * kMaxDeflateRatio) {
      throw InputError(what + ": " + std::to_string(m.size) + " bytes cannot inflate from " + std::to_string(m.compressed) +
                       " (deflate expands at most " + std::to_string(kMaxDeflateRatio) + "x)");
    }
    m.name = name.substr(0, name.size() - 4);
    if (!seen.insert(m.name).second) throw InputError(path + ": array '" + m.name + "' appears twice");
    m.method = uint16_t(method);
    const std::vector<unsigned char> lh = r.bytes(local, 30, what + "'s local header");
    if (le(lh.data(), 4) != 0x04034b50) throw InputError(what + ": no local header at offset " + std::to_string(local));
    m.data = local + 30 + le(lh.data() + 26, 2) + le(lh.data() + 28, 2);
    if (m.data > r.size() || m.compressed > r.size() - m.data) {
      throw InputError(what + ": truncated: its data needs bytes " + std::to_string(m.data) + ".." +
                       std::to_string(m.data + m.compressed) + ", the file has " + std::to_string(r.size()));
    }
    ranges.emplace_back(local, m.data + m.compressed);
    f.members_.push_back(m);
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].first < ranges[i - 1].second) throw InputError(path + ": two members overlap in the file");
  }
  return f;
}

std::vector<std::string> NpzFile::names() const {
  std::vector<std::string> out;
  for (const Member& m : members_) out.push_back(m.name);
  return out;
}

NpyArray NpzFile::read(const std::string& name) const {
  const auto m = std::find_if(members_.begin(), members_.end(), [&](const Member& x) { return x.name == name; });
  if (m == members_.end()) {
    std::string names;
    for (const Member& x : members_) names += (names.empty() ? "" : ", ") + x.name;
    throw InputError(path_ + ": no array '" + name + "' (the archive has: " + (names.empty() ? "none" : names) + ")");
  }
  const std::string what = path_ + ": array '" + name + "'";
  Reader r(path_);
  const std::vector<unsigned char> raw = r.bytes(m->data, m->compressed, what);
  std::vector<std::byte> npy(static_cast<size_t>(m->size));
  if (m->method == 0) {
    // An empty member has no buffer to copy from (memcpy's null pointer is undefined even for 0
    // bytes; found by fuzz/fuzz_npz.cpp); parse_npy refuses it below.
    if (!raw.empty()) std::memcpy(npy.data(), raw.data(), raw.size());
  } else {
    z_stream z{};
    if (inflateInit2(&z, -MAX_WBITS) != Z_OK) throw InputError(what + ": cannot start inflating");
    z.next_in = const_cast<Bytef*>(raw.data());
    z.avail_in = static_cast<uInt>(raw.size());
    z.next_out = reinterpret_cast<Bytef*>(npy.data());
    z.avail_out = static_cast<uInt>(npy.size());
    const int rc = inflate(&z, Z_FINISH);  // the whole member in one call (it is below 4 GiB)
    const uint64_t produced = z.total_out;
    inflateEnd(&z);
    if (rc != Z_STREAM_END || produced != m->size) {
      throw InputError(what + ": corrupt deflate data (inflated " + std::to_string(produced) + " of " +
                       std::to_string(m->size) + " bytes)");
    }
  }
  const uLong crc = crc32_z(0L, reinterpret_cast<const Bytef*>(npy.data()), npy.size());
  if (uint32_t(crc) != m->crc) throw InputError(what + ": CRC-32 mismatch (the member is corrupt)");
  return parse_npy(npy, what);
}

}  // namespace kvtune
