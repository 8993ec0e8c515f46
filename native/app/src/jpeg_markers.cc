// Mirrors stb_image 2.27's marker handling (stbi__decode_jpeg_header,
// stbi__decode_jpeg_image, stbi__process_marker) closely enough that every DHT
// segment stb would parse is parsed here first. Reads past the end give 0, as
// stbi__get8 does.
#include "jpeg_markers.h"

namespace edgekit {
namespace {

constexpr int kNone = 0xff;  // stb's STBI__MARKER_none
constexpr int kSoi = 0xd8, kEoi = 0xd9, kSos = 0xda, kDqt = 0xdb, kDnl = 0xdc, kDri = 0xdd, kDht = 0xc4;

bool is_sof(int m) { return m == 0xc0 || m == 0xc1 || m == 0xc2; }
bool is_restart(int m) { return m >= 0xd0 && m <= 0xd7; }

class Walker {
 public:
  Walker(const std::uint8_t* bytes, std::size_t size) : p_(bytes), n_(size) {}

  std::string run() {
    if (marker() != kSoi) return "no SOI marker";
    // The frame header phase: stb skips junk between segments here.
    int m = marker();
    while (!is_sof(m)) {
      if (std::string problem = segment(m); !problem.empty()) return problem;
      m = marker();
      while (m == kNone) {
        if (eof()) return "no frame header (SOF)";
        m = marker();
      }
    }
    skip_length_segment();
    // The image phase: scans, tables between them (progressive files), EOI.
    m = marker();
    while (m != kEoi) {
      if (m == kSos) {
        skip_length_segment();
        if (!entropy_coded_data()) return "truncated scan data";
      } else if (m == kDnl) {
        if (get16() != 4) return "bad DNL segment";
        get16();
      } else if (std::string problem = segment(m); !problem.empty()) {
        return problem;
      }
      m = marker();
    }
    return "";
  }

 private:
  bool eof() const { return i_ >= n_; }
  int get8() { return i_ < n_ ? p_[i_++] : 0; }
  int get16() {
    const int high = get8();
    return (high << 8) | get8();
  }
  void skip(std::size_t count) { i_ = count > n_ - i_ ? n_ : i_ + count; }

  // stbi__get_marker: a cached marker from the scan data, else 0xff, fill bytes, the code.
  int marker() {
    if (cached_ != kNone) {
      const int m = cached_;
      cached_ = kNone;
      return m;
    }
    int x = get8();
    if (x != 0xff) return kNone;
    while (x == 0xff && !eof()) x = get8();
    return x == 0xff ? 0 : x;
  }

  void skip_length_segment() {
    const int length = get16();
    skip(length >= 2 ? static_cast<std::size_t>(length - 2) : 0);
  }

  // stbi__process_marker: "" when stb would accept the segment.
  std::string segment(int m) {
    if (m == kDht) return huffman_tables();
    if (m == kDqt) {
      int left = get16() - 2;
      while (left > 0) {
        const int q = get8(), precision = q >> 4;
        if ((precision != 0 && precision != 1) || (q & 15) > 3) return "bad DQT segment";
        skip(precision ? 128 : 64);
        left -= precision ? 129 : 65;
      }
      return left == 0 ? "" : "bad DQT length";
    }
    if (m == kDri) {
      if (get16() != 4) return "bad DRI length";
      get16();
      return "";
    }
    if ((m >= 0xe0 && m <= 0xef) || m == 0xfe) {
      const int length = get16();
      if (length < 2) return "bad APP/COM length";
      skip(static_cast<std::size_t>(length - 2));
      return "";
    }
    return m == kNone ? "a marker expected" : "unknown marker";
  }

  // The check stb 2.27 lacks: at most 256 codes per table (its arrays hold 256 symbols).
  std::string huffman_tables() {
    int left = get16() - 2;
    while (left > 0) {
      const int q = get8();
      if ((q >> 4) > 1 || (q & 15) > 3) return "bad DHT header";
      int codes = 0;
      for (int k = 0; k < 16; ++k) codes += get8();
      if (codes > 256) return "a Huffman table with " + std::to_string(codes) + " codes (at most 256)";
      skip(static_cast<std::size_t>(codes));
      left -= 17 + codes;
    }
    return left == 0 ? "" : "bad DHT length";
  }

  // Up to the first marker that ends a scan (0xff, fills, neither 0 nor RSTn), as
  // stb's entropy decoder meets it; false when the data ends first.
  bool entropy_coded_data() {
    while (!eof()) {
      if (get8() != 0xff) continue;
      int c = get8();
      while (c == 0xff && !eof()) c = get8();
      if (c == 0 || is_restart(c) || c == 0xff) continue;
      cached_ = c;
      return true;
    }
    return false;
  }

  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t i_ = 0;
  int cached_ = kNone;
};

}  // namespace

bool looks_like_jpeg(const std::uint8_t* bytes, std::size_t size) {
  std::size_t i = 0;
  if (size == 0 || bytes[0] != 0xff) return false;
  while (i < size && bytes[i] == 0xff) ++i;
  return i < size && bytes[i] == kSoi;
}

std::string jpeg_marker_problem(const std::uint8_t* bytes, std::size_t size) { return Walker(bytes, size).run(); }

}  // namespace edgekit
