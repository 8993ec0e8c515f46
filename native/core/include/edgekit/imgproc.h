// The pixel operations of edgekit's preprocessing, each bit-exact with what
// opencv-python 4.6.0 (the cv2 edgekit's Python path runs) gives for uint8 images.
// Written from the arithmetic cv2 uses (fixed-point weights, rounding, which path
// it picks for which scale); no OpenCV code is compiled in or copied.
#pragma once

#include "edgekit/image.h"

namespace edgekit {

enum class Interpolation { linear, nearest, area };

const char* interpolation_name(Interpolation interpolation);

// cv2.COLOR_BGR2GRAY / RGB2GRAY / BGRA2GRAY / RGBA2GRAY: (B*3735 + G*19235 +
// R*9798 + 2^14) >> 15, alpha ignored. A gray view is copied.
Image to_gray(const ImageView& src);

// cv2.resize(src, (width, height), interpolation) for uint8, any channel count;
// the output keeps the source's channel order. The same size copies, as cv2 does.
//  - linear: 11-bit fixed-point weights from float positions, (x + 0.5) * scale - 0.5,
//    edges clamped; an exact 2x downscale in both directions becomes area (cv2 does).
//  - nearest: source index floor(x * (src / dst)), clamped.
//  - area: integer factors sum whole blocks (2x2: (a + b + c + d + 2) >> 2, others
//    round(sum * (1 / n)) in float); other downscales weight cell overlaps in float;
//    an upscale in either direction uses linear weights of the covered fractions.
Image resize(const ImageView& src, int height, int width, Interpolation interpolation);

}  // namespace edgekit
