#include "edgekit/selftest.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/decode.h"
#include "edgekit/file_io.h"
#include "edgekit/error.h"
#include "edgekit/numpy_compat.h"
#include "edgekit/vision_task.h"

namespace edgekit {
namespace fs = std::filesystem;

namespace {

const char* const kScoreKeys[] = {"score", "confidence", "det_score", "angle_score"};

bool is_score_key(const std::string& key) {
  for (const char* k : kScoreKeys) {
    if (key == k) return true;
  }
  return false;
}

double value_at(const Array& a, std::size_t i) {
  switch (a.dtype) {
    case DType::float32: return a.as<float>()[i];
    case DType::float64: return a.as<double>()[i];
    case DType::int32: return a.as<std::int32_t>()[i];
    case DType::int64: return static_cast<double>(a.as<std::int64_t>()[i]);
    case DType::int8: return a.as<std::int8_t>()[i];
    case DType::uint8: return a.as<std::uint8_t>()[i];
    default: break;
  }
  throw Error(ExitCode::input, std::string("golden outputs of dtype ") + dtype_name(a.dtype) + " cannot be compared",
              "the self-test compares float and integer outputs");
}

// One output of `samples` samples against its golden array: parity.py's max abs and
// mean per-sample cosine (both-zero samples count 1, undefined ones 0).
struct OutputStats {
  double max_abs = 0;
  double cosine = 1;
  bool finite = true;
};

OutputStats compare_output(const Array& expected, const Array& got, std::int64_t samples) {
  if (expected.count() != got.count()) {
    throw Error(ExitCode::run,
                "an output has " + std::to_string(got.count()) + " values, the golden file " +
                    std::to_string(expected.count()) + " (" + shape_text(got.shape) + " vs " + shape_text(expected.shape) + ")",
                "the model and its golden files do not belong together; package them again");
  }
  const std::size_t n = static_cast<std::size_t>(expected.count());
  // No samples would make every check pass on no evidence; uneven ones index past the end.
  if (samples < 1 || n % static_cast<std::size_t>(samples) != 0) {
    throw Error(ExitCode::input,
                "a golden output of " + std::to_string(n) + " values does not split into " + std::to_string(samples) +
                    " samples",
                "the bundle's golden files do not belong together; rebuild the bundle with `edgekit build`");
  }
  OutputStats s;
  const std::size_t per = n / static_cast<std::size_t>(samples);
  double cosines = 0;
  for (std::int64_t k = 0; k < samples; ++k) {
    double dot = 0, na = 0, nb = 0;
    for (std::size_t i = static_cast<std::size_t>(k) * per; i < static_cast<std::size_t>(k + 1) * per; ++i) {
      const double a = value_at(expected, i), b = value_at(got, i);
      if (!std::isfinite(b)) s.finite = false;
      s.max_abs = std::max(s.max_abs, std::fabs(a - b));
      dot += a * b;
      na += a * a;
      nb += b * b;
    }
    if (na == 0 && nb == 0) {
      cosines += 1;
    } else {
      const double c = dot / (std::sqrt(na) * std::sqrt(nb));
      cosines += std::isnan(c) ? 0 : c;
    }
  }
  s.cosine = cosines / static_cast<double>(samples);
  return s;
}

// A 1-D integer output with one value per sample: the per-image row count of an NMS op
// kept in the graph (PaddleDetection's bbox_num), whose rows output is not split by sample.
bool counts_rows(const Array& a, std::int64_t samples) {
  return a.shape.size() == 1 && a.shape[0] == samples && (a.dtype == DType::int32 || a.dtype == DType::int64);
}

Json output_check(const std::string& name, const OutputStats& s, const Tolerances& t) {
  const bool cos_ok = s.finite && s.cosine >= t.min_cosine;
  const bool abs_ok = s.finite && (t.max_abs < 0 || s.max_abs <= t.max_abs);
  Json out = Json::object();
  out.set("name", name);
  out.set("max_abs", s.max_abs);
  out.set("cosine", s.cosine);
  out.set("finite", s.finite);
  out.set("ok", cos_ok && abs_ok);
  return out;
}

// Rows [begin, begin + count) of a [N, ...] array as a [count, ...] array; `what` names the file.
Array rows_of(const Array& all, std::int64_t begin, std::int64_t count, const std::string& what) {
  if (all.shape.empty() || begin < 0 || count < 0 || begin + count > all.shape[0]) {
    throw Error(ExitCode::input,
                what + " has shape " + shape_text(all.shape) +
                    (count == 1 ? ", so no sample " + std::to_string(begin)
                                : ", so no rows " + std::to_string(begin) + ".." + std::to_string(begin + count)) +
                    " (samples are on the first axis)",
                "the bundle's golden files do not belong together; rebuild the bundle with `edgekit build`");
  }
  Array part;
  part.dtype = all.dtype;
  part.shape = all.shape;
  part.shape[0] = count;
  const std::size_t bytes = all.shape[0] > 0 ? all.data.size() / static_cast<std::size_t>(all.shape[0]) : 0;
  part.data.assign(all.data.begin() + static_cast<std::ptrdiff_t>(bytes * static_cast<std::size_t>(begin)),
                   all.data.begin() + static_cast<std::ptrdiff_t>(bytes * static_cast<std::size_t>(begin + count)));
  return part;
}

// Sample k of a [N, ...] array as its own [1, ...] array. The golden files come from the
// bundle, so their sample count is checked, not assumed.
Array sample_of(const Array& all, std::int64_t k, const std::string& what) {
  return rows_of(all, k, 1, what);
}

void append_sample(Array& all, const Array& one) {
  if (all.shape.empty()) {
    all.dtype = one.dtype;
    all.shape = one.shape;
    all.shape[0] = 0;
  }
  all.shape[0] += one.shape.empty() ? 1 : one.shape[0];
  all.data.insert(all.data.end(), one.data.begin(), one.data.end());
}

// A file golden.json names: one of the model's verified files, never a path of its own.
std::string golden_path(const ModelAssets& model, const Json& rel) {
  if (!rel.is_string()) {
    throw Error(ExitCode::input, "golden.json names a file with " + rel.dump(), "rebuild the bundle with `edgekit build`");
  }
  return verified_file(model, rel.as_string());
}

bool all_ok(const Json& checks) {
  for (const Json& c : checks.items()) {
    if (!c.at("ok").as_bool()) return false;
  }
  return true;
}

std::string lower_extension(const std::string& path) {
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return ext;
}

// Detection: the same classes in the same order, every box corner within kBoxPixels of
// Python's (model-input pixels), scores within `tolerance`; segmentation: every mask pixel equal.
constexpr double kBoxPixels = 1.0;

// IoU in double of two [x0, y0, x1, y1] JSON boxes, as coco.iou_matrix computes it.
double json_iou(const Json& a, const Json& b) {
  const double ax0 = a.at(0).as_number(), ay0 = a.at(1).as_number(), ax1 = a.at(2).as_number(), ay1 = a.at(3).as_number();
  const double bx0 = b.at(0).as_number(), by0 = b.at(1).as_number(), bx1 = b.at(2).as_number(), by1 = b.at(3).as_number();
  const double ix = std::max(0.0, std::min(ax1, bx1) - std::max(ax0, bx0));
  const double iy = std::max(0.0, std::min(ay1, by1) - std::max(ay0, by0));
  const double inter = ix * iy;
  const double uni = (ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter;
  return uni > 0 ? inter / uni : 0.0;
}

// mAP's matching for one image: `found` best score first (stable), each taking the unmatched
// `truth` box of its class with the highest IoU (the first on ties) if that is >= min_iou.
std::vector<double> greedy_match(const std::vector<const Json*>& truth, const std::vector<const Json*>& found,
                                 double min_iou) {
  std::vector<std::size_t> order(found.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    return found[x]->at("score").as_number() > found[y]->at("score").as_number();
  });
  std::vector<bool> taken(truth.size(), false);
  std::vector<double> ious;
  for (std::size_t k : order) {
    double best = min_iou;
    std::ptrdiff_t where = -1;
    for (std::size_t j = 0; j < truth.size(); ++j) {
      if (taken[j] || truth[j]->at("class").as_int() != found[k]->at("class").as_int()) continue;
      const double iou = json_iou(found[k]->at("box"), truth[j]->at("box"));
      if (iou >= best && (where < 0 || iou > best)) {
        best = iou;
        where = static_cast<std::ptrdiff_t>(j);
      }
    }
    if (where >= 0) {
      taken[static_cast<std::size_t>(where)] = true;
      ious.push_back(best);
    }
  }
  return ious;
}

std::vector<const Json*> detections_of(const Json& list, double score_threshold) {
  std::vector<const Json*> out;
  for (const Json& d : list.items()) {
    if (d.at("score").as_number() >= score_threshold) out.push_back(&d);
  }
  return out;
}

Json vision_results(const VisionTask& task, const Json& expected, const Json& got, double tolerance, bool gated,
                    const Tolerances& tolerances) {
  const MatchTolerance& match = tolerances.detections;
  Json r = Json::object();
  r.set("expected", expected);
  r.set("got", got);
  bool same = false, scores_ok = true;
  if (task.kind() == VisionTask::Kind::detection) {
    const Json d = compare_detections(expected, got);
    same = d.at("same_classes").as_bool() && d.at("max_corner_px").as_number() <= kBoxPixels;
    double score_diff = 0;
    for (std::size_t i = 0; same && i < expected.size(); ++i) {
      score_diff = std::max(score_diff, std::fabs(expected.at(i).at("score").as_number() - got.at(i).at("score").as_number()));
    }
    scores_ok = score_diff <= tolerance;
    r.set("detections", d);
    r.set("box_tolerance_px", kBoxPixels);
    r.set("max_score_difference", score_diff);
    if (!gated && match.present) {
      // reduced precision: the golden detections found again by matching, within the bundle's floors
      Json m = match_detections(expected, got, match.score_threshold, match.min_iou);
      const bool match_ok = m.at("recall").as_number() >= match.min_recall &&
                            m.at("precision").as_number() >= match.min_precision;
      m.set("min_recall", match.min_recall);
      m.set("min_precision", match.min_precision);
      m.set("iou_threshold", match.min_iou);
      m.set("score_threshold", match.score_threshold);
      m.set("ok", match_ok);
      r.set("matching", m);
      r.set("same_decision", same);
      r.set("same_scores", same && scores_ok);
      r.set("score_tolerance", tolerance);
      r.set("gated", true);
      r.set("ok", match_ok);
      return r;
    }
  } else {
    Json m = compare_masks(expected, got);
    same = m.at("differing").as_int() == 0;
    if (!gated && tolerances.masks.present) {
      // reduced precision: the share of pixels equal to the FP32 mask's, within the bundle's floor
      const double pixels = static_cast<double>(m.at("pixels").as_int());
      const double differing = static_cast<double>(m.at("differing").as_int());
      // as edgekit.tasks.segmentation.compare_masks: masks of other sizes agree nowhere
      const double agreement = pixels > 0 ? std::max(0.0, 100.0 * (1.0 - differing / pixels)) : (differing > 0 ? 0.0 : 100.0);
      const bool agree_ok = agreement >= tolerances.masks.min_agreement;
      m.set("agreement", agreement);
      m.set("min_agreement", tolerances.masks.min_agreement);
      m.set("ok", agree_ok);
      r.set("mask", m);
      r.set("same_decision", same);
      r.set("same_scores", same);
      r.set("score_tolerance", tolerance);
      r.set("gated", true);
      r.set("ok", agree_ok);
      return r;
    }
    r.set("mask", m);
  }
  r.set("same_decision", same);  // classes and boxes, or mask pixels
  r.set("same_scores", same && scores_ok);
  r.set("score_tolerance", tolerance);
  r.set("gated", gated);
  r.set("ok", !gated || (same && scores_ok));
  return r;
}

double number_in(const Json& object, const char* group, const char* key, double fallback) {
  const Json* v = object.find(key);
  if (!v) return fallback;
  if (!v->is_number() || !std::isfinite(v->as_number())) {
    throw Error(ExitCode::input, std::string("golden.json's tolerances.") + group + "." + key + " is " + v->dump() +
                                     ", not a number",
                "rebuild the bundle with `edgekit build`");
  }
  return v->as_number();
}

// golden.json's tolerances.<group>: absent or null, else an object (an error names anything else)
const Json* tolerance_group(const Json& t, const char* group) {
  const Json* d = t.find(group);
  if (!d || d->is_null()) return nullptr;
  if (!d->is_object()) {
    throw Error(ExitCode::input, std::string("golden.json's tolerances.") + group + " is " + d->dump() + ", not an object",
                "rebuild the bundle with `edgekit build`");
  }
  return d;
}

MaskTolerance mask_tolerance(const Json& t) {
  MaskTolerance m;
  const Json* d = tolerance_group(t, "masks");
  if (!d) return m;
  m.present = true;
  m.min_agreement = number_in(*d, "masks", "min_agreement", m.min_agreement);
  return m;
}

MatchTolerance match_tolerance(const Json& t) {
  MatchTolerance m;
  const Json* d = tolerance_group(t, "detections");
  if (!d) return m;
  m.present = true;
  m.min_iou = number_in(*d, "detections", "min_iou", m.min_iou);
  m.score_threshold = number_in(*d, "detections", "score_threshold", m.score_threshold);
  m.min_recall = number_in(*d, "detections", "min_recall", m.min_recall);
  m.min_precision = number_in(*d, "detections", "min_precision", m.min_precision);
  return m;
}

}  // namespace

Json match_detections(const Json& expected, const Json& got, double score_threshold, double min_iou) {
  std::vector<const Json*> all_expected, all_got;
  for (const Json& d : expected.items()) all_expected.push_back(&d);
  for (const Json& d : got.items()) all_got.push_back(&d);
  const std::vector<const Json*> wanted = detections_of(expected, score_threshold);
  const std::vector<const Json*> confident = detections_of(got, score_threshold);
  const std::vector<double> found = greedy_match(wanted, all_got, min_iou);
  const std::vector<double> confirmed = greedy_match(all_expected, confident, min_iou);
  Json out = Json::object();
  out.set("expected", wanted.size());
  out.set("found", found.size());
  out.set("recall", wanted.empty() ? 1.0 : static_cast<double>(found.size()) / static_cast<double>(wanted.size()));
  out.set("confident", confident.size());
  out.set("confirmed", confirmed.size());
  out.set("precision",
          confident.empty() ? 1.0 : static_cast<double>(confirmed.size()) / static_cast<double>(confident.size()));
  out.set("min_iou", found.empty() ? Json() : Json(*std::min_element(found.begin(), found.end())));
  return out;
}

bool lossless_image_file(const std::string& path) {
  const std::string ext = lower_extension(path);
  return ext == ".png" || ext == ".bmp" || ext == ".ppm" || ext == ".pgm";
}

std::string compare_results(const Json& expected, const Json& got, double score_tolerance, bool compare_scores) {
  if (expected.type() != got.type() && !(expected.is_number() && got.is_number())) {
    return "expected " + expected.dump() + ", got " + got.dump();
  }
  switch (expected.type()) {
    case Json::Type::object:
      if (expected.size() != got.size()) return "expected keys of " + expected.dump() + ", got " + got.dump();
      for (const auto& [key, value] : expected.members()) {
        const Json* other = got.find(key);
        if (!other) return "missing \"" + key + "\" in " + got.dump();
        if (is_score_key(key) && value.is_number() && other->is_number()) {
          const double diff = std::fabs(value.as_number() - other->as_number());
          if (compare_scores && !(diff <= score_tolerance)) {
            return key + " " + other->dump() + " differs from " + value.dump() + " by more than " + json_number(score_tolerance);
          }
          continue;
        }
        const std::string inner = compare_results(value, *other, score_tolerance, compare_scores);
        if (!inner.empty()) return key + ": " + inner;
      }
      return "";
    case Json::Type::array:
      if (expected.size() != got.size()) {
        return std::to_string(got.size()) + " items instead of " + std::to_string(expected.size()) + ": " + got.dump();
      }
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const std::string inner = compare_results(expected.at(i), got.at(i), score_tolerance, compare_scores);
        if (!inner.empty()) return "[" + std::to_string(i) + "] " + inner;
      }
      return "";
    case Json::Type::number:
      return expected.as_number() == got.as_number() ? "" : "expected " + expected.dump() + ", got " + got.dump();
    default:
      return expected.dump() == got.dump() ? "" : "expected " + expected.dump() + ", got " + got.dump();
  }
}

