// 8-bit images as apps hand them over: height x width x channels, rows `stride`
// bytes apart, with the channel order named (Android gives RGBA, iOS BGRA, a
// decoder BGR or gray). Decoding is the platform's job; the core starts here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace edgekit {

enum class PixelOrder { gray, bgr, rgb, bgra, rgba };

int pixel_order_channels(PixelOrder order);  // 1, 3 or 4
const char* pixel_order_name(PixelOrder order);
// The order a decoded array with `channels` channels has in edgekit's Python path
// (cv2: gray, BGR, BGRA); throws Error(input) for other channel counts.
PixelOrder default_pixel_order(int channels);

// Borrowed pixels; the caller keeps them alive. stride 0 means tightly packed.
struct ImageView {
  const std::uint8_t* data = nullptr;
  int height = 0;
  int width = 0;
  int channels = 0;
  std::size_t stride = 0;  // bytes from one row to the next
  PixelOrder order = PixelOrder::gray;

  static ImageView of(const std::uint8_t* data, int height, int width, PixelOrder order, std::size_t stride = 0);
  static ImageView gray(const std::uint8_t* data, int height, int width, std::size_t stride = 0) {
    return of(data, height, width, PixelOrder::gray, stride);
  }
  static ImageView bgr(const std::uint8_t* data, int height, int width, std::size_t stride = 0) {
    return of(data, height, width, PixelOrder::bgr, stride);
  }
  static ImageView rgb(const std::uint8_t* data, int height, int width, std::size_t stride = 0) {
    return of(data, height, width, PixelOrder::rgb, stride);
  }
  static ImageView bgra(const std::uint8_t* data, int height, int width, std::size_t stride = 0) {
    return of(data, height, width, PixelOrder::bgra, stride);
  }
  static ImageView rgba(const std::uint8_t* data, int height, int width, std::size_t stride = 0) {
    return of(data, height, width, PixelOrder::rgba, stride);
  }

  const std::uint8_t* row(int y) const { return data + static_cast<std::size_t>(y) * stride; }
  // Throws Error(input) unless sizes are positive, channels match the order and
  // the stride holds a row.
  void check() const;
  // Rows [top, top + h) and columns [left, left + w): no copy.
  ImageView crop(int top, int left, int h, int w) const;
};

// Owned, tightly packed pixels.
struct Image {
  int height = 0;
  int width = 0;
  int channels = 0;
  PixelOrder order = PixelOrder::gray;
  std::vector<std::uint8_t> data;

  Image() = default;
  Image(int height, int width, PixelOrder order);

  std::size_t stride() const { return static_cast<std::size_t>(width) * static_cast<std::size_t>(channels); }
  std::uint8_t* row(int y) { return data.data() + static_cast<std::size_t>(y) * stride(); }
  const std::uint8_t* row(int y) const { return data.data() + static_cast<std::size_t>(y) * stride(); }
  ImageView view() const { return ImageView::of(data.data(), height, width, order, stride()); }
  static Image copy_of(const ImageView& view);
};

}  // namespace edgekit
