// The image decoder on crafted files (issue 22): headers promising gigapixels are
// refused from the header, before stb_image allocates; the DHT that overflows
// stb_image 2.27 is refused before stb parses it. The files are built here, byte by
// byte, so each test says what it holds.
#include <string>

#include "edgekit/decode.h"
#include "edgekit/npz.h"
#include "harness.h"

using namespace edgekit;

namespace {

void put16be(std::string& s, unsigned v) {
  s += static_cast<char>((v >> 8) & 0xff);
  s += static_cast<char>(v & 0xff);
}
void put32be(std::string& s, std::uint32_t v) {
  put16be(s, v >> 16);
  put16be(s, v & 0xffff);
}
void put_le(std::string& s, std::uint32_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
}

// A 24-bit BMP header for width x height with `data` pixel bytes after it.
std::string bmp(std::uint32_t width, std::uint32_t height, const std::string& data) {
  std::string s = "BM";
  put_le(s, static_cast<std::uint32_t>(54 + data.size()), 4);
  put_le(s, 0, 4);
  put_le(s, 54, 4);
  put_le(s, 40, 4);
  put_le(s, width, 4);
  put_le(s, height, 4);
  put_le(s, 1, 2);
  put_le(s, 24, 2);
  for (int i = 0; i < 6; ++i) put_le(s, 0, 4);
  return s + data;
}

void png_chunk(std::string& s, const char* type, const std::string& body) {
  put32be(s, static_cast<std::uint32_t>(body.size()));
  const std::string typed = std::string(type, 4) + body;
  s += typed;
  put32be(s, crc32(typed.data(), typed.size()));
}

// An RGB PNG header for width x height and one tiny IDAT (a stored, empty zlib stream).
std::string png(std::uint32_t width, std::uint32_t height) {
  std::string s("\x89PNG\r\n\x1a\n", 8), ihdr;
  put32be(ihdr, width);
  put32be(ihdr, height);
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  png_chunk(s, "IHDR", ihdr);
  png_chunk(s, "IDAT", std::string("\x78\x01\x01\x00\x00\xff\xff\x00\x00\x00\x01", 11));
  png_chunk(s, "IEND", "");
  return s;
}

// SOI, a baseline frame header of width x height with three components, EOI.
std::string jpeg_frame(unsigned width, unsigned height) {
  std::string s("\xff\xd8\xff\xc0", 4);
  put16be(s, 17);
  s += '\x08';
  put16be(s, height);
  put16be(s, width);
  s += '\x03';
  for (char id : {'\x01', '\x02', '\x03'}) s += std::string{id, '\x11', '\x00'};
  return s + std::string("\xff\xd9", 2);
}

// SOI, then a DHT whose 16 code counts are all 255: 4080 codes for a 256-entry table.
std::string jpeg_dht_overflow() {
  std::string s("\xff\xd8\xff\xc4", 4);
  put16be(s, 2 + 17 + 16 * 255);
  s += '\x00';
  s += std::string(16, '\xff');
  s += std::string(16 * 255, '\x01');
  return s + std::string("\xff\xd9", 2);
}

Image decode(const std::string& bytes, const std::string& what) {
  return decode_image(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), what);
}

}  // namespace

EK_TEST(decode, small_images_still_decode) {
  if (!image_decoder_available()) return;
  // 2x2, rows bottom-up and padded to 4 bytes
  const std::string rows = std::string("\x01\x02\x03\x04\x05\x06\x00\x00\x07\x08\x09\x0a\x0b\x0c\x00\x00", 16);
  const Image image = decode(bmp(2, 2, rows), "small.bmp");
  EK_CHECK_EQ(image.height, 2);
  EK_CHECK_EQ(image.width, 2);
  EK_CHECK_EQ(static_cast<int>(image.data[0]), 9);  // top-left pixel, RGB from BMP's BGR
  // a negative height means top-down rows: stb's info reports it negative, the limits use its magnitude
  const Image top_down = decode(bmp(2, static_cast<std::uint32_t>(-2), rows), "top_down.bmp");
  EK_CHECK_EQ(top_down.height, 2);
  EK_CHECK_EQ(static_cast<int>(top_down.data[0]), 3);
  EK_CHECK_ERROR(decode(bmp(1, static_cast<std::uint32_t>(-70000), std::string(16, '\0')), "tall.bmp"), input,
                 "tall.bmp's larger side is 70,000, beyond the limit MAX_IMAGE_SIDE");
}

