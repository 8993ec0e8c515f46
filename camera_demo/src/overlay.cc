#include "overlay.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace camera_demo {
namespace {

// Rows top to bottom, three columns each, '1' = dot.
struct Glyph {
  char c;
  const char* rows;
};
const Glyph kFont[] = {
    {'A', "010101111101101"}, {'B', "110101110101110"}, {'C', "011100100100011"}, {'D', "110101101101110"},
    {'E', "111100110100111"}, {'F', "111100110100100"}, {'G', "011100101101011"}, {'H', "101101111101101"},
    {'I', "111010010010111"}, {'J', "001001001101010"}, {'K', "101101110101101"}, {'L', "100100100100111"},
    {'M', "101111111101101"}, {'N', "110101101101101"}, {'O', "010101101101010"}, {'P', "110101110100100"},
    {'Q', "010101101110011"}, {'R', "110101110101101"}, {'S', "011100010001110"}, {'T', "111010010010010"},
    {'U', "101101101101111"}, {'V', "101101101101010"}, {'W', "101101111111101"}, {'X', "101101010101101"},
    {'Y', "101101010010010"}, {'Z', "111001010100111"}, {'0', "111101101101111"}, {'1', "010110010010111"},
    {'2', "110001010100111"}, {'3', "110001010001110"}, {'4', "101101111001001"}, {'5', "111100110001110"},
    {'6', "011100111101111"}, {'7', "111001010010010"}, {'8', "111101111101111"}, {'9', "111101111001110"},
    {'.', "000000000000010"}, {'-', "000000111000000"}, {'_', "000000000000111"},
};

const char* glyph(char c) {
  const char up = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (const Glyph& g : kFont) {
    if (g.c == up) return g.rows;
  }
  return nullptr;
}

const unsigned char kPalette[][3] = {{255, 64, 64},  {64, 200, 64},  {64, 128, 255}, {255, 200, 0},
                                     {200, 64, 255}, {0, 220, 220},  {255, 128, 0},  {128, 128, 128}};
const unsigned char kBlack[3] = {0, 0, 0};

// The number after `key` at or after `from` and before `limit`; false when absent.
bool number_after(const std::string& json, const char* key, std::size_t from, std::size_t limit, double& out) {
  const std::size_t at = json.find(key, from);
  if (at == std::string::npos || at >= limit) return false;
  out = std::strtod(json.c_str() + at + std::strlen(key), nullptr);
  return true;
}

}  // namespace

void Canvas::paint(int x, int y, const unsigned char* colour) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  std::memcpy(&rgb[(static_cast<std::size_t>(y) * width + x) * 3], colour, 3);
}

void Canvas::blend(int x, int y, const unsigned char* colour) {
  if (x < 0 || y < 0 || x >= width || y >= height) return;
  unsigned char* p = &rgb[(static_cast<std::size_t>(y) * width + x) * 3];
  for (int i = 0; i < 3; ++i) p[i] = static_cast<unsigned char>((p[i] + colour[i] + 1) / 2);
}

const unsigned char* class_colour(long klass) {
  return kPalette[static_cast<std::size_t>(klass < 0 ? 0 : klass) % (sizeof kPalette / sizeof kPalette[0])];
}

std::vector<Found> detections_of(const std::string& json) {
  std::vector<Found> out;
  const std::string key = "\"box\":[";
  for (std::size_t at = json.find(key); at != std::string::npos;) {
    const std::size_t next = json.find(key, at + 1);
    const std::size_t limit = next == std::string::npos ? json.size() : next;
    Found f;
    const char* p = json.c_str() + at + key.size();
    for (double& v : f.box) {
      char* end = nullptr;
      v = std::strtod(p, &end);
      p = end + 1;  // past the comma
    }
    double value = 0;
    if (number_after(json, "\"class\":", at, limit, value)) f.klass = static_cast<long>(value);
    if (number_after(json, "\"score\":", at, limit, value)) f.score = value;
    const std::size_t label = json.find("\"label\":\"", at);
    if (label != std::string::npos && label < limit) {
      const std::size_t start = label + 9;
      f.label = json.substr(start, json.find('"', start) - start);
    }
    out.push_back(f);
    at = next;
  }
  return out;
}

std::vector<std::uint8_t> mask_of(const std::string& json, int width, int height) {
  std::vector<std::uint8_t> mask;
  const std::size_t at = json.find("\"rle\":[");
  if (at == std::string::npos) return mask;
  const std::size_t total = static_cast<std::size_t>(width) * height;
  const char* p = json.c_str() + at + 7;
  while (*p == '[') {
    char* end = nullptr;
    const long klass = std::strtol(p + 1, &end, 10);
    const long run = std::strtol(end + 1, &end, 10);  // past the comma
    if (run < 0 || mask.size() + static_cast<std::size_t>(run) > total) return {};
    mask.insert(mask.end(), static_cast<std::size_t>(run), static_cast<std::uint8_t>(klass));
    p = end + 1;            // past ']'
    if (*p == ',') ++p;
  }
  if (mask.size() != total) mask.clear();
  return mask;
}

void draw_text(Canvas& canvas, int x, int y, const std::string& text, const unsigned char* colour) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char* rows = glyph(text[i]);
    for (int k = 0; rows && k < 15; ++k) {
      if (rows[k] == '1') canvas.paint(x + static_cast<int>(i) * 4 + k % 3, y + k / 3, colour);
    }
  }
}

void draw_detections(Canvas& canvas, const std::vector<Found>& found, double min_score) {
  for (const Found& f : found) {
    if (f.score < min_score) continue;
    const unsigned char* colour = class_colour(f.klass);
    const int x0 = static_cast<int>(std::floor(f.box[0])), y0 = static_cast<int>(std::floor(f.box[1]));
    const int x1 = static_cast<int>(std::ceil(f.box[2])) - 1, y1 = static_cast<int>(std::ceil(f.box[3])) - 1;
    for (int x = x0; x <= x1; ++x) canvas.paint(x, y0, colour), canvas.paint(x, y1, colour);
    for (int y = y0; y <= y1; ++y) canvas.paint(x0, y, colour), canvas.paint(x1, y, colour);
    char score[16];
    std::snprintf(score, sizeof score, " %.2f", f.score);
    const std::string text = (f.label.empty() ? std::to_string(f.klass) : f.label) + score;
    // a filled tag above the box (inside it when the box touches the top edge)
    const int tag_y = y0 >= 7 ? y0 - 7 : y0 + 1;
    const int tag_w = static_cast<int>(text.size()) * 4 + 1;
    for (int y = tag_y; y < tag_y + 7; ++y) {
      for (int x = x0; x < x0 + tag_w; ++x) canvas.paint(x, y, colour);
    }
    draw_text(canvas, x0 + 1, tag_y + 1, text, kBlack);
  }
}

void draw_mask(Canvas& canvas, const std::vector<std::uint8_t>& mask) {
  if (mask.size() != static_cast<std::size_t>(canvas.width) * canvas.height) return;
  for (int y = 0; y < canvas.height; ++y) {
    for (int x = 0; x < canvas.width; ++x) {
      const std::uint8_t c = mask[static_cast<std::size_t>(y) * canvas.width + x];
      if (c != 0) canvas.blend(x, y, class_colour(c - 1));
    }
  }
}

}  // namespace camera_demo
