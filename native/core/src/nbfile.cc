#include "edgekit/nbfile.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "edgekit/error.h"

namespace edgekit {
namespace {

constexpr std::size_t kHeaderSize = 2 + 16 + 8;

std::uint64_t le(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

std::string hex_prefix(const std::uint8_t* p, std::size_t n) {
  std::string out;
  char buf[4];
  for (std::size_t i = 0; i < n && i < 8; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", p[i]);
    if (i) out += ' ';
    out += buf;
  }
  return out;
}

// What a non-.nb file most likely is, so the message can say what to do instead.
std::string guess_kind(const std::uint8_t* p, std::size_t n) {
  if (n >= 4 && std::memcmp(p, "\x7f" "ELF", 4) == 0) return "an ELF binary";
  if (n >= 4 && std::memcmp(p, "PK\x03\x04", 4) == 0) return "a zip archive";
  if (n >= 6 && std::memcmp(p, "\x93NUMPY", 6) == 0) return "a .npy array";
  if (n >= 8 && std::memcmp(p, "\x89PNG", 4) == 0) return "a PNG image";
  if (n >= 1 && p[0] == '{') return "a JSON text";
  return "";
}

Error foreign(const std::string& path, const std::string& why, const std::uint8_t* p, std::size_t n) {
  std::string kind = guess_kind(p, n);
  return Error(ExitCode::model,
               path + " is not a Paddle-Lite naive_buffer model (" + why + (kind.empty() ? "" : ", looks like " + kind) +
                   "; starts with " + hex_prefix(p, n) + ")",
               "pass the model.nb that paddle_lite_opt / edgekit build wrote");
}

Error truncated(const std::string& path, const std::string& why) {
  return Error(ExitCode::model, path + " is truncated: " + why, "copy the .nb again (compare its size and sha256)");
}

class Reader {
 public:
  Reader(std::ifstream& in, std::uint64_t size, const std::string& path) : in_(in), size_(size), path_(path) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t get(int bytes, const char* what) {
    std::uint8_t buf[8] = {};
    need(static_cast<std::uint64_t>(bytes), what);
    in_.seekg(static_cast<std::streamoff>(pos_));
    in_.read(reinterpret_cast<char*>(buf), bytes);
    pos_ += static_cast<std::uint64_t>(bytes);
    return le(buf, bytes);
  }
  void skip(std::uint64_t bytes, const char* what) {
    need(bytes, what);
    pos_ += bytes;
  }

 private:
  void need(std::uint64_t bytes, const char* what) {
    if (bytes > size_ - pos_) {
      throw truncated(path_, std::string(what) + " needs bytes up to " + std::to_string(pos_ + bytes) + " but the file has " +
                                 std::to_string(size_));
    }
  }
  std::ifstream& in_;
  std::uint64_t size_;
  const std::string& path_;
  std::uint64_t pos_ = 0;
};

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

}  // namespace

NbHeader read_nb_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(ExitCode::model, "cannot read the model " + path, "check the path");
  in.seekg(0, std::ios::end);
  const auto size = static_cast<std::uint64_t>(in.tellg());
  in.seekg(0);
  std::uint8_t head[kHeaderSize] = {};
  in.read(reinterpret_cast<char*>(head), kHeaderSize);
  const auto got = static_cast<std::size_t>(in.gcount());
  if (got == 0) throw truncated(path, "the file is empty");

