// What --save draws for detection and segmentation results (the C API's JSON, see
// edgekit_c.h ek_run): boxes in a colour per class with "label score" above them, and
// a mask overlay (every non-background pixel blended half and half with its class colour).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace camera_demo {

struct Canvas {  // RGB, 3 bytes a pixel, row-major
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  void paint(int x, int y, const unsigned char* colour);
  void blend(int x, int y, const unsigned char* colour);  // half and half
};

// One detection of a result: the box in image pixels, its class, label and score.
struct Found {
  double box[4] = {0, 0, 0, 0};
  long klass = -1;
  std::string label;
  double score = 0;
};

// The items of a detection result (every {"box", "class", "label", "score"}).
std::vector<Found> detections_of(const std::string& result_json);
// A segmentation result's "rle" runs as pixels (row-major); empty unless it covers width x height.
std::vector<std::uint8_t> mask_of(const std::string& result_json, int width, int height);

// Boxes scoring at least min_score, with their text.
void draw_detections(Canvas& canvas, const std::vector<Found>& found, double min_score);
void draw_mask(Canvas& canvas, const std::vector<std::uint8_t>& mask);
// A 3x5 pixel font (letters shown upper case, digits, '.', '-', '_'; others as spaces), one pixel a dot.
void draw_text(Canvas& canvas, int x, int y, const std::string& text, const unsigned char* colour);

const unsigned char* class_colour(long klass);

}  // namespace camera_demo
