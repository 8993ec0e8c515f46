#include "edgekit/detection.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "edgekit/error.h"

namespace edgekit {
namespace {

Error bad(const std::string& kind, const std::string& what, const std::string& fix) {
  return Error(ExitCode::input, "task " + kind + " " + what, fix);
}

void check_known(const std::string& kind, const Json& options, const std::vector<std::string>& known) {
  for (const auto& member : options.members()) {
    if (std::find(known.begin(), known.end(), member.first) == known.end()) {
      std::string names;
      for (const auto& k : known) names += (names.empty() ? "" : ", ") + k;
      throw bad(kind, "has an unknown option: " + member.first, "known options: " + names);
    }
  }
}

double number(const std::string& kind, const Json& options, const char* key, double fallback, double low, double high) {
  const Json* v = options.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->as_number() >= low && v->as_number() <= high)) {
    throw bad(kind, std::string("option ") + key + " = " + v->dump() + " is not a number in [" + json_number(low) +
                        ", " + json_number(high) + "]",
              std::string("write ") + key + " as a number, e.g. " + json_number(fallback));
  }
  return v->as_number();
}

std::string choice(const std::string& kind, const Json& options, const char* key, const std::string& fallback,
                   const std::vector<std::string>& allowed) {
  const Json* v = options.find(key);
  if (v == nullptr) return fallback;
  if (!v->is_string() || std::find(allowed.begin(), allowed.end(), v->as_string()) == allowed.end()) {
    std::string names;
    for (const auto& a : allowed) names += (names.empty() ? "" : ", ") + a;
    throw bad(kind, std::string("option ") + key + " = " + v->dump() + " is unknown", "use one of " + names);
  }
  return v->as_string();
}

std::vector<std::string> labels_of(const std::string& kind, const Json& options) {
  std::vector<std::string> out;
  const Json* v = options.find("labels");
  if (v == nullptr) return out;
  if (!v->is_array()) throw bad(kind, "option labels is not a list of class names", "e.g. labels = [\"cat\", \"dog\"]");
  for (const Json& item : v->items()) {
    if (!item.is_string()) throw bad(kind, "option labels is not a list of class names", "e.g. labels = [\"cat\"]");
    out.push_back(item.as_string());
  }
  return out;
}

Error shape_error(const DetectionOptions& o, const std::string& what) {
  return Error(ExitCode::input, std::string("task detection (") + (o.rows ? "nms" : o.decoded ? "decoded" : "anchor_free") +
                                    " head): " + what,
               "fix task options strides/reg_max/num_classes/head to match the model's outputs");
}

