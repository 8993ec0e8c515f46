// Decoding with stb_image (header-only, from the system: Debian's libstb-dev, 2.27).
// stb is kept behind three guards, since the images may come from anyone:
//  - the dimensions are read from the header (stbi_info_from_memory) and checked
//    against MAX_IMAGE_PIXELS before anything is decoded (stb itself would allocate
//    2.9 GB for a 70-byte BMP);
//  - JPEG markers are walked first (jpeg_markers.h) for the DHT overflow of 2.27;
//  - stb's buffers come zeroed (calloc), so damaged progressive JPEGs that leave
//    coefficients unwritten decode to the same pixels every time instead of to
//    uninitialised memory.
#include <algorithm>
#include <cstdlib>
#include <memory>

#include "edgekit/decode.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/limits.h"
#include "jpeg_markers.h"

#define STBI_MAX_DIMENSIONS (1 << 16)
static_assert(STBI_MAX_DIMENSIONS == edgekit::limits::kMaxImageSide, "stb's side limit is limits.h's MAX_IMAGE_SIDE");
#define STBI_MALLOC(size) std::calloc(1, size)
#define STBI_REALLOC(pointer, size) std::realloc(pointer, size)
#define STBI_FREE(pointer) std::free(pointer)
#define STB_IMAGE_IMPLEMENTATION
#define STB_IMAGE_STATIC
#define STBI_NO_STDIO
#define STBI_ONLY_PNG
#define STBI_ONLY_JPEG
#define STBI_ONLY_BMP
#define STBI_ONLY_PNM
#define STBI_FAILURE_USERMSG
#include <stb_image.h>

namespace edgekit {
namespace {

// stb 2.27 reads a PNM header's numbers into an int without an overflow check (UB,
// found by fuzz_image). Its walk is mirrored here: whitespace and '#' comments,
// then width, height and maximum; a number of more than 7 digits is refused (no
// valid side or maximum has that many).
bool pnm_numbers_overflow(const std::uint8_t* bytes, std::size_t size) {
  if (size < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '6')) return false;
  std::size_t i = 2;
  const auto space = [](std::uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); };
  for (int number = 0; number < 3; ++number) {
    while (i < size && (space(bytes[i]) || bytes[i] == '#')) {
      if (bytes[i] == '#') {
        while (i < size && bytes[i] != '\n' && bytes[i] != '\r') ++i;
      } else {
        ++i;
      }
    }
    std::size_t digits = 0;
    while (i < size && bytes[i] >= '0' && bytes[i] <= '9') ++i, ++digits;
    if (digits > 7) return true;
  }
  return false;
}

}  // namespace

bool image_decoder_available() { return true; }
const char* image_decoder_name() { return "stb_image"; }

