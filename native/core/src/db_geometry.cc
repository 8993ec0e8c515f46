// edgekit/tasks/db.py's geometry in C++; each function says which Python one it repeats.
// Floating-point expressions keep Python's evaluation order (the core builds with
// -ffp-contract=off), so results are equal to the last bit.
#include "edgekit/db_geometry.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <clipper.hpp>  // Debian: /usr/include/polyclipping (CMake adds the folder)

namespace edgekit {
namespace {

constexpr int kXYShift = 16;  // cv2.fillPoly's 16.16 fixed point
constexpr std::int64_t kXYOne = std::int64_t{1} << kXYShift;
constexpr std::int8_t kRightBorder = -126;  // a followed pixel with a 0 to its right (OpenCV's 2 | 0x80)
constexpr std::int8_t kFollowed = 2;
constexpr int kCodeDx[8] = {1, 1, 0, -1, -1, -1, 0, 1};  // direction codes: 0 = right, counter-clockwise
constexpr int kCodeDy[8] = {0, -1, -1, -1, 0, 1, 1, 1};

// One border from pixel i0 (Suzuki & Abe's border following, as OpenCV's icvFetchContour):
// points where the direction changes (CHAIN_APPROX_SIMPLE), visited pixels marked.
Contour follow_border(std::vector<std::int8_t>& img, std::ptrdiff_t i0, bool hole, IPoint pt, const std::ptrdiff_t* deltas) {
  Contour out;
  int s = hole ? 0 : 4;
  int s_end = s;
  std::ptrdiff_t i1 = i0;
  do {
    s = (s - 1) & 7;
    i1 = i0 + deltas[s];
  } while (img[i1] == 0 && s != s_end);
  if (s == s_end) {  // a single pixel
    img[i0] = kRightBorder;
    out.push_back(pt);
    return out;
  }
  std::ptrdiff_t i3 = i0;
  int prev_s = s ^ 4;
  for (;;) {
    s_end = s;
    std::ptrdiff_t i4 = i3;
    while (s < 15) {
      i4 = i3 + deltas[++s];
      if (img[i4] != 0) break;
    }
    s &= 7;
    if (static_cast<unsigned>(s - 1) < static_cast<unsigned>(s_end)) {
      img[i3] = kRightBorder;
    } else if (img[i3] == 1) {
      img[i3] = kFollowed;
    }
    if (s != prev_s) {
      out.push_back(pt);
      prev_s = s;
    }
    pt.x += kCodeDx[s];
    pt.y += kCodeDy[s];
    if (i4 == i0 && i3 == i1) break;
    i3 = i4;
    s = (s + 4) & 7;
  }
  return out;
}

std::int64_t trunc_div(std::int64_t a, std::int64_t b) { return a / b; }  // C++ truncates towards zero

void draw_line(std::vector<std::uint8_t>& mask, int height, int width, std::int64_t x1, std::int64_t y1, std::int64_t x2,
               std::int64_t y2) {
  if (!(x1 >= 0 && x1 < width && x2 >= 0 && x2 < width && y1 >= 0 && y1 < height && y2 >= 0 && y2 < height)) {
    if (!clip_line(width, height, x1, y1, x2, y2)) return;
  }
  if (x2 < x1) {
    std::swap(x1, x2);
    std::swap(y1, y2);
  }
  const std::int64_t dx = x2 - x1, dy = y2 >= y1 ? y2 - y1 : y1 - y2;
  const std::int64_t sy = y2 >= y1 ? 1 : -1;
  const bool steep = dy > dx;
  const std::int64_t major = steep ? dy : dx, minor = steep ? dx : dy;
  const std::int64_t major_x = steep ? 0 : 1, major_y = steep ? sy : 0;
  const std::int64_t minor_x = steep ? 1 : 0, minor_y = steep ? 0 : sy;
  std::int64_t err = major - 2 * minor, x = x1, y = y1;
  for (std::int64_t i = 0; i <= major; ++i) {
    mask[static_cast<std::size_t>(y) * static_cast<std::size_t>(width) + static_cast<std::size_t>(x)] = 1;
    if (err < 0) {
      x += major_x + minor_x;
      y += major_y + minor_y;
      err += 2 * major - 2 * minor;
    } else {
      x += major_x;
      y += major_y;
      err -= 2 * minor;
    }
  }
}

}  // namespace

std::vector<Contour> find_contours(const std::uint8_t* bitmap, int height, int width) {
  if (height <= 0 || width <= 0) return {};
  // A one-pixel frame of zeros, as cv2.findContours pads the image.
  const std::ptrdiff_t W = static_cast<std::ptrdiff_t>(width) + 2, H = static_cast<std::ptrdiff_t>(height) + 2;
  std::vector<std::int8_t> img(static_cast<std::size_t>(W * H), 0);
  for (std::ptrdiff_t y = 0; y < height; ++y) {
    for (std::ptrdiff_t x = 0; x < width; ++x) img[static_cast<std::size_t>((y + 1) * W + x + 1)] = bitmap[y * width + x] ? 1 : 0;
  }
  std::ptrdiff_t deltas[16] = {1, -W + 1, -W, -W - 1, -1, W - 1, W, W + 1};
  for (int i = 0; i < 8; ++i) deltas[8 + i] = deltas[i];
  std::vector<Contour> found;
  for (std::ptrdiff_t y = 1; y < H - 1; ++y) {
    int prev = 0;
    for (std::ptrdiff_t x = 1; x < W - 1; ++x) {
      const int p = img[static_cast<std::size_t>(y * W + x)];
      if (p == prev) continue;
      bool hole = false;
      if (!(prev == 0 && p == 1)) {  // not the start of an outer border
        if (p != 0 || prev < 1) {    // nor of a hole
          prev = p;
          continue;
        }
        hole = true;
      }
      const std::ptrdiff_t start = y * W + x - (hole ? 1 : 0);
      found.push_back(follow_border(img, start, hole, IPoint{x - (hole ? 1 : 0) - 1, y - 1}, deltas));
      prev = img[static_cast<std::size_t>(y * W + x)];  // the scan resumes after the (now marked) pixel
    }
  }
  std::reverse(found.begin(), found.end());  // OpenCV lists the last border found first
  return found;
}

Contour convex_hull(const Contour& points) {
  Contour pts = points;
  std::sort(pts.begin(), pts.end(), [](const IPoint& a, const IPoint& b) { return a.x != b.x ? a.x < b.x : a.y < b.y; });
  pts.erase(std::unique(pts.begin(), pts.end()), pts.end());
  if (pts.size() <= 2) return pts;
  auto cross = [](const IPoint& o, const IPoint& a, const IPoint& b) {
    return (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x);
  };
  Contour lower, upper;
  for (const IPoint& p : pts) {
    while (lower.size() >= 2 && cross(lower[lower.size() - 2], lower.back(), p) <= 0) lower.pop_back();
    lower.push_back(p);
  }
  for (auto it = pts.rbegin(); it != pts.rend(); ++it) {
    while (upper.size() >= 2 && cross(upper[upper.size() - 2], upper.back(), *it) <= 0) upper.pop_back();
    upper.push_back(*it);
  }
  Contour hull(lower.begin(), lower.end() - 1);
  hull.insert(hull.end(), upper.begin(), upper.end() - 1);
  return hull;
}

Corners order_corners(const Corners& corners) {
  Corners p = corners;
  std::stable_sort(p.begin(), p.end(), [](const DPoint& a, const DPoint& b) { return a.x < b.x; });
  const bool first_up = p[1].y > p[0].y, second_up = p[3].y > p[2].y;
  const DPoint tl = first_up ? p[0] : p[1], bl = first_up ? p[1] : p[0];
  const DPoint tr = second_up ? p[2] : p[3], br = second_up ? p[3] : p[2];
  return {tl, tr, br, bl};
}

MinRect min_area_rect(const Contour& points) {
  const Contour hull = convex_hull(points);
  MinRect out;
  if (hull.empty()) return out;
  const std::size_t m = hull.size();
  if (m == 1) {
    const DPoint p{static_cast<double>(hull[0].x), static_cast<double>(hull[0].y)};
    out.corners = order_corners({p, p, p, p});
    return out;
  }
  const std::size_t edges = m > 2 ? m : 1;
  bool have = false;
  double best_area = 0, bux = 0, buy = 0, bs0 = 0, bs1 = 0, bt0 = 0, bt1 = 0;
  std::size_t best_i = 0;
  for (std::size_t i = 0; i < edges; ++i) {
    const IPoint& a = hull[i];
    const IPoint& b = hull[(i + 1) % m];
    const double dx = static_cast<double>(b.x - a.x), dy = static_cast<double>(b.y - a.y);
    const double length = std::sqrt(dx * dx + dy * dy);
    const double ux = dx / length, uy = dy / length;
    double s0 = 0, s1 = 0, t0 = 0, t1 = 0;
    for (std::size_t j = 0; j < m; ++j) {
      const double rx = static_cast<double>(hull[j].x) - static_cast<double>(a.x);
      const double ry = static_cast<double>(hull[j].y) - static_cast<double>(a.y);
      const double s = rx * ux + ry * uy;
      const double t = ry * ux - rx * uy;
      if (j == 0) {
        s0 = s1 = s;
        t0 = t1 = t;
      } else {
        s0 = std::min(s0, s);
        s1 = std::max(s1, s);
        t0 = std::min(t0, t);
        t1 = std::max(t1, t);
      }
    }
    const double area = (s1 - s0) * (t1 - t0);
    if (!have || area < best_area) {
      have = true;
      best_area = area, best_i = i, bux = ux, buy = uy, bs0 = s0, bs1 = s1, bt0 = t0, bt1 = t1;
    }
  }
  const double ox = static_cast<double>(hull[best_i].x), oy = static_cast<double>(hull[best_i].y);
  Corners c;
  const double st[4][2] = {{bs0, bt0}, {bs1, bt0}, {bs1, bt1}, {bs0, bt1}};
  for (int k = 0; k < 4; ++k) {
    const double s = st[k][0], t = st[k][1];
    c[k] = {ox + bux * s - buy * t, oy + buy * s + bux * t};
  }
  out.corners = order_corners(c);
  out.short_side = std::min(bs1 - bs0, bt1 - bt0);
  return out;
}

bool clip_line(int width, int height, std::int64_t& x1, std::int64_t& y1, std::int64_t& x2, std::int64_t& y2) {
  const std::int64_t right = width - 1, bottom = height - 1;
  auto code = [&](std::int64_t x, std::int64_t y) {
    return (x < 0 ? 1 : 0) + (x > right ? 2 : 0) + (y < 0 ? 4 : 0) + (y > bottom ? 8 : 0);
  };
  int c1 = code(x1, y1), c2 = code(x2, y2);
  // Python's int(float) truncates like the casts here; the products are exact in double.
  if ((c1 & c2) == 0 && (c1 | c2) != 0) {
    if (c1 & 12) {
      const std::int64_t a = c1 < 8 ? 0 : bottom;
      x1 += static_cast<std::int64_t>(static_cast<double>((a - y1) * (x2 - x1)) / static_cast<double>(y2 - y1));
      y1 = a;
      c1 = (x1 < 0 ? 1 : 0) + (x1 > right ? 2 : 0);
    }
    if (c2 & 12) {
      const std::int64_t a = c2 < 8 ? 0 : bottom;
      x2 += static_cast<std::int64_t>(static_cast<double>((a - y2) * (x2 - x1)) / static_cast<double>(y2 - y1));
      y2 = a;
      c2 = (x2 < 0 ? 1 : 0) + (x2 > right ? 2 : 0);
    }
    if ((c1 & c2) == 0 && (c1 | c2) != 0) {
      if (c1) {
        const std::int64_t a = c1 == 1 ? 0 : right;
        y1 += static_cast<std::int64_t>(static_cast<double>((a - x1) * (y2 - y1)) / static_cast<double>(x2 - x1));
        x1 = a;
        c1 = 0;
      }
      if (c2) {
        const std::int64_t a = c2 == 1 ? 0 : right;
        y2 += static_cast<std::int64_t>(static_cast<double>((a - x2) * (y2 - y1)) / static_cast<double>(x2 - x1));
        x2 = a;
        c2 = 0;
      }
    }
  }
  return (c1 | c2) == 0;
}

std::vector<std::uint8_t> polygon_mask(const Contour& polygon, int height, int width) {
  std::vector<std::uint8_t> mask(static_cast<std::size_t>(std::max(0, height)) * static_cast<std::size_t>(std::max(0, width)), 0);
  if (height <= 0 || width <= 0 || polygon.empty()) return mask;
  struct Edge {
    std::int64_t top, bottom, x, step;
  };
  std::vector<Edge> edges;
  const std::size_t n = polygon.size();
  for (std::size_t i = 0; i < n; ++i) {
    const IPoint& a = polygon[(i + n - 1) % n];
    const IPoint& b = polygon[i];
    draw_line(mask, height, width, a.x, a.y, b.x, b.y);
    if (a.y != b.y) {
      const std::int64_t step = trunc_div((b.x - a.x) * kXYOne, b.y - a.y);
      edges.push_back(a.y < b.y ? Edge{a.y, b.y, a.x * kXYOne, step} : Edge{b.y, a.y, b.x * kXYOne, step});
    }
  }
  if (edges.size() < 2) return mask;
  std::int64_t first = edges[0].top, last = edges[0].bottom;
  for (const Edge& e : edges) first = std::min(first, e.top), last = std::max(last, e.bottom);
  std::vector<std::int64_t> xs;
  for (std::int64_t y = std::max<std::int64_t>(0, first); y < std::min<std::int64_t>(height, last); ++y) {
    xs.clear();
    for (const Edge& e : edges) {
      if (e.top <= y && y < e.bottom) xs.push_back(e.x + (y - e.top) * e.step);
    }
    std::sort(xs.begin(), xs.end());
    for (std::size_t k = 0; k + 1 < xs.size(); k += 2) {
      std::int64_t left = (xs[k] + kXYOne - 1) >> kXYShift, right = xs[k + 1] >> kXYShift;
      if (left < width && right >= 0) {
        left = std::max<std::int64_t>(left, 0);
        right = std::min<std::int64_t>(right, width - 1);
        for (std::int64_t x = left; x <= right; ++x) mask[static_cast<std::size_t>(y * width + x)] = 1;
      }
    }
  }
  return mask;
}

Contour unclip(const Corners& quad, double ratio) {
  double area = 0.0, perimeter = 0.0;
  for (std::size_t i = 0; i < 4; ++i) {
    const DPoint& a = quad[i];
    const DPoint& b = quad[(i + 1) % 4];
    area += a.x * b.y - b.x * a.y;
    perimeter += std::sqrt((b.x - a.x) * (b.x - a.x) + (b.y - a.y) * (b.y - a.y));
  }
  area = std::fabs(area) / 2.0;
  if (perimeter == 0.0) return {};
  ClipperLib::Path path;
  for (const DPoint& p : quad) path.push_back(ClipperLib::IntPoint(static_cast<ClipperLib::cInt>(p.x), static_cast<ClipperLib::cInt>(p.y)));
  ClipperLib::ClipperOffset offset;  // miter limit 2, arc tolerance 0.25: pyclipper's defaults
  offset.AddPath(path, ClipperLib::jtRound, ClipperLib::etClosedPolygon);
  ClipperLib::Paths grown;
  offset.Execute(grown, area * ratio / perimeter);
  Contour out;
  for (const ClipperLib::Path& p : grown) {
    for (const ClipperLib::IntPoint& q : p) out.push_back({static_cast<std::int64_t>(q.X), static_cast<std::int64_t>(q.Y)});
  }
  return out;
}

}  // namespace edgekit
