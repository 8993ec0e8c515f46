#include "edgekit/model.h"

#include <chrono>

#include "edgekit/error.h"
#include "edgekit/numpy_compat.h"

namespace edgekit {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double micro_round(double ms) { return python_round(ms, 3); }

bool has_labels(const TaskSpec& spec) {
  const Json* labels = spec.options.is_object() ? spec.options.find("labels") : nullptr;
  return labels != nullptr && labels->is_array() && labels->size() > 0;
}

}  // namespace

StageTimes& StageTimes::operator+=(const StageTimes& other) {
  preprocess_ms += other.preprocess_ms;
  inference_ms += other.inference_ms;
  postprocess_ms += other.postprocess_ms;
  return *this;
}

Json StageTimes::to_json() const {
  Json out = Json::object();
  out.set("preprocess", micro_round(preprocess_ms));
  out.set("inference", micro_round(inference_ms));
  out.set("postprocess", micro_round(postprocess_ms));
  out.set("total", micro_round(total_ms()));
  return out;
}

Model::Model(const ModelAssets& assets, std::unique_ptr<Engine> engine, int top_k)
    : assets_(assets), engine_(std::move(engine)) {
  if (!assets_.preprocess_file.empty()) {
    BundlePreprocess bundle = BundlePreprocess::read(assets_.preprocess_file);
    if (bundle.spec) pre_.emplace(*bundle.spec);
  }
  if (!assets_.task_file.empty()) vision_ = VisionTask::read(assets_.task_file);
  if (!assets_.task_file.empty() && !vision_) {
    TaskSpec spec = TaskSpec::read(assets_.task_file);
    const bool labels_in_task = has_labels(spec);
    post_.emplace(std::move(spec));
    // Python reads labels from task.json only; edgekit writes them there whenever labels.txt exists.
    if (post_->kind() == TaskKind::classification && !labels_in_task && !assets_.labels_file.empty()) {
      post_->set_labels(read_labels(assets_.labels_file));
    }
    if (top_k > 1) post_->set_top_k(top_k);
  }
}

const Preprocessor& Model::preprocessor() const {
  if (!pre_) {
    throw Error(ExitCode::input, "model " + name() + " has no preprocessing spec (built from tensors without [preprocess])",
                "rebuild it with a [preprocess] table so the bundle says how images become its input");
  }
  return *pre_;
}

const Postprocessor& Model::postprocessor() const {
  if (!post_) {
    throw Error(ExitCode::input, "model " + name() + " has no task.json (built without labels or ground truth)",
                "rebuild it with labelled evaluation data so the bundle knows its task");
  }
  return *post_;
}

TaskKind Model::kind() const {
  if (vision_) {
    throw Error(ExitCode::input, "model " + name() + " is a " + vision_->name() + " model",
                "run it on its own (ek_run), not as a classification or OCR model");
  }
  return postprocessor().kind();
}

std::string Model::task_name() const { return vision_ ? vision_->name() : task_kind_name(kind()); }

Tensor Model::preprocess(const ImageView& image) const { return preprocessor().run(image); }

Engine& Model::engine() {
  if (!engine_) {
    throw Error(ExitCode::usage, "model " + name() + " has no engine (no Paddle-Lite runtime in this build)",
                "build native/ with EDGEKIT_LITE_DIR");
  }
  return *engine_;
}

std::vector<Array> Model::infer(const float* data, const Shape& shape) {
  Engine& e = engine();
  e.set_input(0, DType::float32, shape, data);
  e.run();
  std::vector<Array> outputs;
  const std::size_t count = e.output_names().size();
  for (std::size_t i = 0; i < count; ++i) outputs.push_back(e.output(i));
  return outputs;
}

Json Model::postprocess(const Array& output) const { return postprocessor().run(output); }

Json Model::postprocess(const std::vector<Array>& outputs) const {
  if (vision_) return vision_->postprocess(outputs);
  if (outputs.empty()) throw Error(ExitCode::run, "model " + name() + " returned no outputs", "check its model.nb");
  return postprocess(outputs.front());
}

