// The geometry of PaddleOCR's DB post-processing, computed as edgekit/tasks/db.py
// computes it (integer results equal, floating-point steps in the same order):
// OpenCV's border following (cv2.findContours RETR_LIST + CHAIN_APPROX_SIMPLE),
// the convex hull, the minimum-area rectangle over the hull's edges, the pixels
// cv2.fillPoly sets for an integer polygon, and Clipper's round offset.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

namespace edgekit {

struct IPoint {
  std::int64_t x = 0, y = 0;
  bool operator==(const IPoint& o) const { return x == o.x && y == o.y; }
};
using Contour = std::vector<IPoint>;

struct DPoint {
  double x = 0, y = 0;
};
using Corners = std::array<DPoint, 4>;  // top-left, top-right, bottom-right, bottom-left

// Every border of a 0/1 bitmap (outer borders and holes), in cv2.findContours' order
// (the reverse of the raster order they are found in), each as its corner points.
std::vector<Contour> find_contours(const std::uint8_t* bitmap, int height, int width);

// Andrew's monotone chain from the smallest (x, y); collinear points dropped.
Contour convex_hull(const Contour& points);

// PaddleOCR's get_mini_boxes order of 4 corners (stable sort by x, then by y per side).
Corners order_corners(const Corners& corners);

struct MinRect {
  Corners corners;
  double short_side = 0;
};
MinRect min_area_rect(const Contour& points);

// The pixels (row-major, height x width) cv2.fillPoly sets for an integer polygon.
std::vector<std::uint8_t> polygon_mask(const Contour& polygon, int height, int width);

// The Cohen-Sutherland cut of a segment to a width x height grid; false when it misses.
bool clip_line(int width, int height, std::int64_t& x1, std::int64_t& y1, std::int64_t& x2, std::int64_t& y2);

// The quad grown by area * ratio / perimeter through Clipper (jtRound, etClosedPolygon),
// corners truncated to integers first; every resulting polygon's points, concatenated.
Contour unclip(const Corners& quad, double ratio);

}  // namespace edgekit
