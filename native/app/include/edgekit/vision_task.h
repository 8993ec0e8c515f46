// The task kinds `detection` and `segmentation` of a bundle's task.json, for the app
// core: the core's post-processing (edgekit/detection.h) applied to a model's outputs,
// with results in the JSON shape `edgekit run` prints (edgekit/consumers/predict.py:
// BundleModel._in_image; edgekit/tasks/detection.py and segmentation.py):
//
//   detection     [{"box": [x0, y0, x1, y1], "class", "label", "score"}, ...]  best first
//   segmentation  {"size": [h, w], "classes": {label: percent}, "rle": [[class, run], ...]}
//
// postprocess() is Task.postprocess (model-input pixels, unrounded: the golden files'
// results); in_image() is what predict() returns (image pixels, boxes to 0.01 px,
// scores to 1e-6, the mask on the source image).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "edgekit/detection.h"
#include "edgekit/json.h"
#include "edgekit/npy.h"
#include "edgekit/preprocess.h"

namespace edgekit {

class VisionTask {
 public:
  enum class Kind { detection, segmentation };

  // task.json of kind detection or segmentation (options checked as Python does,
  // Error(input) naming the file); nullopt for any other kind.
  static std::optional<VisionTask> read(const std::string& task_file);

  Kind kind() const { return kind_; }
  const char* name() const { return kind_ == Kind::detection ? "detection" : "segmentation"; }

  // One entry per sample, in model-input pixels (Python's Task.postprocess).
  Json postprocess(const std::vector<Array>& outputs) const;
  // One image's result in its own pixels (Python's BundleModel.predict).
  Json in_image(const std::vector<Array>& outputs, const PreprocessSpec& spec, int height, int width) const;

 private:
  Kind kind_ = Kind::detection;
  DetectionOptions detection_;
  SegmentationOptions segmentation_;
};

// Self-test comparisons of one image's results (Python's against ours).
// Detections in order: {"count", "expected_count", "same_classes", "max_corner_px", "min_iou"}.
Json compare_detections(const Json& expected, const Json& got);
// Masks (run-length encoded): {"pixels", "differing"}; a size mismatch counts every pixel.
Json compare_masks(const Json& expected, const Json& got);

}  // namespace edgekit
