#include "edgekit/vision_task.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/numpy_compat.h"

namespace edgekit {
namespace {

std::string label_of(std::int64_t klass, const std::vector<std::string>& labels) {
  return klass >= 0 && klass < static_cast<std::int64_t>(labels.size()) ? labels[static_cast<std::size_t>(klass)]
                                                                        : std::to_string(klass);
}

// Python's Segmentation.summary + encode_rle: {"size", "classes": {label: percent}, "rle"}.
Json mask_json(const ClassMap& map, const std::vector<std::string>& labels) {
  std::vector<std::int64_t> counts(256, 0);
  for (std::uint8_t c : map.classes) ++counts[c];
  const double total = static_cast<double>(std::max<std::size_t>(1, map.classes.size()));
  Json size = Json::array();
  size.push(map.height);
  size.push(map.width);
  Json classes = Json::object();
  for (std::size_t c = 0; c < counts.size(); ++c) {
    if (counts[c]) classes.set(label_of(static_cast<std::int64_t>(c), labels), python_round(100.0 * counts[c] / total, 3));
  }
  Json rle = Json::array();
  for (std::size_t i = 0; i < map.classes.size();) {
    std::size_t j = i;
    while (j < map.classes.size() && map.classes[j] == map.classes[i]) ++j;
    Json run = Json::array();
    run.push(static_cast<int>(map.classes[i]));
    run.push(static_cast<long long>(j - i));
    rle.push(run);
    i = j;
  }
  Json out = Json::object();
  out.set("size", size);
  out.set("classes", classes);
  out.set("rle", rle);
  return out;
}

std::vector<const Array*> pointers(const std::vector<Array>& outputs) {
  std::vector<const Array*> out;
  for (const Array& a : outputs) out.push_back(&a);
  return out;
}

const Array& first(const std::vector<Array>& outputs) {
  if (outputs.empty()) throw Error(ExitCode::run, "the model returned no outputs", "check the bundle's model.nb");
  return outputs.front();
}

// A run-length encoded mask as pixels; empty when it is malformed.
std::vector<std::uint8_t> decode_rle(const Json& entry, std::int64_t& height, std::int64_t& width) {
  std::vector<std::uint8_t> out;
  const Json* size = entry.is_object() ? entry.find("size") : nullptr;
  const Json* rle = entry.is_object() ? entry.find("rle") : nullptr;
  if (!size || !rle || !size->is_array() || size->size() != 2 || !rle->is_array()) return out;
  height = size->at(0).as_int();
  width = size->at(1).as_int();
  for (const Json& run : rle->items()) {
    const std::int64_t n = run.at(1).as_int();
    if (n < 0 || static_cast<std::int64_t>(out.size()) + n > height * width) return {};
    out.insert(out.end(), static_cast<std::size_t>(n), static_cast<std::uint8_t>(run.at(0).as_int()));
  }
  return out;
}

}  // namespace

std::optional<VisionTask> VisionTask::read(const std::string& task_file) {
  const Json task = Json::parse(read_file_text(task_file, ExitCode::input));
  const Json* kind = task.is_object() ? task.find("kind") : nullptr;
  if (!kind || !kind->is_string()) return std::nullopt;  // the core's TaskSpec names what is wrong
  const Json* found = task.find("options");
  const Json options = found ? *found : Json::object();
  VisionTask out;
  try {
    if (kind->as_string() == "detection") {
      out.kind_ = Kind::detection;
      out.detection_ = DetectionOptions::from_json(options);
    } else if (kind->as_string() == "segmentation") {
      out.kind_ = Kind::segmentation;
      out.segmentation_ = SegmentationOptions::from_json(options);
    } else {
      return std::nullopt;
    }
  } catch (const Error& e) {
    throw Error(e.code(), task_file + ": " + e.what(), e.fix());
  }
  return out;
}

Json VisionTask::postprocess(const std::vector<Array>& outputs) const {
  Json out = Json::array();
  if (kind_ == Kind::segmentation) {
    for (const ClassMap& map : class_maps(first(outputs), segmentation_)) out.push(mask_json(map, segmentation_.labels));
    return out;
  }
  for (const auto& image : detect(pointers(outputs), detection_)) {
    Json list = Json::array();
    for (const Detection& d : image) list.push(to_json(d, detection_.labels));
    out.push(list);
  }
  return out;
}

Json VisionTask::in_image(const std::vector<Array>& outputs, const PreprocessSpec& spec, int height, int width) const {
  if (kind_ == Kind::segmentation) {
    const std::vector<ClassMap> maps = class_maps(first(outputs), segmentation_);
    if (maps.size() != 1) throw Error(ExitCode::run, "the model returned " + std::to_string(maps.size()) +
                                                         " masks for one image", "the model's output must keep the batch axis");
    return mask_json(map_to_image(maps[0], spec, height, width), segmentation_.labels);
  }
  const auto found = detect(pointers(outputs), detection_);
  if (found.size() != 1) throw Error(ExitCode::run, "the model returned " + std::to_string(found.size()) +
                                                        " detection sets for one image",
                                    detection_.rows ? "the NMS count output must hold one value per image"
                                                    : "the model's outputs must keep the batch axis");
  const Geometry g = spec.geometry(height, width);
  Json out = Json::array();
  for (const Detection& d : found[0]) {
    float box[4] = {d.box[0], d.box[1], d.box[2], d.box[3]};
    g.to_image(box);  // float32, clamped, as Python's Geometry.to_image
    Json corners = Json::array();
    for (float v : box) corners.push(python_round(static_cast<double>(v), 2));
    Json item = Json::object();
    item.set("box", corners);
    item.set("class", static_cast<long long>(d.klass));
    item.set("label", label_of(d.klass, detection_.labels));
    item.set("score", python_round(static_cast<double>(d.score), 6));
    out.push(item);
  }
  return out;
}

Json compare_detections(const Json& expected, const Json& got) {
  const std::size_t n = std::min(expected.size(), got.size());
  bool same = expected.size() == got.size();
  double corner = 0, min_iou = 1;
  for (std::size_t i = 0; i < n; ++i) {
    const Json& a = expected.at(i);
    const Json& b = got.at(i);
    same = same && a.at("class").as_int() == b.at("class").as_int();
    float ba[4], bb[4];
    for (std::size_t k = 0; k < 4; ++k) {
      ba[k] = static_cast<float>(a.at("box").at(k).as_number());
      bb[k] = static_cast<float>(b.at("box").at(k).as_number());
      corner = std::max(corner, std::fabs(a.at("box").at(k).as_number() - b.at("box").at(k).as_number()));
    }
    min_iou = std::min(min_iou, box_iou(ba, bb));
  }
  Json out = Json::object();
  out.set("count", got.size());
  out.set("expected_count", expected.size());
  out.set("same_classes", same);
  out.set("max_corner_px", corner);
  out.set("min_iou", n ? Json(min_iou) : Json());
  return out;
}

Json compare_masks(const Json& expected, const Json& got) {
  std::int64_t eh = 0, ew = 0, gh = 0, gw = 0;
  const std::vector<std::uint8_t> a = decode_rle(expected, eh, ew);
  const std::vector<std::uint8_t> b = decode_rle(got, gh, gw);
  std::int64_t differing = static_cast<std::int64_t>(std::max(a.size(), b.size()));
  if (eh == gh && ew == gw && a.size() == b.size() && static_cast<std::int64_t>(a.size()) == eh * ew) {
    differing = 0;
    for (std::size_t i = 0; i < a.size(); ++i) differing += a[i] != b[i];
  }
  Json out = Json::object();
  out.set("pixels", static_cast<long long>(a.size()));
  out.set("differing", static_cast<long long>(differing));
  return out;
}

}  // namespace edgekit
