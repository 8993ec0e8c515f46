#include "edgekit/image.h"

#include <cstring>
#include <string>

#include "edgekit/error.h"
#include "edgekit/limits.h"

namespace edgekit {

int pixel_order_channels(PixelOrder order) {
  switch (order) {
    case PixelOrder::gray: return 1;
    case PixelOrder::bgr:
    case PixelOrder::rgb: return 3;
    case PixelOrder::bgra:
    case PixelOrder::rgba: return 4;
  }
  return 0;
}

const char* pixel_order_name(PixelOrder order) {
  switch (order) {
    case PixelOrder::gray: return "gray";
    case PixelOrder::bgr: return "bgr";
    case PixelOrder::rgb: return "rgb";
    case PixelOrder::bgra: return "bgra";
    case PixelOrder::rgba: return "rgba";
  }
  return "?";
}

PixelOrder default_pixel_order(int channels) {
  switch (channels) {
    case 1: return PixelOrder::gray;
    case 3: return PixelOrder::bgr;
    case 4: return PixelOrder::bgra;
    default:
      throw Error(ExitCode::input, "an image has " + std::to_string(channels) + " channels",
                  "give 1 (gray), 3 (BGR/RGB) or 4 (BGRA/RGBA) channels");
  }
}

ImageView ImageView::of(const std::uint8_t* data, int height, int width, PixelOrder order, std::size_t stride) {
  ImageView v;
  v.data = data;
  v.height = height;
  v.width = width;
  v.channels = pixel_order_channels(order);
  v.order = order;
  v.stride = stride != 0 ? stride : static_cast<std::size_t>(width > 0 ? width : 0) * static_cast<std::size_t>(v.channels);
  return v;
}

void ImageView::check() const {
  if (data == nullptr || height < 1 || width < 1) {
    throw Error(ExitCode::input, "an image is empty (" + std::to_string(height) + "x" + std::to_string(width) + ")",
                "give at least one pixel");
  }
  limits::check(ExitCode::input, "an image (" + std::to_string(width) + "x" + std::to_string(height) + ") in pixels",
                static_cast<std::uint64_t>(height) * static_cast<std::uint64_t>(width), "MAX_IMAGE_PIXELS",
                limits::kMaxImagePixels);
  if (channels != pixel_order_channels(order)) {
    throw Error(ExitCode::input,
                std::string("an image has ") + std::to_string(channels) + " channels but its order is " +
                    pixel_order_name(order),
                "describe the pixels with the matching order");
  }
  if (stride < static_cast<std::size_t>(width) * static_cast<std::size_t>(channels)) {
    throw Error(ExitCode::input, "an image's row stride " + std::to_string(stride) + " is shorter than a row",
                "give the stride in bytes, at least width * channels");
  }
}

ImageView ImageView::crop(int top, int left, int h, int w) const {
  if (top < 0 || left < 0 || h < 1 || w < 1 || top + h > height || left + w > width) {
    throw Error(ExitCode::input,
                "crop " + std::to_string(h) + "x" + std::to_string(w) + " at (" + std::to_string(top) + ", " +
                    std::to_string(left) + ") is outside the " + std::to_string(height) + "x" + std::to_string(width) +
                    " image",
                "crop inside the image");
  }
  ImageView v = *this;
  v.data = data + static_cast<std::size_t>(top) * stride + static_cast<std::size_t>(left) * channels;
  v.height = h;
  v.width = w;
  return v;
}

Image::Image(int h, int w, PixelOrder o) : height(h), width(w), channels(pixel_order_channels(o)), order(o) {
  data.resize(static_cast<std::size_t>(h) * static_cast<std::size_t>(w) * static_cast<std::size_t>(channels));
}

Image Image::copy_of(const ImageView& view) {
  view.check();
  Image out(view.height, view.width, view.order);
  for (int y = 0; y < view.height; ++y) std::memcpy(out.row(y), view.row(y), out.stride());
  return out;
}

}  // namespace edgekit
