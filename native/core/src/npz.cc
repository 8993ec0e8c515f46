#include "edgekit/npz.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <fstream>
#include <limits>

#include "edgekit/error.h"
#include "edgekit/file_io.h"

namespace edgekit {
namespace {

constexpr std::uint32_t kLocalSig = 0x04034b50;
constexpr std::uint32_t kCentralSig = 0x02014b50;
constexpr std::uint32_t kEndSig = 0x06054b50;
constexpr std::uint32_t kZip64EndSig = 0x06064b50;
constexpr std::uint32_t kZip64LocatorSig = 0x07064b50;
constexpr std::size_t kLocalSize = 30, kCentralSize = 46, kEndSize = 22;
constexpr std::size_t kZip64LocatorSize = 20, kZip64EndSize = 56;
constexpr std::uint16_t kStored = 0, kDeflate = 8;

std::uint64_t le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

Error bad(const std::string& path, const std::string& why) {
  return Error(ExitCode::input, path + " is not a readable .npz archive: " + why,
               "write it with numpy.savez(path, name=array, ...)");
}

class ZipFile {
 public:
  explicit ZipFile(const std::string& path) : path_(path), in_(path, std::ios::binary) {
    if (!in_) throw Error(ExitCode::input, "cannot read " + path, "check the path");
    in_.seekg(0, std::ios::end);
    size_ = static_cast<std::uint64_t>(in_.tellg());
  }
  std::uint64_t size() const { return size_; }
  std::vector<std::uint8_t> read(std::uint64_t offset, std::uint64_t count) {
    if (offset > size_ || count > size_ - offset) throw bad(path_, "truncated (an entry points past the end)");
    std::vector<std::uint8_t> out(static_cast<std::size_t>(count));
    in_.clear();
    in_.seekg(static_cast<std::streamoff>(offset));
    if (count && !in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count))) {
      throw bad(path_, "read error");
    }
    return out;
  }

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t size_ = 0;
};

struct Entry {
  std::string name;
  std::uint16_t flags = 0, method = 0;
  std::uint32_t crc = 0;
  std::uint64_t compressed = 0, uncompressed = 0, local_offset = 0;
};

// The zip64 "extended information" extra field holds the 64-bit values whose
// 32-bit slots are 0xffffffff, in this order. numpy.savez forces it on every entry.
void apply_zip64(const std::uint8_t* extra, std::size_t size, Entry* e, bool usize64, bool csize64, bool off64) {
  std::size_t i = 0;
  while (i + 4 <= size) {
    const auto id = static_cast<std::uint16_t>(le(extra + i, 2));
    const auto len = static_cast<std::size_t>(le(extra + i + 2, 2));
    const std::uint8_t* p = extra + i + 4;
    if (i + 4 + len > size) return;
    if (id == 0x0001) {
      std::size_t at = 0;
      if (usize64 && at + 8 <= len) e->uncompressed = le(p + at, 8), at += 8;
      if (csize64 && at + 8 <= len) e->compressed = le(p + at, 8), at += 8;
      if (off64 && at + 8 <= len) e->local_offset = le(p + at, 8), at += 8;
      return;
    }
    i += 4 + len;
  }
}

std::vector<Entry> central_directory(ZipFile& zip, const std::string& path) {
  if (zip.size() < kEndSize) throw bad(path, "too short for a zip archive");
  // The end record sits in the last 22 bytes plus up to 64 KiB of comment.
  const std::uint64_t tail = std::min<std::uint64_t>(zip.size(), kEndSize + 0xffff);
  const auto buf = zip.read(zip.size() - tail, tail);
  std::size_t at = std::string::npos;
  for (std::size_t i = buf.size() - kEndSize + 1; i-- > 0;) {
    if (le(&buf[i], 4) == kEndSig) {
      at = i;
      break;
    }
  }
  if (at == std::string::npos) throw bad(path, "no zip end-of-central-directory record");
  const std::uint8_t* end = &buf[at];
  std::uint64_t count = le(end + 10, 2);
  std::uint64_t cd_size = le(end + 12, 4);
  std::uint64_t cd_offset = le(end + 16, 4);
  const std::uint64_t end_pos = zip.size() - tail + at;
  if (count == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {
    if (end_pos < kZip64LocatorSize) throw bad(path, "zip64 locator missing");
    const auto loc = zip.read(end_pos - kZip64LocatorSize, kZip64LocatorSize);
    if (le(loc.data(), 4) != kZip64LocatorSig) throw bad(path, "zip64 locator missing");
    const auto rec = zip.read(le(loc.data() + 8, 8), kZip64EndSize);
    if (le(rec.data(), 4) != kZip64EndSig) throw bad(path, "zip64 end record missing");
    count = le(rec.data() + 32, 8);
    cd_size = le(rec.data() + 40, 8);
    cd_offset = le(rec.data() + 48, 8);
  }
  const auto cd = zip.read(cd_offset, cd_size);
  std::vector<Entry> entries;
  std::size_t i = 0;
  for (std::uint64_t n = 0; n < count; ++n) {
    if (i + kCentralSize > cd.size() || le(&cd[i], 4) != kCentralSig) throw bad(path, "damaged central directory");
    const std::uint8_t* h = &cd[i];
    Entry e;
    e.flags = static_cast<std::uint16_t>(le(h + 8, 2));
    e.method = static_cast<std::uint16_t>(le(h + 10, 2));
    e.crc = static_cast<std::uint32_t>(le(h + 16, 4));
    e.compressed = le(h + 20, 4);
    e.uncompressed = le(h + 24, 4);
    const std::size_t name_len = le(h + 28, 2), extra_len = le(h + 30, 2), comment_len = le(h + 32, 2);
    e.local_offset = le(h + 42, 4);
    if (i + kCentralSize + name_len + extra_len + comment_len > cd.size()) throw bad(path, "damaged central directory");
    e.name.assign(reinterpret_cast<const char*>(h + kCentralSize), name_len);
    apply_zip64(h + kCentralSize + name_len, extra_len, &e, e.uncompressed == 0xffffffff,
                e.compressed == 0xffffffff, e.local_offset == 0xffffffff);
    entries.push_back(e);
    i += kCentralSize + name_len + extra_len + comment_len;
  }
  return entries;
}

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc) {
  static const auto table = [] {
    std::array<std::uint32_t, 256> t{};
    for (std::uint32_t n = 0; n < 256; ++n) {
      std::uint32_t c = n;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[n] = c;
    }
    return t;
  }();
  const auto* p = static_cast<const std::uint8_t*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xff] ^ (crc >> 8);
  return ~crc;
}

