#include "edgekit/npy.h"

#include <cctype>
#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>
#include <utility>

#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/limits.h"

namespace edgekit {
namespace {

const char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicSize = 6;

Error bad(const std::string& what, const std::string& why) {
  return Error(ExitCode::input, what + " is not a usable .npy array: " + why,
               "save it with numpy.save (C order, little-endian)");
}

// A cursor over the header dict numpy writes: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
class DictReader {
 public:
  DictReader(const std::string& text, const std::string& what) : s_(text), what_(what) {}

  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    skip_space();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) throw bad(what_, std::string("header dict: expected '") + c + "' at offset " + std::to_string(i_));
  }
  std::string quoted() {
    skip_space();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) throw bad(what_, "header dict: expected a string");
    char q = s_[i_++];
    std::size_t end = s_.find(q, i_);
    if (end == std::string::npos) throw bad(what_, "header dict: unterminated string");
    std::string out = s_.substr(i_, end - i_);
    i_ = end + 1;
    return out;
  }
  std::string word() {
    skip_space();
    std::size_t start = i_;
    while (i_ < s_.size() && std::isalpha(static_cast<unsigned char>(s_[i_]))) ++i_;
    return s_.substr(start, i_ - start);
  }
  Shape tuple() {
    Shape shape;
    expect('(');
    while (!eat(')')) {
      skip_space();
      std::size_t start = i_;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) ++i_;
      if (start == i_) throw bad(what_, "header dict: shape holds a non-integer");
      if (i_ - start > 18) throw bad(what_, "header dict: dimension too large");
      shape.push_back(std::stoll(s_.substr(start, i_ - start)));
      if (!eat(',')) {
        expect(')');
        break;
      }
    }
    return shape;
  }

 private:
  const std::string& s_;
  const std::string& what_;
  std::size_t i_ = 0;
};

}  // namespace

std::int64_t element_count(const Shape& shape) {
  // Readers check shapes against limits.h first; this only refuses to wrap around
  // (an empty array may have huge other dimensions).
  for (auto d : shape) {
    if (d == 0) return 0;
  }
  std::uint64_t total = 1;
  for (auto d : shape) {
    if (d < 0 || !limits::multiply(total, static_cast<std::uint64_t>(d), &total) ||
        total > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      throw Error(ExitCode::input, "shape " + shape_text(shape) + " has no element count in 64 bits",
                  "give a shape of non-negative dimensions that fits memory");
    }
  }
  return static_cast<std::int64_t>(total);
}

std::int64_t Array::count() const { return element_count(shape); }

std::string shape_text(const Shape& shape) {
  if (shape.empty()) return "scalar";
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += "x";
    out += std::to_string(shape[i]);
  }
  return out;
}

Array parse_npy(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
  if (size < kMagicSize + 4 || std::memcmp(bytes, kMagic, kMagicSize) != 0) {
    throw bad(what, "no NUMPY magic at the start");
  }
  const unsigned major = bytes[6];
  std::size_t header_len = 0;
  std::size_t offset = 0;
  if (major == 1) {
    header_len = bytes[8] | (static_cast<std::size_t>(bytes[9]) << 8);
    offset = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) throw bad(what, "truncated header");
    header_len = static_cast<std::size_t>(bytes[8]) | (static_cast<std::size_t>(bytes[9]) << 8) |
                 (static_cast<std::size_t>(bytes[10]) << 16) | (static_cast<std::size_t>(bytes[11]) << 24);
    offset = 12;
  } else {
    throw bad(what, "unknown format version " + std::to_string(major));
  }
  if (header_len > size - offset) throw bad(what, "truncated header");
  const std::string header(reinterpret_cast<const char*>(bytes + offset), header_len);
  offset += header_len;

  DictReader dict(header, what);
  std::string descr;
  bool fortran = false;
  bool have_descr = false, have_shape = false;
  Shape shape;
  dict.expect('{');
  while (!dict.eat('}')) {
    const std::string key = dict.quoted();
    dict.expect(':');
    if (key == "descr") {
      descr = dict.quoted();
      have_descr = true;
    } else if (key == "fortran_order") {
      const std::string value = dict.word();
      if (value != "True" && value != "False") throw bad(what, "fortran_order is neither True nor False");
      fortran = value == "True";
    } else if (key == "shape") {
      shape = dict.tuple();
      have_shape = true;
    } else {
      throw bad(what, "unexpected header key '" + key + "'");
    }
    if (!dict.eat(',')) {
      dict.expect('}');
      break;
    }
  }
  if (!have_descr || !have_shape) throw bad(what, "header lacks descr or shape");
  bool big_endian = false;
  auto dtype = dtype_from_descr(descr, &big_endian);
  if (big_endian) {
    throw Error(ExitCode::input, what + " holds big-endian data (" + descr + ")",
                "save it little-endian: numpy.save(f, a.astype(a.dtype.newbyteorder('<')))");
  }
  if (!dtype) {
    throw Error(ExitCode::input, what + " has dtype " + descr + ", which the runner does not read",
                "use one of " + dtype_names());
  }
  // Fortran order is the same bytes as C order when at most one axis is longer than 1.
  int long_axes = 0;
  for (auto d : shape) long_axes += d > 1;
  if (fortran && long_axes > 1) {
    throw Error(ExitCode::input, what + " is stored in Fortran order", "save numpy.ascontiguousarray(a) instead");
  }
  // Every multiplication checked before the byte count is trusted: a crafted shape
  // must not wrap the product around to a size the file happens to hold.
  const std::uint64_t want = limits::check_tensor(ExitCode::input, what + " (shape " + shape_text(shape) + ")",
                                                  shape.data(), shape.size(), dtype_size(*dtype));
  Array array;
  array.dtype = *dtype;
  array.shape = shape;
  if (want > size - offset) {
    throw bad(what, "truncated data: header promises " + std::to_string(want) + " bytes, " +
                        std::to_string(size - offset) + " present");
  }
  if (want < size - offset) {
    throw bad(what, std::to_string(size - offset - want) + " unexpected bytes after the data");
  }
  array.data.assign(bytes + offset, bytes + offset + want);
  return array;
}