// Issue 22: a 70-byte BMP made stb_image allocate 2.9 GB.
EK_TEST(decode, a_huge_header_is_refused_before_decoding) {
  if (!image_decoder_available()) return;
  const std::string tiny_bmp = bmp(30000, 30000, std::string(16, '\0'));
  EK_CHECK_EQ(tiny_bmp.size(), std::size_t{70});
  EK_CHECK_ERROR(decode(tiny_bmp, "huge.bmp"), input, "image huge.bmp (30000x30000) in pixels is 900,000,000, beyond the limit MAX_IMAGE_PIXELS");
  // (stb refuses more than 2^30 bytes itself; 10000x10000 RGB is below that and above ours)
  EK_CHECK_ERROR(decode(png(10000, 10000), "huge.png"), input, "beyond the limit MAX_IMAGE_PIXELS");
  EK_CHECK_ERROR(decode(jpeg_frame(60000, 60000), "huge.jpg"), input, "beyond the limit MAX_IMAGE_PIXELS");
  // either side beyond MAX_IMAGE_SIDE, named as edgekit/core/limits.py names it (stb's info does not check BMP sides)
  EK_CHECK_ERROR(decode(bmp(70000, 1, std::string(16, '\0')), "wide.bmp"), input,
                 "image wide.bmp's larger side is 70,000, beyond the limit MAX_IMAGE_SIDE = 65,536");
}

// Found by fuzz_image: stb pads missing data with zeros, so 740 bytes "decoded" to 64 Mpx in seconds.
EK_TEST(decode, a_file_too_small_for_its_pixels_is_refused) {
  if (!image_decoder_available()) return;
  const std::string jpeg = jpeg_frame(8000, 8000), bomb = bmp(4000, 4000, std::string(16, '\0'));
  EK_CHECK_ERROR(decode(jpeg, "bomb.jpg"), input,
                 "8000x8000 pixels in " + std::to_string(jpeg.size()) + " bytes, beyond the limit MAX_JPEG_PIXELS_PER_BYTE = 512");
  EK_CHECK_ERROR(decode(bomb, "bomb.bmp"), input, "4000x4000 pixels in 70 bytes, beyond the limit MAX_BMP_PIXELS_PER_BYTE = 8");
}

// Found by fuzz_image: stb 2.27 overflows an int reading a PNM header's numbers.
EK_TEST(decode, pnm_numbers_beyond_any_size_are_refused) {
  if (!image_decoder_available()) return;
  EK_CHECK_ERROR(decode("P5 9666666666 1 255\n" + std::string(16, '\0'), "big.pgm"), input, "damaged PNM header");
  EK_CHECK_ERROR(decode("P6\n# 12345678901\n2 2 2147483648\n", "max.ppm"), input, "damaged PNM header");
  EK_CHECK_EQ(decode("P5\n# a comment 12345678901\n2 1\n255\n\x01\x02", "ok.pgm").width, 2);
}

// Issue 22: 4080 Huffman codes overflowed stbi__build_huffman's 257-entry arrays.
EK_TEST(decode, an_oversized_huffman_table_is_refused) {
  if (!image_decoder_available()) return;
  EK_CHECK_ERROR(decode(jpeg_dht_overflow(), "dht.jpg"), input, "a Huffman table with 4080 codes (at most 256)");
}
