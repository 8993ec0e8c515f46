// Image files decoded as edgekit's Python path decodes them (cv2.imread with
// IMREAD_UNCHANGED, alpha then dropped): 8-bit gray or colour; 16-bit refused.
// Built on stb_image when it was found at configure time (Debian: libstb-dev);
// apps normally decode with the platform (BitmapFactory, UIImage) instead.
// PNG and BMP decode to the same pixels as cv2; JPEG decoders differ slightly
// (stb_image vs libjpeg-turbo), so JPEG tensors are not bit-exact.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "edgekit/image.h"

namespace edgekit {

bool image_decoder_available();
const char* image_decoder_name();  // "stb_image" or ""

// gray (1 channel), rgb (3) or rgba (4; the core ignores alpha as Python drops it).
// Error(input) naming `what` for undecodable or 16-bit data; Error(usage) when the
// build has no decoder.
Image decode_image(const std::uint8_t* bytes, std::size_t size, const std::string& what);
Image decode_image_file(const std::string& path);

// PNG/BMP/PPM decode bit-exactly everywhere; JPEG does not.
bool lossless_image_file(const std::string& path);

}  // namespace edgekit