std::string shapes_text(const std::vector<const Array*>& outputs) {
  std::string out = "[";
  for (std::size_t i = 0; i < outputs.size(); ++i) out += (i ? ", " : "") + shape_text(outputs[i]->shape);
  return out + "]";
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

// One box edge from its DFL bins: the softmax-weighted mean of reg_max + 1 bins `step` values apart (reg_max 0: the
// value itself), in stride units.
float dfl_side(const float* bin, int reg_max, std::int64_t step) {
  if (reg_max == 0) return bin[0];
  float top = bin[0];
  for (int j = 1; j <= reg_max; ++j) top = std::max(top, bin[j * step]);
  float sum = 0, weighted = 0;
  for (int j = 0; j <= reg_max; ++j) {
    const float e = std::exp(bin[j * step] - top);
    sum += e;
    weighted += e * static_cast<float>(j);
  }
  return weighted / sum;
}

// All anchors of one image: boxes (4 floats each) and scores (classes each), as Python's candidates().
struct Anchors {
  std::vector<float> boxes, scores;
  std::int64_t classes = 0;
};

void check_classes(const DetectionOptions& o, std::int64_t count, const std::string& where) {
  if (o.num_classes != 0 && count != o.num_classes) {
    throw shape_error(o, where + " scores " + std::to_string(count) + " classes, the task names " +
                             std::to_string(o.num_classes));
  }
}

std::string list_text(const std::vector<int>& values) {
  std::string out;
  for (int v : values) out += (out.empty() ? "" : ", ") + std::to_string(v);
  return "[" + out + "]";
}

// The cells' grid of every stride of a flattened head: ceil(input / stride), Python's Detection._grids.
std::vector<std::pair<std::int64_t, std::int64_t>> grids(const DetectionOptions& o) {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (int s : o.strides) out.emplace_back((o.input_size[0] + s - 1) / s, (o.input_size[1] + s - 1) / s);
  return out;
}

// Outputs that fit no anchor-free layout: the shapes seen and what each layout wanted (Python's _no_layout).
Error no_layout(const DetectionOptions& o, const std::vector<const Array*>& outputs, const std::string& why) {
  const std::string bins = std::to_string(4 * (o.reg_max + 1));
  const std::string levels = std::to_string(o.strides.size());
  std::string flat;
  if (o.input_size.empty()) {
    flat = "flattened [N, h*w, C] then [N, h*w, " + bins + "] per stride (input size unknown)";
  } else {
    std::string sizes;
    for (const auto& g : grids(o)) sizes += (sizes.empty() ? "" : ", ") + std::to_string(g.first) + "x" + std::to_string(g.second);
    flat = "flattened [N, h*w, C] x " + levels + ", then [N, h*w, " + bins + "] x " + levels + " with h x w = " + sizes +
           " (input " + std::to_string(o.input_size[0]) + "x" + std::to_string(o.input_size[1]) + ")";
  }
  return shape_error(o, "outputs " + shapes_text(outputs) + " match no head layout (" + why + "); tried: maps [N, C, h, w] x " +
                            levels + ", then [N, " + bins + ", h, w] x " + levels + " for strides " + list_text(o.strides) +
                            "; " + flat);
}

// PicoDet-style flattened heads: scores [N, h*w, C] per stride, then DFL bins [N, h*w, 4 (reg_max + 1)], the cells
// row-major over ceil(H / s) x ceil(W / s) of the input (task option input_size).
std::vector<Anchors> flat_anchors(const std::vector<const Array*>& outputs, const DetectionOptions& o) {
  if (o.input_size.empty()) {
    throw shape_error(o, "flattened outputs " + shapes_text(outputs) +
                             " need the input's height and width to lay out their cells, and the task has no input_size");
  }
  const std::size_t levels = o.strides.size();
  const std::int64_t bins = 4 * (o.reg_max + 1);
  const auto grid = grids(o);
  const std::int64_t batch = outputs[0]->shape[0];
  for (std::size_t i = 0; i < levels; ++i) {
    const Shape& c = outputs[i]->shape;
    const Shape& r = outputs[levels + i]->shape;
    const std::int64_t cells = grid[i].first * grid[i].second;
    if (c[1] != cells || r[1] != cells || r[2] != bins || c[0] != r[0] || c[0] != batch) {
      throw no_layout(o, outputs, "stride " + std::to_string(o.strides[i]) + " wants [N, " + std::to_string(cells) +
                                      ", C] and [N, " + std::to_string(cells) + ", " + std::to_string(bins) + "]");
    }
    check_classes(o, c[2], "output " + std::to_string(i));
  }
  std::vector<Anchors> images;
  const float offset = static_cast<float>(o.cell_offset);
  for (std::int64_t n = 0; n < batch; ++n) {
    Anchors a;
    a.classes = outputs[0]->shape[2];
    for (std::size_t i = 0; i < levels; ++i) {
      const std::int64_t w = grid[i].second, cells = grid[i].first * w, classes = outputs[i]->shape[2];
      const float* cls = outputs[i]->as<float>() + n * cells * classes;
      const float* reg = outputs[levels + i]->as<float>() + n * cells * bins;
      const float stride = static_cast<float>(o.strides[i]);
      for (std::int64_t cell = 0; cell < cells; ++cell) {
        float sides[4];
        for (int k = 0; k < 4; ++k)
          sides[k] = dfl_side(reg + cell * bins + static_cast<std::int64_t>(k) * (o.reg_max + 1), o.reg_max, 1) * stride;
        const float cx = (static_cast<float>(cell % w) + offset) * stride;
        const float cy = (static_cast<float>(cell / w) + offset) * stride;
        a.boxes.insert(a.boxes.end(), {cx - sides[0], cy - sides[1], cx + sides[2], cy + sides[3]});
        for (std::int64_t k = 0; k < classes; ++k) {
          const float v = cls[cell * classes + k];
          a.scores.push_back(o.sigmoid ? sigmoid(v) : v);
        }
      }
    }
    images.push_back(std::move(a));
  }
  return images;
}

std::vector<Anchors> anchors(const std::vector<const Array*>& outputs, const DetectionOptions& o) {
  for (const Array* a : outputs) {
    if (a->dtype != DType::float32) throw shape_error(o, std::string("reads float32 outputs, got ") + dtype_name(a->dtype));
  }
  std::vector<Anchors> images;
  if (o.decoded) {
    if (outputs.size() != 2) {
      throw shape_error(o, "expects 2 outputs (boxes [N, M, 4], scores [N, M, C]), the model gives " +
                               std::to_string(outputs.size()) + ": " + shapes_text(outputs));
    }
    const Shape& b = outputs[0]->shape;
    const Shape& s = outputs[1]->shape;
    if (b.size() != 3 || b[2] != 4 || s.size() != 3 || s[0] != b[0] || s[1] != b[1]) {
      throw shape_error(o, "output 0 must be boxes [N, M, 4] and output 1 scores [N, M, C]; got " + shapes_text(outputs));
    }
    check_classes(o, s[2], "output 1");
    const float* bp = outputs[0]->as<float>();
    const float* sp = outputs[1]->as<float>();
    for (std::int64_t n = 0; n < b[0]; ++n) {
      Anchors a;
      a.classes = s[2];
      a.boxes.assign(bp + n * b[1] * 4, bp + (n + 1) * b[1] * 4);
      a.scores.assign(sp + n * s[1] * s[2], sp + (n + 1) * s[1] * s[2]);
      if (o.sigmoid) for (float& v : a.scores) v = sigmoid(v);
      images.push_back(std::move(a));
    }
    return images;
  }
  const std::size_t levels = o.strides.size();
  bool flat = !outputs.empty(), maps = !outputs.empty();
  for (const Array* a : outputs) {
    flat = flat && a->shape.size() == 3;
    maps = maps && a->shape.size() == 4;
  }
  if (outputs.size() != 2 * levels) {
    if (flat) {
      throw no_layout(o, outputs, std::to_string(2 * levels) + " outputs wanted, the model gives " +
                                      std::to_string(outputs.size()));
    }
    std::string strides;
    for (int st : o.strides) strides += (strides.empty() ? "" : ", ") + std::to_string(st);
    throw shape_error(o, "expects " + std::to_string(2 * levels) + " outputs (" + std::to_string(levels) +
                             " class maps, then " + std::to_string(levels) + " box maps, for strides [" + strides +
                             "]), the model gives " + std::to_string(outputs.size()) + ": " + shapes_text(outputs));
  }
  if (!maps && !flat) throw no_layout(o, outputs, "neither all 4-D (maps) nor all 3-D (flattened)");
  if (flat) return flat_anchors(outputs, o);
  const std::int64_t bins = 4 * (o.reg_max + 1);
  std::int64_t batch = -1, size_h = -1, size_w = -1;
  for (std::size_t i = 0; i < levels; ++i) {
    const Shape& c = outputs[i]->shape;
    const Shape& r = outputs[levels + i]->shape;
    const int stride = o.strides[i];
    if (c.size() != 4 || r.size() != 4 || r[1] != bins || c[2] != r[2] || c[3] != r[3] || c[0] != r[0]) {
      throw shape_error(o, "output " + std::to_string(i) + " (class map) and output " + std::to_string(levels + i) +
                               " (box map) of stride " + std::to_string(stride) + " must be [N, C, h, w] and [N, " +
                               std::to_string(bins) + ", h, w] (4 x (reg_max " + std::to_string(o.reg_max) +
                               " + 1)); got " + shape_text(c) + " and " + shape_text(r));
    }
    check_classes(o, c[1], "output " + std::to_string(i));
    if (size_h >= 0 && (c[2] * stride != size_h || c[3] * stride != size_w)) {
      throw shape_error(o, "output " + std::to_string(i) + " is " + std::to_string(c[2]) + "x" + std::to_string(c[3]) +
                               " at stride " + std::to_string(stride) + ", earlier levels cover " +
                               std::to_string(size_h) + "x" + std::to_string(size_w) + " px: the strides are wrong");
    }
    size_h = c[2] * stride;
    size_w = c[3] * stride;
    batch = c[0];
  }
  const float offset = static_cast<float>(o.cell_offset);
  for (std::int64_t n = 0; n < batch; ++n) {
    Anchors a;
    a.classes = outputs[0]->shape[1];
    for (std::size_t i = 0; i < levels; ++i) {
      const Shape& c = outputs[i]->shape;
      const std::int64_t h = c[2], w = c[3], cells = h * w, classes = c[1];
      const float* cls = outputs[i]->as<float>() + n * classes * cells;
      const float* reg = outputs[levels + i]->as<float>() + n * bins * cells;
      const float stride = static_cast<float>(o.strides[i]);
      for (std::int64_t cell = 0; cell < cells; ++cell) {
        float sides[4];
        for (int k = 0; k < 4; ++k)
          sides[k] = dfl_side(reg + static_cast<std::int64_t>(k) * (o.reg_max + 1) * cells + cell, o.reg_max, cells) *
                     stride;
        const float cx = (static_cast<float>(cell % w) + offset) * stride;
        const float cy = (static_cast<float>(cell / w) + offset) * stride;
        a.boxes.insert(a.boxes.end(), {cx - sides[0], cy - sides[1], cx + sides[2], cy + sides[3]});
        for (std::int64_t k = 0; k < classes; ++k) {
          const float v = cls[k * cells + cell];
          a.scores.push_back(o.sigmoid ? sigmoid(v) : v);
        }
      }
    }
    images.push_back(std::move(a));
  }
  return images;
}

}  // namespace