Image decode_image(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
  if (bytes == nullptr || size == 0 || size > 0x7fffffff) {
    throw Error(ExitCode::input, "cannot decode " + what + ": no data", "pass a PNG, JPEG or BMP file");
  }
  const int length = static_cast<int>(size);
  if (looks_like_jpeg(bytes, size)) {
    if (const std::string problem = jpeg_marker_problem(bytes, size); !problem.empty()) {
      throw Error(ExitCode::input, "cannot decode image " + what + " (damaged JPEG: " + problem + ")",
                  "remove or replace the file (PNG, JPEG or BMP)");
    }
  }
  if (pnm_numbers_overflow(bytes, size)) {
    throw Error(ExitCode::input, "cannot decode image " + what + " (damaged PNM header: a number beyond any image size)",
                "remove or replace the file (PNG, JPEG or BMP)");
  }
  int width = 0, height = 0, channels = 0;
  if (!stbi_info_from_memory(bytes, length, &width, &height, &channels)) {
    throw Error(ExitCode::input, "cannot decode image " + what + " (" + stbi_failure_reason() + ")",
                "remove or replace the file (PNG, JPEG or BMP)");
  }
  // stb's info reports a top-down BMP's height as negative (its loader flips and uses
  // the magnitude, as cv2 and edgekit.core.images.image_size do), so the limits see magnitudes.
  const auto magnitude = [](int side) { return static_cast<std::uint64_t>(side < 0 ? -static_cast<std::int64_t>(side) : side); };
  const std::uint64_t columns = magnitude(width), rows = magnitude(height);
  const std::string dims = std::to_string(columns) + "x" + std::to_string(rows);
  const std::uint64_t area = columns * rows;
  limits::check(ExitCode::input, "image " + what + "'s larger side", std::max(columns, rows), "MAX_IMAGE_SIDE",
                static_cast<std::uint64_t>(limits::kMaxImageSide));
  limits::check(ExitCode::input, "image " + what + " (" + dims + ") in pixels", area, "MAX_IMAGE_PIXELS",
                limits::kMaxImagePixels);
  // stb pads missing data with zeros, so a few hundred bytes could claim 64 Mpx and
  // take seconds to "decode" (found by fuzz_image): limits.h's pixels-per-byte bounds,
  // in the exact integer form edgekit/core/limits.py's check_image uses.
  const bool jpeg = looks_like_jpeg(bytes, size), bmp = size >= 2 && bytes[0] == 'B' && bytes[1] == 'M';
  if (jpeg || bmp) {
    const std::uint64_t ratio = jpeg ? limits::kMaxJpegPixelsPerByte : limits::kMaxBmpPixelsPerByte;
    if (area > ratio * static_cast<std::uint64_t>(size)) {
      throw Error(ExitCode::input,
                  "cannot decode image " + what + " (" + dims + " pixels in " + std::to_string(size) +
                      " bytes, beyond the limit " + (jpeg ? "MAX_JPEG_PIXELS_PER_BYTE" : "MAX_BMP_PIXELS_PER_BYTE") +
                      " = " + std::to_string(ratio) + ": truncated or crafted)",
                  "remove or replace the file (PNG, JPEG or BMP)");
    }
  }
  if (stbi_is_16_bit_from_memory(bytes, length)) {
    throw Error(ExitCode::input, "image " + what + " is 16-bit, not 8-bit", "convert the images to 8-bit");
  }
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load_from_memory(bytes, length, &width, &height, &channels, 0),
                                                   stbi_image_free);
  if (!pixels) {
    throw Error(ExitCode::input, "cannot decode image " + what + " (" + stbi_failure_reason() + ")",
                "remove or replace the file (PNG, JPEG or BMP)");
  }
  // stb keeps gray+alpha as 2 channels; cv2 makes it BGRA and Python drops the alpha:
  // gray repeated into three channels, which every preprocessing treats as that gray.
  if (channels < 1 || channels > 4 || static_cast<std::uint64_t>(width) * static_cast<std::uint64_t>(height) >
                                           limits::kMaxImagePixels) {
    throw Error(ExitCode::input, "cannot decode image " + what + " (its header and its data disagree)",
                "remove or replace the file (PNG, JPEG or BMP)");
  }
  const PixelOrder order = channels == 1 ? PixelOrder::gray : channels == 3 ? PixelOrder::rgb : PixelOrder::rgba;
  Image out(height, width, channels == 2 ? PixelOrder::gray : order);
  const std::size_t count = static_cast<std::size_t>(width) * static_cast<std::size_t>(height);
  if (channels == 2) {
    for (std::size_t i = 0; i < count; ++i) out.data[i] = pixels.get()[2 * i];
  } else {
    std::copy(pixels.get(), pixels.get() + count * static_cast<std::size_t>(channels), out.data.begin());
  }
  return out;
}

Image decode_image_file(const std::string& path) {
  const std::vector<std::uint8_t> bytes = read_file_bytes(path, ExitCode::input);
  return decode_image(bytes.data(), bytes.size(), path);
}

}  // namespace edgekit
