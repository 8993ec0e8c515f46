// A pre-check of JPEG files for the one stb_image 2.27 (Debian 12) bug we know writes
// out of bounds: a Huffman table (DHT) whose 16 code counts add up to more than 256
// overflows stbi__build_huffman's tables. We cannot patch the system header, so the
// bytes are walked the way stb_image walks them (markers between segments, junk
// skipped before the frame header, entropy-coded data up to the next marker) and
// such a table is refused before stb sees it. Anything stb would refuse anyway (no
// EOI, unknown markers) is refused here too, so a file that passes has had every
// table stb could read checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace edgekit {

// True when `bytes` start like a JPEG to stb_image (0xff, fill bytes, SOI).
bool looks_like_jpeg(const std::uint8_t* bytes, std::size_t size);
// "" when stb_image may decode the JPEG, else why not (one phrase).
std::string jpeg_marker_problem(const std::uint8_t* bytes, std::size_t size);

}  // namespace edgekit