DetectionOptions DetectionOptions::from_json(const Json& options) {
  const std::string kind = "detection";
  check_known(kind, options, {"head", "strides", "reg_max", "cell_offset", "activation", "score_threshold", "nms_iou",
                              "nms_top_k", "max_detections", "f1_threshold", "labels", "num_classes", "nms",
                              "post_threshold", "use_gaussian", "gaussian_sigma", "input_size"});
  DetectionOptions o;
  const std::string head = choice(kind, options, "head", "anchor_free", {"anchor_free", "decoded", "nms"});
  o.decoded = head == "decoded";
  o.rows = head == "nms";
  o.sigmoid = choice(kind, options, "activation", "sigmoid", {"sigmoid", "none"}) == "sigmoid";
  if (const Json* v = options.find("strides")) {
    bool ok = v->is_array() && v->size() > 0;
    std::vector<int> strides;
    if (ok) {
      for (const Json& s : v->items()) {
        ok = ok && s.is_integer() && s.as_int() >= 1 && s.as_int() <= 512;
        if (ok) strides.push_back(static_cast<int>(s.as_int()));
      }
    }
    if (!ok) throw bad(kind, "option strides = " + v->dump() + " is not a list of strides", "e.g. strides = [8, 16, 32]");
    o.strides = strides;
  }
  if (const Json* v = options.find("input_size")) {
    bool ok = v->is_array() && (v->size() == 0 || v->size() == 2);
    std::vector<int> size;
    if (ok) {
      for (const Json& d : v->items()) {
        ok = ok && d.is_integer() && d.as_int() >= 1 && d.as_int() <= 16384;
        if (ok) size.push_back(static_cast<int>(d.as_int()));
      }
    }
    if (!ok) {
      throw bad(kind, "option input_size = " + v->dump() + " is not [height, width]",
                "e.g. input_size = [800, 608], or leave it out (the build takes it from the data)");
    }
    o.input_size = size;
  }
  o.labels = labels_of(kind, options);
  o.num_classes = static_cast<int>(number(kind, options, "num_classes", static_cast<double>(o.labels.size()), 0, 100000));
  if (!o.labels.empty() && o.num_classes != static_cast<int>(o.labels.size())) {
    throw bad(kind, ": num_classes = " + std::to_string(o.num_classes) + " but " + std::to_string(o.labels.size()) +
                        " labels",
              "give one label per class, or leave num_classes out");
  }
  o.reg_max = static_cast<int>(number(kind, options, "reg_max", 7, 0, 64));
  o.cell_offset = number(kind, options, "cell_offset", 0.5, 0, 1);
  o.score_threshold = number(kind, options, "score_threshold", 0.05, 0, 1);
  o.nms_iou = number(kind, options, "nms_iou", 0.5, 0, 1);
  o.nms_top_k = static_cast<int>(number(kind, options, "nms_top_k", 1000, 1, 100000));
  o.max_detections = static_cast<int>(number(kind, options, "max_detections", 100, 1, 10000));
  o.f1_threshold = number(kind, options, "f1_threshold", 0.5, 0, 1);
  o.matrix = choice(kind, options, "nms", "greedy", {"greedy", "matrix"}) == "matrix";
  o.post_threshold = number(kind, options, "post_threshold", 0.0, 0, 1);
  o.gaussian_sigma = number(kind, options, "gaussian_sigma", 2.0, 0, 1000);
  if (const Json* v = options.find("use_gaussian")) {
    if (v->type() != Json::Type::boolean) {
      throw bad(kind, "option use_gaussian = " + v->dump() + " is not true or false", "write use_gaussian = true or false");
    }
    o.use_gaussian = v->as_bool();
  }
  return o;
}

