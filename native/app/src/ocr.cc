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
    const PixelRect r = crop_rect(boxes[index], image.height, image.width);
    if (r.height < 1 || r.width < 1) continue;
    ImageView piece = image.crop(r.top, r.left, r.height, r.width);
    out.times.crop_ms += ms_since(step);

    Json line = Json::object();
    line.set("box", found.result.at(index).at("box"));
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