GoldenSet::GoldenSet(const ModelAssets& model) : assets_(model), precision_(model.precision) {
  if (model.golden_file.empty()) {
    throw Error(ExitCode::input, "model " + model.name + " has no golden/golden.json", "package a bundle built by edgekit");
  }
  golden_ = Json::parse(read_file_text(model.golden_file, ExitCode::input));
  if (const Json* t = golden_.find("tolerances")) {
    if (const Json* c = t->find("min_cosine"); c && c->is_number()) tolerances_.min_cosine = c->as_number();
    if (const Json* a = t->find("max_abs"); a && a->is_number()) tolerances_.max_abs = a->as_number();
    tolerances_.detections = match_tolerance(*t);
    tolerances_.masks = mask_tolerance(*t);
  }
  if (const Json* images = golden_.find("images"); images && images->is_object()) {
    for (const Json& f : images->at("files").items()) image_files_.push_back(golden_path(assets_, f));
  }
}

Json GoldenSet::replay_vectors(Model& model) const {
  Json out = replay_group(model, golden_);
  const Json* widths = golden_.find("widths");
  if (widths == nullptr) return out;
  if (!widths->is_array()) {
    throw Error(ExitCode::input, "golden.json's widths is " + widths->dump() + ", not a list",
                "rebuild the bundle with `edgekit build`");
  }
  Json groups = Json::array();
  bool ok = out.at("ok").as_bool();
  for (const Json& group : widths->items()) {
    const Json* width = group.is_object() ? group.find("width") : nullptr;
    if (width == nullptr || !width->is_number()) {
      throw Error(ExitCode::input, "golden.json's widths holds " + group.dump() + ", not a group with a width",
                  "rebuild the bundle with `edgekit build`");
    }
    for (const char* key : {"inputs", "outputs"}) {  // lists of {"name", "file"}, as the main group's
      const Json* list = group.find(key);
      bool fits = list != nullptr && list->is_array();
      for (std::size_t i = 0; fits && i < list->size(); ++i) fits = list->at(i).is_object() && list->at(i).find("file") != nullptr;
      if (!fits) {
        throw Error(ExitCode::input, "golden.json's group at width " + width->dump() + " has no list of " + key +
                                         " with files",
                    "rebuild the bundle with `edgekit build`");
      }
    }
    Json one = replay_group(model, group);  // each sample at the group's own shape (Lite's ARM predictor takes it)
    one.set("width", *width);
    ok = ok && one.at("ok").as_bool();
    groups.push(one);
  }
  out.set("widths", groups);
  out.set("ok", ok);
  return out;
}