Array read_npy(const std::string& path) {
  const auto bytes = read_file_bytes(path, ExitCode::input);
  return parse_npy(bytes.data(), bytes.size(), path);
}

std::string npy_header(DType dtype, const Shape& shape) {
  std::string dims = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    dims += std::to_string(shape[i]);
    dims += (shape.size() == 1 || i + 1 < shape.size()) ? "," : "";
    if (i + 1 < shape.size()) dims += " ";
  }
  dims += ")";
  std::string dict = std::string("{'descr': '") + dtype_info(dtype).descr +
                     "', 'fortran_order': False, 'shape': " + dims + ", }";
  // Byte-for-byte what numpy.save writes: room for the first dimension to grow to
  // 21 digits, then spaces and '\n' up to a multiple of 64 (a full 64 when already
  // aligned).
  if (!shape.empty()) dict.append(21 - std::min<std::size_t>(21, std::to_string(shape[0]).size()), ' ');
  const std::size_t hlen = dict.size() + 1;
  bool v2 = false;
  std::size_t prefix = kMagicSize + 2 + 2;
  std::size_t pad = 64 - (prefix + hlen) % 64;
  if (hlen + pad > 0xffff) {
    v2 = true;
    prefix = kMagicSize + 2 + 4;
    pad = 64 - (prefix + hlen) % 64;
  }
  const std::size_t header_len = hlen + pad;
  dict.append(pad, ' ');
  dict += '\n';
  std::string out(kMagic, kMagicSize);
  out += static_cast<char>(v2 ? 2 : 1);
  out += static_cast<char>(0);
  out += static_cast<char>(header_len & 0xff);
  out += static_cast<char>((header_len >> 8) & 0xff);
  if (v2) {
    out += static_cast<char>((header_len >> 16) & 0xff);
    out += static_cast<char>((header_len >> 24) & 0xff);
  }
  return out + dict;
}

std::string npy_bytes(const Array& array) {
  std::string out = npy_header(array.dtype, array.shape);
  out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  return out;
}

void write_npy(const std::string& path, const Array& array) {
  NpyStreamWriter writer(path, array.dtype, array.shape);
  writer.append(array.data.data(), array.data.size());
  writer.close();
}

NpyStreamWriter::NpyStreamWriter(const std::string& path, DType dtype, const Shape& shape) : path_(path) {
  if (!limits::multiply(static_cast<std::uint64_t>(element_count(shape)), dtype_size(dtype), &expected_)) {
    throw Error(ExitCode::internal, path + ": shape " + shape_text(shape) + " has no byte count in 64 bits");
  }
  file_ = std::fopen(path.c_str(), "wb");
  if (!file_) {
    throw Error(ExitCode::output, "cannot create " + path + ": " + std::strerror(errno),
                "check that the output folder exists and is writable");
  }
  const std::string header = npy_header(dtype, shape);
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size()) {
    std::fclose(file_);
    file_ = nullptr;
    throw Error(ExitCode::output, "cannot write " + path, "check free space on the output folder");
  }
}

NpyStreamWriter::NpyStreamWriter(NpyStreamWriter&& other) noexcept { *this = std::move(other); }

NpyStreamWriter& NpyStreamWriter::operator=(NpyStreamWriter&& other) noexcept {
  if (this != &other) {
    if (file_) std::fclose(file_);
    file_ = std::exchange(other.file_, nullptr);
    path_ = std::move(other.path_);
    expected_ = other.expected_;
    written_ = other.written_;
  }
  return *this;
}

NpyStreamWriter::~NpyStreamWriter() {
  if (file_) std::fclose(file_);
}

void NpyStreamWriter::append(const void* data, std::size_t bytes) {
  if (!file_) throw Error(ExitCode::internal, "write to a closed .npy stream " + path_);
  if (written_ + bytes > expected_) {
    throw Error(ExitCode::internal, path_ + ": more data than its header declares");
  }
  if (bytes && std::fwrite(data, 1, bytes, file_) != bytes) {
    throw Error(ExitCode::output, "cannot write " + path_ + ": " + std::strerror(errno),
                "check free space on the output folder");
  }
  written_ += bytes;
}

void NpyStreamWriter::close() {
  if (!file_) return;
  const bool flushed = std::fflush(file_) == 0;
  const bool closed = std::fclose(file_) == 0;
  file_ = nullptr;
  if (!flushed || !closed) {
    throw Error(ExitCode::output, "cannot finish " + path_, "check free space on the output folder");
  }
  if (written_ != expected_) {
    throw Error(ExitCode::internal, path_ + ": wrote " + std::to_string(written_) + " of " +
                                        std::to_string(expected_) + " bytes");
  }
}

}  // namespace edgekit
