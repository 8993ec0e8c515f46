// Object detection and segmentation post-processing of task.json kinds `detection` and
// `segmentation`, with the arithmetic of edgekit/tasks/detection.py and segmentation.py
// (float32 decoding, the same candidate order, class-aware greedy NMS with IoU in double),
// so an app draws the boxes and masks that `edgekit run` printed.
//
//   DetectionOptions opt = DetectionOptions::from_json(task.options);
//   auto found = detect({&cls8, &cls16, &reg8, &reg16}, opt);      // per image, best first, tensor pixels
//   for (auto& d : found[0]) spec.geometry(h, w).to_image(d.box);   // back to the image (letterbox undone)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgekit/json.h"
#include "edgekit/npy.h"
#include "edgekit/preprocess.h"

namespace edgekit {

struct DetectionOptions {
  bool decoded = false;            // head "decoded": boxes [N, M, 4] + scores [N, M, C]; else "anchor_free"
  bool rows = false;               // head "nms": the graph's NMS rows [K, 6] + counts [N] (no decoding, no NMS)
  std::vector<int> strides = {8, 16, 32};
  int reg_max = 7;
  double cell_offset = 0.5;
  bool sigmoid = true;             // activation "sigmoid" (else "none")
  double score_threshold = 0.05;
  double nms_iou = 0.5;
  int nms_top_k = 1000;
  int max_detections = 100;
  double f1_threshold = 0.5;
  std::vector<std::string> labels;
  int num_classes = 0;             // 0: any (taken from the outputs)
  bool matrix = false;             // nms "matrix" (Paddle's matrix_nms), else "greedy"
  double post_threshold = 0.0;     // matrix: decayed scores must exceed this
  bool use_gaussian = false;       // matrix: gaussian decay, else linear
  double gaussian_sigma = 2.0;
  std::vector<int> input_size;     // anchor_free: the input's height, width (flattened heads lay their cells out by it)

  // Python's Detection.from_options: unknown keys and values out of range are Error(input).
  static DetectionOptions from_json(const Json& options);
};

struct Detection {
  float box[4] = {0, 0, 0, 0};     // x0, y0, x1, y1
  float score = 0;
  std::int64_t klass = 0;
};

// Outputs in the model's fetch order: anchor_free = the class maps of every stride, then the
// box maps ([N, C, h, w], [N, 4 (reg_max + 1), h, w]), or flattened ([N, h*w, C], then [N, h*w, 4 (reg_max + 1)],
// h x w = ceil(input_size / stride), as PicoDet exports without NMS give them); decoded = boxes, scores; nms = rows [K, 6] (class, score, x0, y0, x1, y1) of all images, then the
// integer count per image [N] (PaddleDetection's multiclass_nms3 outputs). Error(input) names the output whose count or shape is wrong.
std::vector<std::vector<Detection>> detect(const std::vector<const Array*>& outputs, const DetectionOptions& options);

// Indices kept by class-aware greedy NMS (candidates sorted by score, stable), best first.
std::vector<std::size_t> nms(const std::vector<Detection>& candidates, double iou, int top_k, int max_detections);
double box_iou(const float* a, const float* b);

// Paddle's matrix_nms (Python's detection.matrix_nms): per class, candidates by score (stable), the first top_k;
// each one's score decayed by its overlaps with better boxes; kept if the decayed float32 score > post_threshold;
// then all by decayed score (stable), at most max_detections. Returns indices; `decayed` gets their scores.
std::vector<std::size_t> matrix_nms(const std::vector<Detection>& candidates, const DetectionOptions& options,
                                    std::vector<float>& decayed);

struct SegmentationOptions {
  std::vector<std::string> labels;
  double threshold = 0.5;
  bool sigmoid = true;
  int ignore_index = 255;

  static SegmentationOptions from_json(const Json& options);
};

struct ClassMap {
  int height = 0, width = 0;
  std::vector<std::uint8_t> classes;  // row-major
};

// scores [N, C, h, w] (argmax over C, first on ties; C == 1: threshold) or a class map [N, h, w].
std::vector<ClassMap> class_maps(const Array& output, const SegmentationOptions& options);
// Nearest-neighbour: source index floor((2 d + 1) * in / (2 out)), in integers (Python's resize_nearest).
ClassMap resize_nearest(const ClassMap& map, int height, int width);

// A class map of the model's output onto the height x width source image: resized to the tensor,
// the letterbox border cut off, resized to the image (Python's segmentation.to_image).
ClassMap map_to_image(const ClassMap& map, const PreprocessSpec& spec, int height, int width);

Json to_json(const Detection& value, const std::vector<std::string>& labels);

}  // namespace edgekit
