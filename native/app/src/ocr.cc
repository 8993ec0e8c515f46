#include "edgekit/ocr.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>

#include "edgekit/error.h"
#include "edgekit/numpy_compat.h"

namespace edgekit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void require_kind(Model& model, TaskKind kind) {
  if (model.kind() != kind) {
    throw Error(ExitCode::input,
                "model " + model.name() + " is a " + task_kind_name(model.kind()) + " model, not " + task_kind_name(kind),
                "pass the detection, recognition and direction models in their places");
  }
}

}  // namespace

std::vector<std::size_t> sort_boxes(const std::vector<Box>& boxes) {
  std::vector<std::size_t> order(boxes.size());
  std::iota(order.begin(), order.end(), 0);
  // Python's sorted() on the key (y0, x0): stable, so equal keys keep their order
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (boxes[a][1] != boxes[b][1]) return boxes[a][1] < boxes[b][1];
    return boxes[a][0] < boxes[b][0];
  });
  for (std::size_t i = 0; i + 1 < order.size(); ++i) {
    for (std::size_t j = i + 1; j-- > 0;) {
      const Box& a = boxes[order[j]];
      const Box& b = boxes[order[j + 1]];
      if (std::fabs(b[1] - a[1]) < kSameLinePixels && b[0] < a[0]) {
        std::swap(order[j], order[j + 1]);
      } else {
        break;
      }
    }
  }
  return order;
}

PixelRect crop_rect(const Box& box, int height, int width) {
  const double x0 = std::max(0.0, std::floor(box[0])), y0 = std::max(0.0, std::floor(box[1]));
  const double x1 = std::min(static_cast<double>(width), std::ceil(box[2]));
  const double y1 = std::min(static_cast<double>(height), std::ceil(box[3]));
  PixelRect rect;
  // numpy slicing: a start beyond the end gives an empty piece
  rect.left = static_cast<int>(std::min(x0, static_cast<double>(width)));
  rect.top = static_cast<int>(std::min(y0, static_cast<double>(height)));
  rect.width = static_cast<int>(x1) - rect.left;
  rect.height = static_cast<int>(y1) - rect.top;
  return rect;
}

namespace {

struct Projective {
  double a, b, c, d, e, f, g, h;  // x = (a s + b t + c) / (g s + h t + 1), y = (d s + e t + f) / (...)
};

// predict._square_to_quad: the unit square's corners onto the quad's (Heckbert).
Projective square_to_quad(const Quad& q) {
  const double x0 = q[0][0], y0 = q[0][1], x1 = q[1][0], y1 = q[1][1], x2 = q[2][0], y2 = q[2][1], x3 = q[3][0],
               y3 = q[3][1];
  const double sx = x0 - x1 + x2 - x3, sy = y0 - y1 + y2 - y3;
  if (sx == 0.0 && sy == 0.0) return {x1 - x0, x2 - x1, x0, y1 - y0, y2 - y1, y0, 0.0, 0.0};
  const double dx1 = x1 - x2, dx2 = x3 - x2, dy1 = y1 - y2, dy2 = y3 - y2;
  const double den = dx1 * dy2 - dx2 * dy1;
  if (den == 0.0) return {x1 - x0, x3 - x0, x0, y1 - y0, y3 - y0, y0, 0.0, 0.0};
  const double g = (sx * dy2 - dx2 * sy) / den, h = (dx1 * sy - sx * dy1) / den;
  return {x1 - x0 + g * x1, x3 - x0 + h * x3, x0, y1 - y0 + g * y1, y3 - y0 + h * y3, y0, g, h};
}

double distance(const std::array<double, 2>& a, const std::array<double, 2>& b) {
  return std::sqrt((a[0] - b[0]) * (a[0] - b[0]) + (a[1] - b[1]) * (a[1] - b[1]));
}

std::ptrdiff_t clamp_index(double v, int size) {
  return static_cast<std::ptrdiff_t>(std::min(std::max(v, 0.0), static_cast<double>(size - 1)));
}

}  // namespace

