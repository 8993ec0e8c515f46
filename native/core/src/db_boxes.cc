// DB text boxes: edgekit/tasks/ocr.py `db_boxes`, whose components come from
// cv2.connectedComponentsWithStats(connectivity=8). That call scans the bitmap in
// 2x2 blocks (rows in pairs), gives a new provisional label to a block that touches
// no earlier one, merges labels keeping the smallest, and numbers the survivors in
// order. So a component's number follows the first block it occupies in block raster
// order; all pixels of a 2x2 block are 8-neighbours, so a block holds one component.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

#include "edgekit/numpy_compat.h"
#include "edgekit/postprocess.h"

namespace edgekit {
namespace {

int find_root(std::vector<int>& parent, int i) {
  while (parent[i] != i) {
    parent[i] = parent[parent[i]];
    i = parent[i];
  }
  return i;
}

void unite(std::vector<int>& parent, int a, int b) {
  a = find_root(parent, a);
  b = find_root(parent, b);
  if (a < b) parent[b] = a;
  else if (b < a) parent[a] = b;
}

}  // namespace

std::vector<Component> connected_components(const std::uint8_t* bitmap, int height, int width) {
  if (height <= 0 || width <= 0) return {};
  const std::size_t w = static_cast<std::size_t>(width);
  std::vector<int> label(static_cast<std::size_t>(height) * w, -1);
  std::vector<int> parent;
  // Pass 1: provisional labels from the 4 already-visited 8-neighbours.
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const std::size_t i = static_cast<std::size_t>(y) * w + x;
      if (!bitmap[i]) continue;
      int mine = -1;
      const int dxs[4] = {-1, -1, 0, 1}, dys[4] = {0, -1, -1, -1};
      for (int k = 0; k < 4; ++k) {
        const int nx = x + dxs[k], ny = y + dys[k];
        if (nx < 0 || ny < 0 || nx >= width) continue;
        const int other = label[static_cast<std::size_t>(ny) * w + nx];
        if (other < 0) continue;
        if (mine < 0) mine = other;
        else unite(parent, mine, other);
      }
      if (mine < 0) {
        mine = static_cast<int>(parent.size());
        parent.push_back(mine);
      }
      label[i] = mine;
    }
  }
  // Pass 2: per root, the bounding box, the area and the first 2x2 block it touches.
  struct Acc {
    int left, top, right, bottom;
    std::int64_t area;
    std::int64_t first_block;
  };
  std::vector<int> slot(parent.size(), -1);
  std::vector<Acc> acc;
  const std::int64_t blocks_per_row = (width + 1) / 2;
  for (int y = 0; y < height; ++y) {
    for (int x = 0; x < width; ++x) {
      const int l = label[static_cast<std::size_t>(y) * w + x];
      if (l < 0) continue;
      const int root = find_root(parent, l);
      if (slot[root] < 0) {
        slot[root] = static_cast<int>(acc.size());
        acc.push_back({x, y, x, y, 0, INT64_MAX});
      }
      Acc& a = acc[slot[root]];
      a.left = std::min(a.left, x);
      a.right = std::max(a.right, x);
      a.top = std::min(a.top, y);
      a.bottom = std::max(a.bottom, y);
      a.area += 1;
      a.first_block = std::min(a.first_block, static_cast<std::int64_t>(y / 2) * blocks_per_row + x / 2);
    }
  }
  std::vector<std::size_t> order(acc.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return acc[a].first_block < acc[b].first_block; });
  std::vector<Component> out;
  out.reserve(acc.size());
  for (std::size_t i : order) {
    const Acc& a = acc[i];
    out.push_back({a.left, a.top, a.right - a.left + 1, a.bottom - a.top + 1, a.area});
  }
  return out;
}

std::vector<TextBox> db_boxes(const float* prob, int height, int width, const DbOptions& options) {
  // A zero-sized map has no components (and nothing to read); negative sides are a caller's bug.
  if (height <= 0 || width <= 0) return {};
  const std::size_t count = static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
  // numpy compares a float32 array with a Python float in float32.
  const float thresh = static_cast<float>(options.thresh);
  std::vector<std::uint8_t> bitmap(count);
  for (std::size_t i = 0; i < count; ++i) bitmap[i] = prob[i] > thresh ? 1 : 0;
  const std::vector<Component> components = connected_components(bitmap.data(), height, width);

  std::vector<TextBox> boxes;
  std::vector<float> patch;
  const std::size_t candidates = std::min(components.size(), static_cast<std::size_t>(std::max(0, options.max_candidates)));
  for (std::size_t k = 0; k < candidates; ++k) {
    const Component& c = components[k];
    if (std::min(c.width, c.height) < options.min_size) continue;
    patch.clear();
    for (int y = c.top; y < c.top + c.height; ++y) {
      const float* row = prob + static_cast<std::size_t>(y) * width + c.left;
      patch.insert(patch.end(), row, row + c.width);
    }
    const double score = numpy_mean(patch.data(), patch.size());
    if (score < options.box_thresh) continue;
    // The unclip distance of a w x h rectangle: area * ratio / perimeter.
    const double grow = static_cast<double>(static_cast<std::int64_t>(c.width) * c.height) * options.unclip_ratio /
                        (2.0 * static_cast<double>(c.width + c.height));
    // Python's max(0.0, v) / min(float(width), v) keep the first argument unless v beats it.
    const double left = c.left - grow, top = c.top - grow;
    const double right = static_cast<double>(c.left + c.width) + grow, bottom = static_cast<double>(c.top + c.height) + grow;
    const double x0 = left > 0.0 ? left : 0.0, y0 = top > 0.0 ? top : 0.0;
    const double x1 = right < width ? right : static_cast<double>(width);
    const double y1 = bottom < height ? bottom : static_cast<double>(height);
    const double narrow = (y1 - y0) < (x1 - x0) ? (y1 - y0) : (x1 - x0);
    if (narrow < options.min_size + 2) continue;
    // Coordinates are numpy float64 scalars there (numpy's round), the score a Python float.
    boxes.push_back({numpy_round(x0, 2), numpy_round(y0, 2), numpy_round(x1, 2), numpy_round(y1, 2),
                     python_round(score, 6)});
  }
  return boxes;
}

}  // namespace edgekit