double box_iou(const float* a, const float* b) {
  const double ix = std::max(0.0, std::min<double>(a[2], b[2]) - std::max<double>(a[0], b[0]));
  const double iy = std::max(0.0, std::min<double>(a[3], b[3]) - std::max<double>(a[1], b[1]));
  const double inter = ix * iy;
  const double area_a = (static_cast<double>(a[2]) - a[0]) * (static_cast<double>(a[3]) - a[1]);
  const double area_b = (static_cast<double>(b[2]) - b[0]) * (static_cast<double>(b[3]) - b[1]);
  const double uni = area_a + area_b - inter;
  return uni > 0 ? inter / uni : 0.0;
}

std::vector<std::size_t> nms(const std::vector<Detection>& candidates, double iou, int top_k, int max_detections) {
  std::vector<std::size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t x, std::size_t y) { return candidates[x].score > candidates[y].score; });
  if (order.size() > static_cast<std::size_t>(top_k)) order.resize(static_cast<std::size_t>(top_k));
  std::vector<std::size_t> kept;
  std::map<std::int64_t, std::vector<std::size_t>> per_class;
  for (std::size_t i : order) {
    auto& mine = per_class[candidates[i].klass];
    bool suppressed = false;
    for (std::size_t j : mine) suppressed = suppressed || box_iou(candidates[i].box, candidates[j].box) > iou;
    if (suppressed) continue;
    mine.push_back(i);
    kept.push_back(i);
    if (kept.size() == static_cast<std::size_t>(max_detections)) break;
  }
  return kept;
}

