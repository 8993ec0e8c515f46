// The image decoder (stb_image behind the pixel limit and the JPEG marker check).
#include "edgekit/decode.h"
#include "edgekit/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const edgekit::Image image = edgekit::decode_image(data, size, "fuzz image");
    if (image.data.size() != image.stride() * static_cast<std::size_t>(image.height)) __builtin_trap();
  } catch (const edgekit::Error&) {
  }
  return 0;
}
