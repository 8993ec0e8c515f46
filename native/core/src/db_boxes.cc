// DB text boxes as edgekit/tasks/db.py's db_quads finds them (PaddleOCR's
// DBPostProcess): contours of map > thresh, the minimum-area rectangle of each, its
// mean score, Clipper's unclip, the rectangle of the grown polygon, rounded corners.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "edgekit/db_geometry.h"
#include "edgekit/numpy_compat.h"
#include "edgekit/postprocess.h"

namespace edgekit {
namespace {

std::int64_t clip_index(double v, int top) {  // Python: int(min(max(v, 0), top))
  return static_cast<std::int64_t>(std::min(std::max(v, 0.0), static_cast<double>(top)));
}

// db.region_score: the mean of the map over the pixels cv2.fillPoly sets for the
// polygon (the rectangle, or the contour for score_mode slow), moved into its clipped
// bounding box and truncated.
double region_score(const float* prob, int height, int width, const std::vector<DPoint>& quad) {
  double lo_x = quad[0].x, hi_x = quad[0].x, lo_y = quad[0].y, hi_y = quad[0].y;
  for (const DPoint& p : quad) {
    lo_x = std::min(lo_x, p.x), hi_x = std::max(hi_x, p.x);
    lo_y = std::min(lo_y, p.y), hi_y = std::max(hi_y, p.y);
  }
  const std::int64_t x0 = clip_index(std::floor(lo_x), width - 1), y0 = clip_index(std::floor(lo_y), height - 1);
  const std::int64_t x1 = clip_index(std::ceil(hi_x), width - 1), y1 = clip_index(std::ceil(hi_y), height - 1);
  Contour local;
  for (const DPoint& p : quad) {
    local.push_back({static_cast<std::int64_t>(std::trunc(p.x - static_cast<double>(x0))),
                     static_cast<std::int64_t>(std::trunc(p.y - static_cast<double>(y0)))});
  }
  const int h = static_cast<int>(y1 - y0 + 1), w = static_cast<int>(x1 - x0 + 1);
  const std::vector<std::uint8_t> mask = polygon_mask(local, h, w);
  std::vector<double> values;
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      if (mask[static_cast<std::size_t>(y) * w + x]) values.push_back(prob[(y0 + y) * width + x0 + x]);
    }
  }
  return values.empty() ? 0.0 : numpy_sum(values.data(), values.size()) / static_cast<double>(values.size());
}

// db.scale_quad with the map's own size: np.clip(np.round(x / width * width), 0, width).
std::int64_t scaled(double v, int side) {
  const double r = std::nearbyint(v / side * side);
  return static_cast<std::int64_t>(std::min(std::max(r, 0.0), static_cast<double>(side)));
}

}  // namespace

std::vector<TextBox> db_boxes(const float* prob, int height, int width, const DbOptions& options) {
  // A zero-sized map has no contours (and nothing to read); negative sides are a caller's bug.
  if (height <= 0 || width <= 0) return {};
  const std::size_t count = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  const float thresh = static_cast<float>(options.thresh);  // db.py compares with np.float32(thresh)
  std::vector<std::uint8_t> bitmap(count);
  for (std::size_t i = 0; i < count; ++i) bitmap[i] = prob[i] > thresh ? 1 : 0;
  const std::vector<Contour> contours = find_contours(bitmap.data(), height, width);

  std::vector<TextBox> boxes;
  const std::size_t candidates = std::min(contours.size(), static_cast<std::size_t>(std::max(0, options.max_candidates)));
  for (std::size_t k = 0; k < candidates; ++k) {
    const MinRect rect = min_area_rect(contours[k]);
    if (rect.short_side < options.min_size) continue;
    std::vector<DPoint> region;
    if (options.slow_score) {
      for (const IPoint& p : contours[k]) region.push_back({static_cast<double>(p.x), static_cast<double>(p.y)});
    } else {
      region.assign(rect.corners.begin(), rect.corners.end());
    }
    const double score = region_score(prob, height, width, region);
    if (score < options.box_thresh) continue;
    const Contour grown = unclip(rect.corners, options.unclip_ratio);
    if (grown.empty()) continue;
    const MinRect box = min_area_rect(grown);
    if (box.short_side < options.min_size + 2) continue;
    TextBox out;
    for (std::size_t i = 0; i < 4; ++i) out.quad[i] = {scaled(box.corners[i].x, width), scaled(box.corners[i].y, height)};
    out.x0 = out.x1 = static_cast<double>(out.quad[0][0]);
    out.y0 = out.y1 = static_cast<double>(out.quad[0][1]);
    for (const auto& p : out.quad) {
      out.x0 = std::min(out.x0, static_cast<double>(p[0])), out.x1 = std::max(out.x1, static_cast<double>(p[0]));
      out.y0 = std::min(out.y0, static_cast<double>(p[1])), out.y1 = std::max(out.y1, static_cast<double>(p[1]));
    }
    out.score = python_round(score, 6);
    boxes.push_back(out);
  }
  return boxes;
}

}  // namespace edgekit