Prediction Model::predict(const ImageView& image) {
  if (vision_) return predict_vision(image);
  const Postprocessor& post = postprocessor();
  const Preprocessor& pre = preprocessor();
  Engine& e = engine();
  Prediction out;
  auto start = Clock::now();
  Tensor tensor = pre.run(image);
  out.times.preprocess_ms = ms_since(start);

  start = Clock::now();
  // The tensor's own shape: with preprocess width_mode "dynamic" each text line is as wide as the line.
  // Lite's ARM predictor takes a new width on every run (measured under qemu: the same text and confidence
  // as a fresh predictor per line); its x86 build does not, which is why edgekit.consumers.predict keeps one twin per width.
  Shape shape = {1};
  shape.insert(shape.end(), tensor.shape.begin(), tensor.shape.end());
  e.set_input(0, DType::float32, shape, tensor.data.data());
  e.run();
  const Array output = e.output(0);
  out.times.inference_ms = ms_since(start);

  start = Clock::now();
  Json results = post.run(output);
  if (results.size() != 1) {
    throw Error(ExitCode::run, "model " + name() + " returned " + std::to_string(results.size()) + " results for one image",
                "the model's first output must keep the batch axis");
  }
  out.result = results.at(0);
  if (post.kind() == TaskKind::ocr_det) {
    out.result = boxes_to_image(out.result, det_geometry(pre.spec(), image.height, image.width, name()));
  }
  out.times.postprocess_ms = ms_since(start);
  return out;
}

// Detection / segmentation: every output to the task, results in the image's pixels.
Prediction Model::predict_vision(const ImageView& image) {
  const Preprocessor& pre = preprocessor();
  Prediction out;
  auto start = Clock::now();
  Tensor tensor = pre.run(image);
  out.times.preprocess_ms = ms_since(start);

  start = Clock::now();
  Shape shape = {1};
  shape.insert(shape.end(), tensor.shape.begin(), tensor.shape.end());
  const std::vector<Array> outputs = infer(tensor.data.data(), shape);
  out.times.inference_ms = ms_since(start);

  start = Clock::now();
  out.result = vision_->in_image(outputs, pre.spec(), image.height, image.width);
  out.times.postprocess_ms = ms_since(start);
  return out;
}

Geometry det_geometry(const PreprocessSpec& spec, int height, int width, const std::string& name) {
  if (!spec.resize || (spec.resize_mode != ResizeMode::stretch && spec.resize_mode != ResizeMode::letterbox)) {
    const std::string mode = !spec.resize ? "without a resize" : "fit_height";
    throw Error(ExitCode::input,
                "model " + name + ": the detector's preprocessing is " + mode +
                    ", so its boxes cannot be mapped back to the page",
                "build the detector with [preprocess] resize = [H, W] and resize_mode = \"letterbox\" (or \"stretch\")");
  }
  return spec.geometry(height, width);
}

Json boxes_to_image(const Json& boxes, const Geometry& g) {
  Json out = Json::array();
  for (const Json& item : boxes.items()) {
    const Json& box = item.at("box");
    const std::array<double, 2> a = g.point_to_image(box.at(0).as_number(), box.at(1).as_number());
    const std::array<double, 2> b = g.point_to_image(box.at(2).as_number(), box.at(3).as_number());
    // predict._box_to_image rounds the box's numpy float64 values (numpy's round), _quad_to_image Python floats
    Json mapped = Json::array();
    for (double v : {a[0], a[1], b[0], b[1]}) mapped.push(numpy_round(v, 2));
    Json quad = Json::array();
    if (const Json* corners = item.find("quad")) {
      for (const Json& p : corners->items()) {
        const std::array<double, 2> q = g.point_to_image(p.at(0).as_number(), p.at(1).as_number());
        Json point = Json::array();
        point.push(python_round(q[0], 2));
        point.push(python_round(q[1], 2));
        quad.push(point);
      }
    }
    Json copy = Json::object();
    for (const auto& [key, value] : item.members()) copy.set(key, key == "box" ? mapped : key == "quad" ? quad : value);
    out.push(copy);
  }
  return out;
}

}  // namespace edgekit