std::vector<std::size_t> matrix_nms(const std::vector<Detection>& candidates, const DetectionOptions& options,
                                    std::vector<float>& decayed) {
  std::map<std::int64_t, std::vector<std::size_t>> per_class;   // increasing class, candidate order within
  for (std::size_t i = 0; i < candidates.size(); ++i) per_class[candidates[i].klass].push_back(i);
  std::vector<std::size_t> picked;
  std::vector<float> scores;
  const float post = static_cast<float>(options.post_threshold);
  for (auto& entry : per_class) {
    std::vector<std::size_t>& mine = entry.second;
    std::stable_sort(mine.begin(), mine.end(),
                     [&](std::size_t x, std::size_t y) { return candidates[x].score > candidates[y].score; });
    if (mine.size() > static_cast<std::size_t>(options.nms_top_k)) mine.resize(static_cast<std::size_t>(options.nms_top_k));
    const std::size_t n = mine.size();
    std::vector<double> iou(n * n, 0.0), iou_max(n, 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        iou[i * n + j] = box_iou(candidates[mine[i]].box, candidates[mine[j]].box);
        iou_max[i] = std::max(iou_max[i], iou[i * n + j]);
      }
    }
    for (std::size_t i = 0; i < n; ++i) {
      double decay = 1.0;
      for (std::size_t j = 0; j < i; ++j) {
        const double v = iou[i * n + j];
        const double ratio = options.use_gaussian ? std::exp((iou_max[j] * iou_max[j] - v * v) * options.gaussian_sigma)
                                                  : (1.0 - v) / (1.0 - iou_max[j]);
        decay = ratio < decay ? ratio : decay;   // NaN leaves it unchanged
      }
      const float score = static_cast<float>(decay * static_cast<double>(candidates[mine[i]].score));
      if (score > post) {
        picked.push_back(mine[i]);
        scores.push_back(score);
      }
    }
  }
  std::vector<std::size_t> order(picked.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return scores[x] > scores[y]; });
  if (order.size() > static_cast<std::size_t>(options.max_detections)) {
    order.resize(static_cast<std::size_t>(options.max_detections));
  }
  std::vector<std::size_t> kept;
  decayed.clear();
  for (std::size_t k : order) {
    kept.push_back(picked[k]);
    decayed.push_back(scores[k]);
  }
  return kept;
}

