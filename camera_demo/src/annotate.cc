#include "annotate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "frame_source.h"
#include "overlay.h"

namespace camera_demo {
namespace {

struct Rect {
  int x0, y0, x1, y1;
};

// Every "box":[x0,y0,x1,y1] of the result (the C API's result keys are fixed).
std::vector<Rect> boxes_of(const std::string& json) {
  std::vector<Rect> out;
  const std::string key = "\"box\":[";
  for (std::size_t at = json.find(key); at != std::string::npos; at = json.find(key, at + 1)) {
    const char* p = json.c_str() + at + key.size();
    double v[4];
    for (double& x : v) {
      char* end = nullptr;
      x = std::strtod(p, &end);
      p = end + 1;  // past the comma
    }
    out.push_back({static_cast<int>(std::floor(v[0])), static_cast<int>(std::floor(v[1])),
                   static_cast<int>(std::ceil(v[2])) - 1, static_cast<int>(std::ceil(v[3])) - 1});
  }
  return out;
}

}  // namespace

void save_annotated(const ek_image& image, const std::string& result_json, const std::string& dir, long index,
                    double min_score) {
  const int channels = image.format == EK_PIXEL_GRAY ? 1 : (image.format == EK_PIXEL_BGR || image.format == EK_PIXEL_RGB) ? 3 : 4;
  const std::size_t stride = image.stride ? static_cast<std::size_t>(image.stride) : static_cast<std::size_t>(image.width) * channels;
  const bool detection = result_json.find("\"task\":\"detection\"") != std::string::npos;
  const bool segmentation = result_json.find("\"task\":\"segmentation\"") != std::string::npos;
  // detections are drawn by overlay.cc (class colours, labels, the score floor); OCR boxes in red here
  const std::vector<Rect> boxes = detection ? std::vector<Rect>() : boxes_of(result_json);
  const bool gray = channels == 1 && boxes.empty() && !detection && !segmentation;
  const int out_channels = gray ? 1 : 3;
  std::vector<unsigned char> rgb(static_cast<std::size_t>(image.width) * image.height * out_channels);
  const bool bgr_order = image.format == EK_PIXEL_BGR || image.format == EK_PIXEL_BGRA;
  for (int y = 0; y < image.height; ++y) {
    const std::uint8_t* row = image.data + static_cast<std::size_t>(y) * stride;
    for (int x = 0; x < image.width; ++x) {
      unsigned char* dst = &rgb[(static_cast<std::size_t>(y) * image.width + x) * out_channels];
      const std::uint8_t* px = row + static_cast<std::size_t>(x) * channels;
      if (out_channels == 1) {
        dst[0] = px[0];
      } else if (channels == 1) {
        dst[0] = dst[1] = dst[2] = px[0];
      } else {
        dst[0] = px[bgr_order ? 2 : 0];
        dst[1] = px[1];
        dst[2] = px[bgr_order ? 0 : 2];
      }
    }
  }
  const auto paint = [&](int x, int y) {
    if (x < 0 || y < 0 || x >= image.width || y >= image.height) return;
    unsigned char* dst = &rgb[(static_cast<std::size_t>(y) * image.width + x) * 3];
    dst[0] = 255, dst[1] = 0, dst[2] = 0;
  };
  if (detection || segmentation) {
    Canvas canvas{image.width, image.height, std::move(rgb)};
    if (segmentation) draw_mask(canvas, mask_of(result_json, image.width, image.height));
    if (detection) draw_detections(canvas, detections_of(result_json), min_score);
    rgb = std::move(canvas.rgb);
  }
  for (const Rect& r : boxes) {
    for (int t = 0; t < 2; ++t) {
      for (int x = r.x0; x <= r.x1; ++x) paint(x, r.y0 + t), paint(x, r.y1 - t);
      for (int y = r.y0; y <= r.y1; ++y) paint(r.x0 + t, y), paint(r.x1 - t, y);
    }
  }
  char name[64];
  std::snprintf(name, sizeof name, "/frame_%06ld.ppm", index);
  const std::string path = dir + name;
  std::FILE* file = std::fopen(path.c_str(), "wb");
  if (!file) throw DemoError("cannot write " + path + "; check --save's folder", 7);
  std::fprintf(file, "P%d\n%d %d\n255\n", gray ? 5 : 6, image.width, image.height);
  const bool ok = std::fwrite(rgb.data(), 1, rgb.size(), file) == rgb.size();
  if (std::fclose(file) != 0 || !ok) throw DemoError("cannot write " + path + "; check free space", 7);
}

}  // namespace camera_demo