Json GoldenSet::replay_group(Model& model, const Json& group) const {
  const Json& inputs = group.at("inputs");
  const Json& outputs = group.at("outputs");
  if (inputs.size() != 1) {
    throw Error(ExitCode::input, "the self-test replays one-input models; " + model.name() + " has " +
                                     std::to_string(inputs.size()),
                "check multi-input models with edgekit-lite-run");
  }
  const std::string input_file = golden_path(assets_, inputs.at(0).at("file"));
  const Array x = read_npy(input_file);
  const std::int64_t samples = x.shape.empty() ? 0 : x.shape[0];
  if (samples < 1) {
    throw Error(ExitCode::input, input_file + " has shape " + shape_text(x.shape) + ": no golden sample to replay",
                "rebuild the bundle with `edgekit build` (it writes the golden samples on the first axis)");
  }
  std::vector<Array> got(outputs.size());
  for (std::int64_t k = 0; k < samples; ++k) {
    const Array one = sample_of(x, k, input_file);
    if (one.dtype != DType::float32) {
      throw Error(ExitCode::input, "golden input of dtype " + std::string(dtype_name(one.dtype)), "image models take float32");
    }
    std::vector<Array> out = model.infer(one.as<float>(), one.shape);
    for (std::size_t i = 0; i < got.size() && i < out.size(); ++i) append_sample(got[i], out[i]);
  }
  std::vector<Array> expected;
  bool rows = false;  // an NMS op kept in the graph: every sample's rows concatenated, plus a count per sample
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    expected.push_back(read_npy(golden_path(assets_, outputs.at(i).at("file"))));
    rows = rows || counts_rows(expected.back(), samples);
  }
  Json checks = Json::array();
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const std::string name = outputs.at(i).at("name").as_string();
    if (rows && tolerances_.detections.present) {
      // reduced precision finds other rows than the FP32 golden ones: the images' matched detections decide
      Json skipped = Json::object();
      skipped.set("name", name);
      skipped.set("skipped", "NMS rows of a reduced precision: judged by matching the golden detections");
      skipped.set("ok", true);
      checks.push(skipped);
      continue;
    }
    // NMS rows do not split into samples: compared as one vector (FP32 must find the same rows)
    checks.push(output_check(name, compare_output(expected[i], got[i], rows ? 1 : samples), tolerances_));
  }
  Json out = Json::object();
  out.set("samples", samples);
  if (rows) out.set("nms_rows", true);
  out.set("min_cosine", tolerances_.min_cosine);
  out.set("max_abs", tolerances_.max_abs < 0 ? Json() : Json(tolerances_.max_abs));
  out.set("outputs", checks);
  out.set("ok", all_ok(checks));
  return out;
}