namespace {

// Head "nms": the graph ran NMS (multiclass_nms3): rows [K, 6] (class, score, x0, y0, x1, y1) of all images one after
// the other, split by the integer counts [N]; per image the rows above score_threshold, best first (stable), capped.
std::vector<std::vector<Detection>> nms_rows(const std::vector<const Array*>& outputs, const DetectionOptions& o) {
  if (outputs.size() != 2) {
    throw shape_error(o, "expects 2 outputs (rows [K, 6], counts [N]), the model gives " +
                             std::to_string(outputs.size()) + ": " + shapes_text(outputs));
  }
  const Array& rows = *outputs[0];
  const Array& counts = *outputs[1];
  const bool int_counts = counts.dtype == DType::int32 || counts.dtype == DType::int64;
  const bool rows_ok = rows.dtype == DType::float32 &&
                       ((rows.shape.size() == 2 && rows.shape[1] == 6) || element_count(rows.shape) == 0);
  if (counts.shape.size() != 1 || !int_counts || !rows_ok) {
    throw shape_error(o, "output 0 must be rows [K, 6] (class, score, x0, y0, x1, y1) and output 1 integer counts [N]; "
                         "got " + shapes_text(outputs) + " (" + dtype_name(rows.dtype) + ", " + dtype_name(counts.dtype) + ")");
  }
  const std::int64_t total = element_count(rows.shape) / 6;
  std::vector<std::int64_t> per(static_cast<std::size_t>(counts.shape[0]));
  std::int64_t sum = 0;
  bool fits = true;
  for (std::size_t i = 0; i < per.size(); ++i) {
    per[i] = counts.dtype == DType::int32 ? counts.as<std::int32_t>()[i] : counts.as<std::int64_t>()[i];
    fits = fits && per[i] >= 0;
    sum += per[i];
  }
  if (!fits || sum > total) {
    std::string listed;
    for (std::int64_t c : per) listed += (listed.empty() ? "" : ", ") + std::to_string(c);
    throw shape_error(o, "the counts [" + listed + "] do not fit the " + std::to_string(total) + " rows");
  }
  const float threshold = static_cast<float>(o.score_threshold);
  const float* r = total ? rows.as<float>() : nullptr;
  std::vector<std::vector<Detection>> found;
  std::int64_t start = 0;
  for (std::int64_t count : per) {
    std::vector<Detection> image;
    for (std::int64_t k = start; k < start + count; ++k) {
      const float* row = r + 6 * k;
      if (!(row[1] > threshold)) continue;
      Detection d;
      d.klass = static_cast<std::int64_t>(row[0]);
      d.score = row[1];
      std::copy(row + 2, row + 6, d.box);
      if (o.num_classes != 0 && (d.klass < 0 || d.klass >= o.num_classes)) {
        throw shape_error(o, "output 0 names class " + std::to_string(d.klass) + ", the task names " +
                                 std::to_string(o.num_classes));
      }
      image.push_back(d);
    }
    start += count;
    std::stable_sort(image.begin(), image.end(), [](const Detection& x, const Detection& y) { return x.score > y.score; });
    if (image.size() > static_cast<std::size_t>(o.max_detections)) image.resize(static_cast<std::size_t>(o.max_detections));
    found.push_back(std::move(image));
  }
  return found;
}

}  // namespace

