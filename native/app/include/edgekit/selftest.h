// The golden self-test an app runs (Android instrumented test, XCTest, the camera
// demo's --selftest): the bundle's golden/ replayed through the same Model the app
// uses, against golden/golden.json:
//
//  - vectors: golden inputs -> model.nb, one sample at a time as an app runs it;
//    every output within the tolerances the build wrote (a cosine floor per output,
//    and a max abs ceiling for FP32 models);
//  - images: each source image (decoded by the caller or by decode.h) -> the core's
//    preprocessing, which must equal the Python tensor exactly (lossless files),
//    -> model.nb, within the same tolerances, -> the core's post-processing, which
//    must give the Python results (classes, labels, text, boxes identical; scores
//    within the FP32 max abs tolerance). The golden results come from the FP32
//    reference: for reduced precisions they are reported, not gated, except
//    detections when golden.json states `tolerances.detections`: each image's
//    detections are then matched to the FP32 ones (per class, greedy by IoU as mAP
//    matches, IoU >= min_iou) and recall and precision of the confident ones
//    (score >= score_threshold) must reach the floors the build measured.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "edgekit/image.h"
#include "edgekit/json.h"
#include "edgekit/model.h"

namespace edgekit {

// golden.json's tolerances.detections (edgekit.tasks.detection.golden_tolerance).
struct MatchTolerance {
  bool present = false;
  double min_iou = 0.5;
  double score_threshold = 0.5;
  double min_recall = 1;
  double min_precision = 1;
};

// golden.json's tolerances.masks (edgekit.tasks.segmentation.golden_tolerance): the share of a
// golden image's mask pixels, in percent, that must equal the FP32 reference's.
struct MaskTolerance {
  bool present = false;
  double min_agreement = 100;
};

struct Tolerances {
  double min_cosine = 0.9999;
  double max_abs = -1;  // < 0: not gated (reduced precisions)
  MatchTolerance detections;
  MaskTolerance masks;
};

// One image's detections ([{"box", "class", "score"}]) matched to the FP32 golden ones, as
// edgekit.tasks.detection.match_detections: {"expected", "found", "recall", "confident",
// "confirmed", "precision", "min_iou"}.
Json match_detections(const Json& expected, const Json& got, double score_threshold, double min_iou);

class GoldenSet {
 public:
  // Error(input) when the model has no golden/golden.json.
  explicit GoldenSet(const ModelAssets& model);

  const Tolerances& tolerances() const { return tolerances_; }
  std::size_t image_count() const { return image_files_.size(); }
  // Absolute paths of the golden source images, in order.
  const std::vector<std::string>& image_files() const { return image_files_; }

  // The golden vectors, then a dynamic-width bundle's groups at other widths (golden.json's "widths", each
  // judged alike): the main group's {"samples", "outputs", "ok", ...} plus "widths": [{"width", ...}].
  Json replay_vectors(Model& model) const;
  // One golden image, decoded by the caller (pixels as the platform decodes them).
  Json check_image(Model& model, std::size_t index, const ImageView& image) const;
  // Every golden image decoded with decode.h; {"skipped": reason} without a decoder.
  Json check_images(Model& model) const;

 private:
  Json replay_group(Model& model, const Json& group) const;  // {"inputs", "outputs"} of golden.json

  ModelAssets assets_;  // its verified files are the only ones golden.json may name
  Json golden_;
  Tolerances tolerances_;
  std::string precision_;
  std::vector<std::string> image_files_;
};

// The whole self-test of one model: {"name", "ok", "vectors", "images"}.
Json selftest_model(Model& model);

// Python results against ours: "" when they agree (numbers under the score keys
// within score_tolerance, everything else identical), else the first difference.
std::string compare_results(const Json& expected, const Json& got, double score_tolerance, bool compare_scores = true);

}  // namespace edgekit
