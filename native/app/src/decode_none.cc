// Builds without stb_image: no decoder (apps decode with the platform).

#include "edgekit/decode.h"
#include "edgekit/error.h"

namespace edgekit {

bool image_decoder_available() { return false; }
const char* image_decoder_name() { return ""; }

Image decode_image(const std::uint8_t*, std::size_t, const std::string& what) {
  throw Error(ExitCode::usage, "cannot decode " + what + ": this build has no image decoder",
              "decode with the platform and pass pixels, or rebuild native/ with stb_image (Debian: libstb-dev)");
}

Image decode_image_file(const std::string& path) { return decode_image(nullptr, 0, path); }

}  // namespace edgekit