std::vector<std::vector<Detection>> detect(const std::vector<const Array*>& outputs, const DetectionOptions& options) {
  if (options.rows) return nms_rows(outputs, options);
  std::vector<std::vector<Detection>> found;
  const float threshold = static_cast<float>(options.score_threshold);
  for (const Anchors& a : anchors(outputs, options)) {
    std::vector<Detection> candidates;
    const std::size_t count = a.boxes.size() / 4;
    for (std::size_t i = 0; i < count; ++i) {        // anchor-major, class-minor: Python's np.nonzero order
      for (std::int64_t k = 0; k < a.classes; ++k) {
        const float s = a.scores[i * static_cast<std::size_t>(a.classes) + static_cast<std::size_t>(k)];
        if (!(s > threshold)) continue;
        Detection d;
        std::copy(a.boxes.begin() + static_cast<std::ptrdiff_t>(4 * i),
                  a.boxes.begin() + static_cast<std::ptrdiff_t>(4 * i + 4), d.box);
        d.score = s;
        d.klass = k;
        candidates.push_back(d);
      }
    }
    std::vector<Detection> kept;
    if (options.matrix) {
      std::vector<float> decayed;
      const auto picked = matrix_nms(candidates, options, decayed);
      for (std::size_t k = 0; k < picked.size(); ++k) {
        kept.push_back(candidates[picked[k]]);
        kept.back().score = decayed[k];
      }
    } else {
      for (std::size_t i : nms(candidates, options.nms_iou, options.nms_top_k, options.max_detections)) {
        kept.push_back(candidates[i]);
      }
    }
    found.push_back(std::move(kept));
  }
  return found;
}

Json to_json(const Detection& value, const std::vector<std::string>& labels) {
  Json out = Json::object();
  Json box = Json::array();
  for (float v : value.box) box.push(Json(static_cast<double>(v)));
  out.set("box", box);
  out.set("class", Json(static_cast<long long>(value.klass)));
  out.set("label", value.klass < static_cast<std::int64_t>(labels.size()) ? labels[static_cast<std::size_t>(value.klass)]
                                                                         : std::to_string(value.klass));
  out.set("score", Json(static_cast<double>(value.score)));
  return out;
}

// --- segmentation -------------------------------------------------------------------

SegmentationOptions SegmentationOptions::from_json(const Json& options) {
  const std::string kind = "segmentation";
  check_known(kind, options, {"labels", "threshold", "activation", "ignore_index"});
  SegmentationOptions o;
  o.labels = labels_of(kind, options);
  o.sigmoid = choice(kind, options, "activation", "sigmoid", {"sigmoid", "none"}) == "sigmoid";
  o.threshold = number(kind, options, "threshold", 0.5, -1e6, 1e6);
  o.ignore_index = static_cast<int>(number(kind, options, "ignore_index", 255, 0, 255));
  return o;
}