Image rotate_crop(const ImageView& image, const Quad& quad) {
  image.check();
  const int width = static_cast<int>(std::max(distance(quad[0], quad[1]), distance(quad[2], quad[3])));
  const int height = static_cast<int>(std::max(distance(quad[0], quad[3]), distance(quad[1], quad[2])));
  if (width < 1 || height < 1) return Image();
  const Projective m = square_to_quad(quad);
  const int c = image.channels;
  Image out(height, width, image.order);
  for (int v = 0; v < height; ++v) {
    const double t = static_cast<double>(v) / static_cast<double>(height);
    std::uint8_t* dst = out.row(v);
    for (int u = 0; u < width; ++u) {
      const double s = static_cast<double>(u) / static_cast<double>(width);
      const double w = m.g * s + m.h * t + 1.0;
      const double x = (m.a * s + m.b * t + m.c) / w;
      const double y = (m.d * s + m.e * t + m.f) / w;
      const double x0 = std::floor(x), y0 = std::floor(y);
      const double fx = x - x0, fy = y - y0;
      const std::ptrdiff_t xa = clamp_index(x0, image.width), xb = clamp_index(x0 + 1, image.width);
      const std::ptrdiff_t ya = clamp_index(y0, image.height), yb = clamp_index(y0 + 1, image.height);
      const std::uint8_t* ra = image.row(static_cast<int>(ya));
      const std::uint8_t* rb = image.row(static_cast<int>(yb));
      for (int k = 0; k < c; ++k) {
        const double top = static_cast<double>(ra[xa * c + k]) * (1.0 - fx) + static_cast<double>(ra[xb * c + k]) * fx;
        const double bottom = static_cast<double>(rb[xa * c + k]) * (1.0 - fx) + static_cast<double>(rb[xb * c + k]) * fx;
        const double value = std::floor(top * (1.0 - fy) + bottom * fy + 0.5);
        dst[static_cast<std::size_t>(u) * c + k] = static_cast<std::uint8_t>(std::min(std::max(value, 0.0), 255.0));
      }
    }
  }
  if (static_cast<double>(height) / static_cast<double>(width) < 1.5) return out;
  Image turned(width, height, image.order);  // np.rot90: row i of the result is column width - 1 - i
  for (int i = 0; i < width; ++i) {
    std::uint8_t* dst = turned.row(i);
    for (int j = 0; j < height; ++j) {
      std::memcpy(dst + static_cast<std::size_t>(j) * c, out.row(j) + static_cast<std::size_t>(width - 1 - i) * c, c);
    }
  }
  return turned;
}

Image rotate180(const ImageView& image) {
  image.check();
  Image out(image.height, image.width, image.order);
  const int c = image.channels;
  for (int y = 0; y < image.height; ++y) {
    const std::uint8_t* src = image.row(image.height - 1 - y);
    std::uint8_t* dst = out.row(y);
    for (int x = 0; x < image.width; ++x) {
      std::memcpy(dst + static_cast<std::size_t>(x) * c, src + static_cast<std::size_t>(image.width - 1 - x) * c, c);
    }
  }
  return out;
}

Json OcrTimes::to_json() const {
  StageTimes all = det;
  all += cls;
  all += rec;
  Json out = all.to_json();  // the stages summed over the three models
  out.set("crop", python_round(crop_ms, 3));
  out.set("total", python_round(total_ms, 3));
  out.set("det", det.to_json());
  out.set("cls", cls.to_json());
  out.set("rec", rec.to_json());
  return out;
}

OcrResult ocr_system(const ImageView& image, Model& det, Model& rec, Model* cls, double cls_thresh) {
  const auto start = Clock::now();
  require_kind(det, TaskKind::ocr_det);
  require_kind(rec, TaskKind::ocr_rec);
  if (cls) require_kind(*cls, TaskKind::ocr_cls);
  image.check();

  OcrResult out;
  Prediction found = det.predict(image);
  out.times.det = found.times;
  std::vector<Box> boxes;
  for (const Json& item : found.result.items()) {
    const Json& b = item.at("box");
    boxes.push_back({b.at(0).as_number(), b.at(1).as_number(), b.at(2).as_number(), b.at(3).as_number()});
  }
  for (std::size_t index : sort_boxes(boxes)) {
    auto step = Clock::now();
    ImageView piece;
    Image warped;
    if (const Json* corners = found.result.at(index).find("quad")) {
      Quad quad{};
      for (std::size_t k = 0; k < 4; ++k) quad[k] = {corners->at(k).at(0).as_number(), corners->at(k).at(1).as_number()};
      warped = rotate_crop(image, quad);
      if (warped.height < 1 || warped.width < 1) continue;
      piece = warped.view();
    } else {
      const PixelRect r = crop_rect(boxes[index], image.height, image.width);
      if (r.height < 1 || r.width < 1) continue;
      piece = image.crop(r.top, r.left, r.height, r.width);
    }
    out.times.crop_ms += ms_since(step);

    Json line = Json::object();
    line.set("box", found.result.at(index).at("box"));
    if (const Json* corners = found.result.at(index).find("quad")) line.set("quad", *corners);
    line.set("det_score", found.result.at(index).at("score"));
    Image turned;
    if (cls) {
      Prediction direction = cls->predict(piece);
      out.times.cls += direction.times;
      const std::string& label = direction.result.at("label").as_string();
      const double score = direction.result.at("score").as_number();
      line.set("angle", label);
      line.set("angle_score", score);
      if (label == "180" && score > cls_thresh) {
        step = Clock::now();
        turned = rotate180(piece);
        piece = turned.view();
        out.times.crop_ms += ms_since(step);
      }
    }
    Prediction read = rec.predict(piece);
    out.times.rec += read.times;
    line.set("text", read.result.at("text"));
    line.set("confidence", read.result.at("confidence"));
    out.lines.push(line);
  }
  out.times.total_ms = ms_since(start);
  return out;
}

}  // namespace edgekit
