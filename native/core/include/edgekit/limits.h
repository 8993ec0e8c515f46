// The sizes the C++ readers accept from untrusted input, in one place. Bundles, asset
// sets, golden files and images may come from someone else, so every reader checks
// what it is about to allocate or index against these limits *before* doing so (a
// header's shape, an image's dimensions, a JSON file's size), and a refusal names the
// limit it hit. The figures and names are the twins of edgekit/core/limits.py, so the
// Python and the C++ side refuse the same files.
#pragma once

#include <cstdint>
#include <string>

#include "edgekit/error.h"

namespace edgekit {
namespace limits {

// One array of a .npy / .npz (golden vectors, runner inputs, model outputs).
constexpr std::uint64_t kMaxTensorBytes = std::uint64_t{1} << 30;     // MAX_TENSOR_BYTES, 1 GiB
constexpr std::uint64_t kMaxTensorElements = std::uint64_t{1} << 30;  // MAX_TENSOR_ELEMENTS (1-byte dtypes)
// width x height of an image to decode or to preprocess.
constexpr std::uint64_t kMaxImagePixels = std::uint64_t{1} << 26;     // MAX_IMAGE_PIXELS, 8192 x 8192
// Either side of an image; stb_image refuses larger ones before it reads further.
constexpr int kMaxImageSide = 1 << 16;                                // MAX_IMAGE_SIDE
// Bytes an image file must have for the pixels its header claims: stb_image (and cv2)
// pad missing data with zeros, so a few hundred bytes could claim 64 Mpx. A complete
// JPEG spends at least one bit per 8x8 block, a BMP at least one bit per pixel, so a
// file of S bytes holds at most S x this many pixels (PNG has no such bound). Twins of
// edgekit/core/limits.py's MAX_JPEG_PIXELS_PER_BYTE / MAX_BMP_PIXELS_PER_BYTE (check_image_bytes).
constexpr std::uint64_t kMaxJpegPixelsPerByte = 512;                  // MAX_JPEG_PIXELS_PER_BYTE
constexpr std::uint64_t kMaxBmpPixelsPerByte = 8;                     // MAX_BMP_PIXELS_PER_BYTE
// preprocess resize / crop, per side.
constexpr int kMaxResizeSide = 8192;                                  // MAX_RESIZE_SIDE
// manifest.json, assets.json, preprocess.json, task.json, golden.json.
constexpr std::uint64_t kMaxJsonBytes = std::uint64_t{16} << 20;      // MAX_JSON_BYTES, 16 MiB
constexpr int kMaxJsonDepth = 64;                                     // MAX_JSON_DEPTH: nested arrays/objects

// Error(code): "<what> is <value>, beyond the limit <NAME> = <limit>; <fix>". `name` is
// the limit's name as both sides write it (e.g. "MAX_TENSOR_BYTES").
Error beyond(ExitCode code, const std::string& what, std::uint64_t value, const char* name, std::uint64_t limit);

// Throws beyond(...) when value > limit.
void check(ExitCode code, const std::string& what, std::uint64_t value, const char* name, std::uint64_t limit);

// a * b, or false when the product does not fit 64 bits (so a caller can name the limit).
bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t* product);

// Elements and bytes of an array of `dims` x `itemsize` within MAX_TENSOR_ELEMENTS and
// MAX_TENSOR_BYTES, every multiplication checked; Error(code) naming `what` otherwise.
// Returns the byte count. Negative dimensions are refused too.
std::uint64_t check_tensor(ExitCode code, const std::string& what, const std::int64_t* dims, std::size_t rank,
                           std::uint64_t itemsize);

}  // namespace limits
}  // namespace edgekit
