// PP-OCR as a system, step for step as edgekit/consumers/predict.py's ocr_system (the
// Python twin `edgekit ocr` runs): the detector's boxes in image pixels, read in
// sort_boxes order; each quad warped upright out of the original image (rotate_crop; a
// result without a quad: its box cropped, edges floor/ceil, clamped); the direction classifier's label and score, the crop turned 180
// degrees when the label is "180" and the score is above cls_thresh; the
// recogniser's text and confidence. One JSON object per line with the keys
// box, [quad,] det_score, [angle, angle_score,] text, confidence.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "edgekit/image.h"
#include "edgekit/json.h"
#include "edgekit/model.h"

namespace edgekit {

constexpr double kClsThresh = 0.9;        // PaddleOCR's default, as predict.CLS_THRESH
constexpr double kSameLinePixels = 10.0;  // predict.SAME_LINE_PIXELS

using Box = std::array<double, 4>;  // x0, y0, x1, y1 in image pixels

// Reading order (indices into boxes): by top then left, then neighbours whose tops
// differ by less than 10 px swapped into left-to-right order.
std::vector<std::size_t> sort_boxes(const std::vector<Box>& boxes);

struct PixelRect {
  int top = 0, left = 0, height = 0, width = 0;  // height/width <= 0: nothing to crop
};
// The pixels a box covers in an image of height x width: floor/ceil, clamped.
PixelRect crop_rect(const Box& box, int height, int width);

// predict.rotate_crop (PaddleOCR's get_rotate_crop_image): the quad (top-left, top-right,
// bottom-right, bottom-left, image pixels) warped upright by bilinear sampling with
// replicated borders, turned 90 degrees counter-clockwise when height / width >= 1.5.
// An empty image (height 0) when the quad is narrower than a pixel.
using Quad = std::array<std::array<double, 2>, 4>;
Image rotate_crop(const ImageView& image, const Quad& quad);

// piece[::-1, ::-1]: rows and columns reversed, channels kept.
Image rotate180(const ImageView& image);

struct OcrTimes {
  StageTimes det, cls, rec;  // summed over the lines for cls and rec
  double crop_ms = 0;        // crops and rotations
  double total_ms = 0;       // wall time of the whole call
  Json to_json() const;
};

struct OcrResult {
  Json lines = Json::array();
  OcrTimes times;
};

// cls may be null (no direction classifier). Error(input) when a model has another task.
OcrResult ocr_system(const ImageView& image, Model& det, Model& rec, Model* cls, double cls_thresh = kClsThresh);

}  // namespace edgekit
