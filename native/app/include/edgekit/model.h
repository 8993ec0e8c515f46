// One model of an asset set, ready for images: the bundle's Preprocessor
// (preprocess.json), an Engine on its model.nb and its Postprocessor (task.json,
// labels.txt), timed stage by stage. `predict` returns what `edgekit run` prints for
// the same bundle and image (edgekit/consumers/predict.py: BundleModel.predict).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/engine.h"
#include "edgekit/image.h"
#include "edgekit/json.h"
#include "edgekit/postprocess.h"
#include "edgekit/preprocess.h"
#include "edgekit/vision_task.h"

namespace edgekit {

struct StageTimes {
  double preprocess_ms = 0;
  double inference_ms = 0;
  double postprocess_ms = 0;

  double total_ms() const { return preprocess_ms + inference_ms + postprocess_ms; }
  StageTimes& operator+=(const StageTimes& other);
  Json to_json() const;  // {preprocess, inference, postprocess, total}, ms rounded to microseconds
};

struct Prediction {
  Json result;  // Python's BundleModel.predict(image) as JSON
  StageTimes times;
};

class Model {
 public:
  // Reads the model's specs (Error(input) naming the file when one is invalid) and
  // takes the engine (null: specs only, nothing runs). top_k > 1 adds the k best classes ("top") to classifications.
  Model(const ModelAssets& assets, std::unique_ptr<Engine> engine, int top_k = 1);

  const ModelAssets& assets() const { return assets_; }
  const std::string& name() const { return assets_.name; }
  bool can_predict() const { return pre_.has_value() && (post_.has_value() || vision_.has_value()); }
  // Error(input) when the bundle has no task.json, or its task is detection / segmentation
  // (not one of the core's TaskKind: see task_name()).
  TaskKind kind() const;
  // task.json's kind: classification, ocr_det, ocr_rec, ocr_cls, detection, segmentation.
  std::string task_name() const;

  // image -> preprocess -> model.nb -> postprocess; detections in the image's pixels.
  Prediction predict(const ImageView& image);

  // The stages on their own (the self-test compares each with the golden files).
  Tensor preprocess(const ImageView& image) const;
  // One or more samples: `shape` includes the batch axis.
  std::vector<Array> infer(const float* data, const Shape& shape);
  // Task.postprocess(outputs) as JSON: one entry per sample of the first output.
  Json postprocess(const Array& output) const;
  // Every output (detection reads several): Task.postprocess(outputs) as JSON.
  Json postprocess(const std::vector<Array>& outputs) const;
  // The detection / segmentation task, when the bundle has one.
  const VisionTask* vision() const { return vision_ ? &*vision_ : nullptr; }

 private:
  const Preprocessor& preprocessor() const;
  const Postprocessor& postprocessor() const;
  Engine& engine();  // Error(usage) without one
  Prediction predict_vision(const ImageView& image);

  ModelAssets assets_;
  std::unique_ptr<Engine> engine_;
  std::optional<Preprocessor> pre_;
  std::optional<Postprocessor> post_;
  std::optional<VisionTask> vision_;  // detection / segmentation: the core's detection.h
};

// Where a height x width page lies in a text detector's tensor (predict.py's _det_geometry): its
// stretch or letterbox; Error(input) for a spec without a resize or with fit_height (`name` names the model).
Geometry det_geometry(const PreprocessSpec& spec, int height, int width, const std::string& name);

// Detector boxes and quads from model pixels to image pixels through that geometry, as predict.py's
// _box_to_image / _quad_to_image: clamped to the image, rounded to 0.01 (numpy's round for the box).
Json boxes_to_image(const Json& boxes, const Geometry& g);

}  // namespace edgekit