  NbHeader h;
  h.file_bytes = size;
  if (got >= 2) h.format_version = static_cast<unsigned>(le(head, 2));
  if (got < 2 || (h.format_version != 1 && h.format_version != 2)) {
    throw foreign(path, "format version " + std::to_string(h.format_version) + ", not 1 or 2", head, got);
  }
  if (got < kHeaderSize) throw truncated(path, "only " + std::to_string(got) + " of the 26 header bytes are present");
  const char* field = reinterpret_cast<const char*>(head + 2);
  const void* nul = std::memchr(field, 0, 16);
  const std::size_t len = nul ? static_cast<std::size_t>(static_cast<const char*>(nul) - field) : 16;
  h.opt_version.assign(field, len);
  bool printable = !h.opt_version.empty() && nul != nullptr;
  for (char c : h.opt_version) printable = printable && c > 0x20 && c < 0x7f;
  if (!printable) throw foreign(path, "no readable opt version in the header", head, got);
  h.program_bytes = le(head + 18, 8);
  if (h.program_bytes == 0) throw foreign(path, "the header declares an empty program", head, got);
  if (h.program_bytes > size - kHeaderSize) {
    throw truncated(path, "the header declares a " + std::to_string(h.program_bytes) + "-byte program but only " +
                              std::to_string(size - kHeaderSize) + " bytes follow it");
  }
  h.params_bytes = size - kHeaderSize - h.program_bytes;
  if (h.format_version == 2) {
    Reader r(in, size, path);
    r.skip(kHeaderSize + h.program_bytes, "the program");
    if (r.get(2, "the parameter section's version") != 0) {
      throw foreign(path, "the parameter section does not start with version 0", head, got);
    }
    r.skip(r.get(2, "the parameter meta size"), "the parameter meta data");
    const auto header_size = r.get(2, "the parameter header size");
    if (header_size < 6) throw foreign(path, "parameter header of " + std::to_string(header_size) + " bytes", head, got);
    const auto header_start = r.pos();
    const auto count = r.get(2, "the parameter count");
    r.skip(header_size - (r.pos() - header_start), "the parameter header");
    for (std::uint64_t i = 0; i < count; ++i) {
      const auto bytes = r.get(4, "a parameter's size");
      r.skip(bytes, ("parameter " + std::to_string(i + 1) + " of " + std::to_string(count)).c_str());
    }
    h.param_count = static_cast<std::int64_t>(count);
  } else if (h.params_bytes == 0) {
    throw truncated(path, "no parameters follow the program");
  }
  return h;
}

std::string empty_nb_model(const std::string& opt_version) {
  // A flatbuffers ProgramDesc {blocks: [BlockDesc {vars: [], ops: []}], version: {0}},
  // laid out by hand (offsets are relative to where they are stored; a table
  // starts with the signed distance back to its vtable). Lite verifies the
  // buffer, so every offset and alignment below matters.
  std::string p;
  put(p, 12, 4);                                        //  0: root -> ProgramDesc table at 12
  put(p, 8, 2), put(p, 12, 2), put(p, 4, 2), put(p, 8, 2);  //  4: vtable: 2 fields (blocks @4, version @8)
  put(p, 8, 4);                                         // 12: ProgramDesc table, vtable at 12 - 8
  put(p, 24 - 16, 4);                                   // 16: blocks -> vector at 24
  put(p, 68 - 20, 4);                                   // 20: version -> Version table at 68
  put(p, 1, 4);                                         // 24: one block
  put(p, 44 - 28, 4);                                   // 28: -> BlockDesc table at 44
  put(p, 12, 2), put(p, 12, 2), put(p, 0, 2), put(p, 0, 2), put(p, 4, 2), put(p, 8, 2);  // 32: vtable: vars @4, ops @8
  put(p, 44 - 32, 4);                                   // 44: BlockDesc table
  put(p, 56 - 48, 4);                                   // 48: vars -> empty vector at 56
  put(p, 56 - 52, 4);                                   // 52: ops  -> the same empty vector
  put(p, 0, 4);                                         // 56: empty vector
  put(p, 6, 2), put(p, 12, 2), put(p, 4, 2), put(p, 0, 2);  // 60: vtable: version:long @4 (+2 padding)
  put(p, 68 - 60, 4);                                   // 68: Version table (its long lands 8-aligned at 72)
  put(p, 0, 8);                                         // 72: version = 0

  std::string field = opt_version.substr(0, 15);
  field.resize(16, '\0');
  std::string out;
  put(out, 2, 2);
  out += field;
  put(out, p.size(), 8);
  out += p;
  // format-2 parameters: version 0, 4 bytes of meta, a 6-byte header saying 0 params.
  put(out, 0, 2), put(out, 4, 2), put(out, 0, 4);
  put(out, 6, 2), put(out, 0, 2), put(out, 4, 4);
  return out;
}

}  // namespace edgekit