Json GoldenSet::check_image(Model& model, std::size_t index, const ImageView& image) const {
  if (index >= image_files_.size()) {
    throw Error(ExitCode::usage, "golden image " + std::to_string(index) + " of " + std::to_string(image_files_.size()),
                "use an index below the count the model lists");
  }
  const Json& images = golden_.at("images");
  const bool lossless = lossless_image_file(image_files_[index]);
  Json out = Json::object();
  out.set("index", index);
  out.set("file", image_files_[index]);

  // Images of one tensor shape are stacked (input.npy, output_<i>.npy); a variable-width bundle's images of
  // different widths have their own files, one sample each ("per_image": [{"input", "outputs"}, ...]).
  const Json* per_image = images.find("per_image");
  const Json& entry = per_image ? per_image->at(index) : images;
  const std::int64_t sample = per_image ? 0 : static_cast<std::int64_t>(index);
  const std::int64_t in_file = per_image ? 1 : static_cast<std::int64_t>(image_files_.size());

  // 1. the tensor: the core's preprocessing against Python's, element by element
  const Tensor tensor = model.preprocess(image);
  const std::string input_file = golden_path(assets_, entry.at("input"));
  const Array expected = sample_of(read_npy(input_file), sample, input_file);
  if (static_cast<std::size_t>(expected.count()) != tensor.data.size() || expected.dtype != DType::float32) {
    throw Error(ExitCode::input, "the preprocessed tensor has " + std::to_string(tensor.data.size()) +
                                     " values, " + input_file + " " + std::to_string(expected.count()),
                "the image is not the golden one, or the bundle's files do not belong together");
  }
  std::int64_t differing = 0;
  double tensor_max = 0;
  for (std::size_t i = 0; i < tensor.data.size(); ++i) {
    const float want = expected.as<float>()[i];
    if (std::memcmp(&want, &tensor.data[i], sizeof want) != 0) ++differing;
    tensor_max = std::max(tensor_max, std::fabs(static_cast<double>(want) - tensor.data[i]));
  }
  Json t = Json::object();
  t.set("differing", differing);
  t.set("max_abs", tensor_max);
  t.set("gated", lossless);
  t.set("ok", !lossless || differing == 0);
  out.set("tensor", t);

  // 2. the model on the core's tensor, against the FP32 reference on Python's
  Shape shape = {1};
  shape.insert(shape.end(), tensor.shape.begin(), tensor.shape.end());
  const std::vector<Array> outputs = model.infer(tensor.data.data(), shape);
  Json checks = Json::array();
  const Json& output_files = entry.at("outputs");
  std::vector<Array> refs;
  for (std::size_t i = 0; i < output_files.size(); ++i) refs.push_back(read_npy(golden_path(assets_, output_files.at(i))));
  std::size_t counts = refs.size();  // an NMS op kept in the graph: the output counting each image's rows
  for (std::size_t i = 0; i < refs.size(); ++i) {
    if (counts_rows(refs[i], in_file)) counts = i;
  }
  for (std::size_t i = 0; i < output_files.size() && i < outputs.size(); ++i) {
    const std::string name = "output_" + std::to_string(i);
    if (counts < refs.size() && tolerances_.detections.present) {
      Json skipped = Json::object();  // other rows than FP32's: the matched detections below decide
      skipped.set("name", name);
      skipped.set("skipped", "NMS rows of a reduced precision: judged by matching the golden detections");
      skipped.set("ok", true);
      checks.push(skipped);
      continue;
    }
    const std::string ref_file = golden_path(assets_, output_files.at(i));
    Array ref;
    if (counts < refs.size() && i != counts) {
      const auto at = static_cast<std::size_t>(sample);
      std::int64_t begin = 0;
      for (std::size_t k = 0; k < at; ++k) begin += static_cast<std::int64_t>(value_at(refs[counts], k));
      ref = rows_of(refs[i], begin, static_cast<std::int64_t>(value_at(refs[counts], at)), ref_file);
    } else {
      ref = sample_of(refs[i], sample, ref_file);
    }
    checks.push(output_check(name, compare_output(ref, outputs[i], 1), tolerances_));
  }
  out.set("outputs", checks);

  // 3. the core's post-processing against Python's results
  const Json* results = images.find("results");
  const bool gate_results = precision_ == "fp32";
  Json r = Json::object();
  if (results && results->is_array() && index < results->size() && model.vision()) {
    r = vision_results(*model.vision(), results->at(index), model.postprocess(outputs).at(0),
                       tolerances_.max_abs < 0 ? 1e-6 : std::max(1e-6, tolerances_.max_abs), gate_results,
                       tolerances_);
  } else if (results && results->is_array() && index < results->size()) {
    const Json got = model.postprocess(outputs.at(0)).at(0);
    const double tolerance = tolerances_.max_abs < 0 ? 1e-6 : std::max(1e-6, tolerances_.max_abs);
    const std::string decision = compare_results(results->at(index), got, tolerance, false);
    const std::string scores = decision.empty() ? compare_results(results->at(index), got, tolerance, true) : decision;
    r.set("expected", results->at(index));
    r.set("got", got);
    r.set("same_decision", decision.empty());  // classes, labels, text, boxes
    r.set("same_scores", scores.empty());
    r.set("difference", scores.empty() ? Json() : Json(scores));
    r.set("score_tolerance", tolerance);
    r.set("gated", gate_results);
    r.set("ok", !gate_results || scores.empty());
  } else {
    r.set("skipped", "golden.json has no results (the bundle has no task)");
    r.set("ok", true);
  }
  out.set("results", r);
  out.set("ok", t.at("ok").as_bool() && all_ok(checks) && r.at("ok").as_bool());
  return out;
}

