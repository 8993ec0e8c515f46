// Decoding with stb_image (header-only, from the system: Debian's libstb-dev).
#include <algorithm>
#include <memory>

#include "edgekit/decode.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"

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

bool image_decoder_available() { return true; }
const char* image_decoder_name() { return "stb_image"; }

Image decode_image(const std::uint8_t* bytes, std::size_t size, const std::string& what) {
  if (bytes == nullptr || size == 0 || size > 0x7fffffff) {
    throw Error(ExitCode::input, "cannot decode " + what + ": no data", "pass a PNG, JPEG or BMP file");
  }
  const int length = static_cast<int>(size);
  if (stbi_is_16_bit_from_memory(bytes, length)) {
    throw Error(ExitCode::input, "image " + what + " is 16-bit, not 8-bit", "convert the images to 8-bit");
  }
  int width = 0, height = 0, channels = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> pixels(stbi_load_from_memory(bytes, length, &width, &height, &channels, 0),
                                                   stbi_image_free);
  if (!pixels) {
    throw Error(ExitCode::input, "cannot decode image " + what + " (" + stbi_failure_reason() + ")",
                "remove or replace the file (PNG, JPEG or BMP)");
  }
  // stb keeps gray+alpha as 2 channels; cv2 makes it BGRA and Python drops the alpha:
  // gray repeated into three channels, which every preprocessing treats as that gray.
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
