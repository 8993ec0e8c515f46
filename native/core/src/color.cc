// cv2.cvtColor(..., COLOR_BGR2GRAY) as opencv-python 4.6.0 computes it for uint8:
// 15-bit fixed-point weights (the 14-bit ones of older OpenCV round differently).
#include "edgekit/imgproc.h"

namespace edgekit {

Image to_gray(const ImageView& src) {
  src.check();
  if (src.order == PixelOrder::gray) return Image::copy_of(src);
  // 15-bit weights summing to 2^15 (0.299, 0.587, 0.114 rounded), round half up.
  constexpr int kRed = 9798, kGreen = 19235, kBlue = 3735, kShift = 15;
  const bool blue_first = src.order == PixelOrder::bgr || src.order == PixelOrder::bgra;
  const int first = blue_first ? kBlue : kRed, third = blue_first ? kRed : kBlue;
  Image out(src.height, src.width, PixelOrder::gray);
  for (int y = 0; y < src.height; ++y) {
    const std::uint8_t* s = src.row(y);
    std::uint8_t* d = out.row(y);
    for (int x = 0; x < src.width; ++x, s += src.channels) {
      d[x] = static_cast<std::uint8_t>((s[0] * first + s[1] * kGreen + s[2] * third + (1 << (kShift - 1))) >> kShift);
    }
  }
  return out;
}

}  // namespace edgekit