Json GoldenSet::check_images(Model& model) const {
  Json out = Json::object();
  out.set("count", image_files_.size());
  if (image_files_.empty()) {
    out.set("skipped", "the bundle has no golden images");
    out.set("ok", true);
    return out;
  }
  if (!image_decoder_available()) {
    out.set("skipped", "this build has no image decoder: decode golden images with the platform and call ek_selftest_image");
    out.set("ok", true);
    return out;
  }
  Json cases = Json::array();
  bool ok = true;
  for (std::size_t i = 0; i < image_files_.size(); ++i) {
    const Image image = decode_image_file(image_files_[i]);
    Json one = check_image(model, i, image.view());
    ok = ok && one.at("ok").as_bool();
    cases.push(one);
  }
  out.set("decoder", image_decoder_name());
  out.set("cases", cases);
  out.set("ok", ok);
  return out;
}

Json selftest_model(Model& model) {
  const GoldenSet golden(model.assets());
  Json out = Json::object();
  out.set("name", model.name());
  out.set("precision", model.assets().precision);
  Json vectors = golden.replay_vectors(model);
  Json images = model.can_predict() ? golden.check_images(model) : Json::object();
  if (!model.can_predict()) {
    images.set("skipped", "the model has no preprocessing spec or task");
    images.set("ok", true);
  }
  out.set("ok", vectors.at("ok").as_bool() && images.at("ok").as_bool());
  out.set("vectors", vectors);
  out.set("images", images);
  return out;
}

}  // namespace edgekit