std::vector<NamedArray> read_npz(const std::string& path) {
  ZipFile zip(path);
  std::vector<NamedArray> out;
  for (const auto& e : central_directory(zip, path)) {
    const std::string what = path + " entry '" + e.name + "'";
    if (e.flags & 1) throw Error(ExitCode::input, what + " is encrypted", "write the archive with numpy.savez");
    if (e.method == kDeflate) {
      throw Error(ExitCode::input, what + " is compressed (deflate); the runner reads stored entries only",
                  "write the archive with numpy.savez, not numpy.savez_compressed");
    }
    if (e.method != kStored) {
      throw Error(ExitCode::input, what + " uses zip method " + std::to_string(e.method),
                  "write the archive with numpy.savez");
    }
    if (e.name.size() < 5 || e.name.compare(e.name.size() - 4, 4, ".npy") != 0) {
      throw Error(ExitCode::input, what + " is not a .npy entry", "write the archive with numpy.savez");
    }
    const auto local = zip.read(e.local_offset, kLocalSize);
    if (le(local.data(), 4) != kLocalSig) throw bad(path, "entry '" + e.name + "' has no local header");
    const std::uint64_t start = e.local_offset + kLocalSize + le(local.data() + 26, 2) + le(local.data() + 28, 2);
    const auto bytes = zip.read(start, e.compressed);
    if (crc32(bytes.data(), bytes.size()) != e.crc) {
      throw Error(ExitCode::input, what + " fails its CRC-32 check (damaged or truncated)",
                  "copy the file again");
    }
    out.push_back({e.name.substr(0, e.name.size() - 4), parse_npy(bytes.data(), bytes.size(), what)});
  }
  return out;
}

void write_npz(const std::string& path, const std::vector<NamedArray>& arrays) {
  std::string body, directory;
  constexpr std::uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible files
  for (const auto& item : arrays) {
    const std::string name = item.name + ".npy";
    const std::string data = npy_bytes(item.array);
    if (body.size() + data.size() > 0xfffffff0ull || name.size() > 0xffff) {
      throw Error(ExitCode::output, path + " would exceed 4 GiB", "write separate .npy files instead");
    }
    const std::uint32_t crc = crc32(data.data(), data.size());
    const std::uint64_t offset = body.size();
    std::string header;
    put(header, kLocalSig, 4);
    put(header, 20, 2);  // version needed: 2.0
    put(header, 0, 2);   // flags
    put(header, kStored, 2);
    put(header, 0, 2);
    put(header, kDosDate, 2);
    put(header, crc, 4);
    put(header, data.size(), 4);
    put(header, data.size(), 4);
    put(header, name.size(), 2);
    put(header, 0, 2);
    body += header + name + data;

    put(directory, kCentralSig, 4);
    put(directory, 20, 2);
    put(directory, 20, 2);
    put(directory, 0, 2);
    put(directory, kStored, 2);
    put(directory, 0, 2);
    put(directory, kDosDate, 2);
    put(directory, crc, 4);
    put(directory, data.size(), 4);
    put(directory, data.size(), 4);
    put(directory, name.size(), 2);
    put(directory, 0, 2);  // extra
    put(directory, 0, 2);  // comment
    put(directory, 0, 2);  // disk
    put(directory, 0, 2);  // internal attributes
    put(directory, 0, 4);  // external attributes
    put(directory, offset, 4);
    directory += name;
  }
  if (arrays.size() > 0xfffe) throw Error(ExitCode::output, path + ": too many entries", "write fewer arrays");
  std::string end;
  put(end, kEndSig, 4);
  put(end, 0, 2);
  put(end, 0, 2);
  put(end, arrays.size(), 2);
  put(end, arrays.size(), 2);
  put(end, directory.size(), 4);
  put(end, body.size(), 4);
  put(end, 0, 2);
  write_file_atomic(path, body + directory + end);
}

}  // namespace edgekit