std::vector<ClassMap> class_maps(const Array& output, const SegmentationOptions& o) {
  const Shape& s = output.shape;
  std::vector<ClassMap> maps;
  if (s.size() == 3) {
    for (std::int64_t n = 0; n < s[0]; ++n) {
      ClassMap m{static_cast<int>(s[1]), static_cast<int>(s[2]), {}};
      const std::int64_t cells = s[1] * s[2];
      for (std::int64_t i = 0; i < cells; ++i) {
        double v = 0;
        if (output.dtype == DType::float32) v = output.as<float>()[n * cells + i];
        else if (output.dtype == DType::int64) v = static_cast<double>(output.as<std::int64_t>()[n * cells + i]);
        else if (output.dtype == DType::int32) v = output.as<std::int32_t>()[n * cells + i];
        else throw Error(ExitCode::input, std::string("task segmentation reads a float32 or integer class map, got ") +
                                              dtype_name(output.dtype), "pass the model's output as Lite returns it");
        m.classes.push_back(static_cast<std::uint8_t>(static_cast<std::int64_t>(v)));
      }
      maps.push_back(std::move(m));
    }
    return maps;
  }
  if (s.size() != 4 || output.dtype != DType::float32) {
    throw Error(ExitCode::input, "task segmentation reads scores [N, C, h, w] or a class map [N, h, w]; the model's "
                                 "first output has shape " + shape_text(s),
                "pick the task kind that matches the model");
  }
  if (!o.labels.empty() && s[1] != 1 && s[1] != static_cast<std::int64_t>(o.labels.size())) {
    throw Error(ExitCode::input, "the model's output 0 scores " + std::to_string(s[1]) + " classes, the task names " +
                                     std::to_string(o.labels.size()),
                "give one label per output channel (labels)");
  }
  const std::int64_t classes = s[1], cells = s[2] * s[3];
  const float threshold = static_cast<float>(o.threshold);
  for (std::int64_t n = 0; n < s[0]; ++n) {
    ClassMap m{static_cast<int>(s[2]), static_cast<int>(s[3]), std::vector<std::uint8_t>(static_cast<std::size_t>(cells))};
    const float* p = output.as<float>() + n * classes * cells;
    for (std::int64_t i = 0; i < cells; ++i) {
      if (classes == 1) {
        const float v = o.sigmoid ? sigmoid(p[i]) : p[i];
        m.classes[static_cast<std::size_t>(i)] = v > threshold ? 1 : 0;
        continue;
      }
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < classes; ++k) best = p[k * cells + i] > p[best * cells + i] ? k : best;
      m.classes[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(best);
    }
    maps.push_back(std::move(m));
  }
  return maps;
}

ClassMap resize_nearest(const ClassMap& map, int height, int width) {
  if (map.height == height && map.width == width) return map;
  ClassMap out{height, width, std::vector<std::uint8_t>(static_cast<std::size_t>(height) * width)};
  for (int y = 0; y < height; ++y) {
    const std::int64_t sy = std::min<std::int64_t>((2LL * y + 1) * map.height / (2LL * height), map.height - 1);
    for (int x = 0; x < width; ++x) {
      const std::int64_t sx = std::min<std::int64_t>((2LL * x + 1) * map.width / (2LL * width), map.width - 1);
      out.classes[static_cast<std::size_t>(y) * width + x] = map.classes[static_cast<std::size_t>(sy * map.width + sx)];
    }
  }
  return out;
}

ClassMap map_to_image(const ClassMap& map, const PreprocessSpec& spec, int height, int width) {
  const Geometry g = spec.geometry(height, width);
  int th = height, tw = width;
  if (spec.crop) {
    th = spec.crop->height;
    tw = spec.crop->width;
  } else if (spec.resize) {
    th = spec.resize->height;
    tw = spec.resize->width;
  }
  const ClassMap tensor = resize_nearest(map, th, tw);
  const int top = std::max(0, g.top), left = std::max(0, g.left);
  const int bottom = std::min(th, std::max(top + 1, g.top + g.resized_height));
  const int right = std::min(tw, std::max(left + 1, g.left + g.resized_width));
  ClassMap part{bottom - top, right - left, {}};
  for (int y = top; y < bottom; ++y) {
    const auto row = tensor.classes.begin() + static_cast<std::ptrdiff_t>(y) * tw;
    part.classes.insert(part.classes.end(), row + left, row + right);
  }
  return resize_nearest(part, height, width);
}

}  // namespace edgekit
