// Images, colour and resize with answers worked out by hand from cv2's arithmetic
// (and confirmed against opencv-python 4.6.0); tests/native/test_preprocess.py
// compares thousands of random cases with cv2 itself.
#include <vector>

#include "edgekit/image.h"
#include "edgekit/imgproc.h"
#include "harness.h"

namespace {

using namespace edgekit;

std::vector<int> pixels(const Image& image) { return std::vector<int>(image.data.begin(), image.data.end()); }

Image resized(const std::vector<std::uint8_t>& row_major, int h, int w, int dh, int dw, Interpolation interpolation) {
  return resize(ImageView::gray(row_major.data(), h, w), dh, dw, interpolation);
}

}  // namespace

EK_TEST(image, gray_uses_15_bit_weights_in_every_channel_order) {
  // B=0 G=15 R=106: (15*19235 + 106*9798 + 2^14) >> 15 = 41 (the old 14-bit weights give 40)
  const std::uint8_t bgr[] = {0, 15, 106}, rgb[] = {106, 15, 0}, bgra[] = {0, 15, 106, 9}, rgba[] = {106, 15, 0, 200};
  EK_CHECK_EQ(to_gray(ImageView::bgr(bgr, 1, 1)).data[0], 41);
  EK_CHECK_EQ(to_gray(ImageView::rgb(rgb, 1, 1)).data[0], 41);
  EK_CHECK_EQ(to_gray(ImageView::bgra(bgra, 1, 1)).data[0], 41);
  EK_CHECK_EQ(to_gray(ImageView::rgba(rgba, 1, 1)).data[0], 41);
  const std::uint8_t white[] = {255, 255, 255};
  EK_CHECK_EQ(to_gray(ImageView::bgr(white, 1, 1)).data[0], 255);
}

EK_TEST(image, views_have_strides_and_crops_share_pixels) {
  // 2x3 gray pixels in rows of 4 bytes (one byte of padding per row)
  const std::uint8_t padded[] = {1, 2, 3, 99, 4, 5, 6, 99};
  const ImageView v = ImageView::gray(padded, 2, 3, 4);
  EK_CHECK_EQ(pixels(Image::copy_of(v)), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  const ImageView c = v.crop(1, 1, 1, 2);
  EK_CHECK_EQ(pixels(Image::copy_of(c)), (std::vector<int>{5, 6}));
  EK_CHECK_ERROR(v.crop(1, 2, 1, 2), input, "outside the 2x3 image");
  EK_CHECK_ERROR(ImageView::gray(padded, 2, 3, 2).check(), input, "stride");
  EK_CHECK_ERROR(ImageView::gray(padded, 0, 3).check(), input, "empty");
  EK_CHECK(default_pixel_order(4) == PixelOrder::bgra);
  EK_CHECK_ERROR(default_pixel_order(2), input, "2 channels");
}

EK_TEST(resize, linear_upscale_uses_11_bit_weights_and_two_stage_rounding) {
  // cv2.resize([[0, 255]], (4, 1)): weights (2048,0) (1536,512) (512,1536) edge -> 0 64 191 255
  EK_CHECK_EQ(pixels(resized({0, 255}, 1, 2, 1, 4, Interpolation::linear)), (std::vector<int>{0, 64, 191, 255}));
}

EK_TEST(resize, exact_halving_becomes_the_2x2_box_filter) {
  // (0 + 0 + 1 + 1 + 2) >> 2 = 1, where round(0.5) would give 0
  EK_CHECK_EQ(pixels(resized({0, 0, 1, 1}, 2, 2, 1, 1, Interpolation::linear)), (std::vector<int>{1}));
  EK_CHECK_EQ(pixels(resized({0, 0, 1, 1}, 2, 2, 1, 1, Interpolation::area)), (std::vector<int>{1}));
}

EK_TEST(resize, area_integer_factor_rounds_half_to_even_in_float) {
  // 1x4 -> 1x2 is a factor (2, 1): (0 + 1) * 0.5 = 0.5 -> 0, (1 + 2) * 0.5 = 1.5 -> 2
  EK_CHECK_EQ(pixels(resized({0, 1, 1, 2}, 1, 4, 1, 2, Interpolation::area)), (std::vector<int>{0, 2}));
}

EK_TEST(resize, area_fractional_factor_weights_cell_overlaps) {
  // 3 -> 2: 0*2/3 + 100*1/3 = 33.3 -> 33; 100*1/3 + 201*2/3 = 167.3 -> 167
  EK_CHECK_EQ(pixels(resized({0, 100, 201}, 1, 3, 1, 2, Interpolation::area)), (std::vector<int>{33, 167}));
}

EK_TEST(resize, nearest_takes_floor_of_the_scaled_index) {
  EK_CHECK_EQ(pixels(resized({10, 20, 30}, 1, 3, 1, 2, Interpolation::nearest)), (std::vector<int>{10, 20}));
  EK_CHECK_EQ(pixels(resized({10, 20}, 1, 2, 1, 5, Interpolation::nearest)), (std::vector<int>{10, 10, 10, 20, 20}));
}

EK_TEST(resize, same_size_copies_and_channels_stay_separate) {
  const std::vector<std::uint8_t> bgr = {1, 2, 3, 4, 5, 6};
  const Image same = resize(ImageView::bgr(bgr.data(), 1, 2), 1, 2, Interpolation::linear);
  EK_CHECK_EQ(pixels(same), (std::vector<int>{1, 2, 3, 4, 5, 6}));
  EK_CHECK(same.order == PixelOrder::bgr);
  // each channel is averaged on its own; a factor (2, 1) rounds sum * 0.5 half to even
  const Image half = resize(ImageView::bgr(bgr.data(), 1, 2), 1, 1, Interpolation::area);
  EK_CHECK_EQ(pixels(half), (std::vector<int>{2, 4, 4}));  // 2.5 -> 2, 3.5 -> 4, 4.5 -> 4
  EK_CHECK_ERROR(resize(ImageView::bgr(bgr.data(), 1, 2), 0, 2, Interpolation::linear), input, "resize to 0x2");
}
