// A bundle's preprocess.json interpreted: the same steps, in the same order and
// with the same arithmetic, as edgekit's Python `PreprocessSpec.apply`
// (edgekit/model/data.py), so an app's input tensor equals the one parity was checked on:
// colour -> resize -> centre crop -> x * scale -> (x - mean) / std -> layout -> pad.
//
//   auto pre = Preprocessor::from_file(bundle + "/preprocess.json");
//   Tensor t = pre.run(ImageView::rgba(pixels, h, w, stride));   // t.shape = {3, 224, 224}
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/image.h"
#include "edgekit/imgproc.h"
#include "edgekit/json.h"
#include "edgekit/npy.h"

namespace edgekit {

enum class ColorMode { rgb, bgr, gray };
enum class Layout { nchw, nhwc };
enum class ResizeMode { stretch, fit_height, letterbox };
enum class WidthMode { fixed, dynamic };

struct Size2 {
  int height = 0;
  int width = 0;
};

// Where an image lands in the tensor (Python's data.Geometry): resized to
// resized_height x resized_width with its top-left corner at (top, left).
struct Geometry {
  int height = 0, width = 0;
  int resized_height = 0, resized_width = 0;
  int top = 0, left = 0;
  // A box [x0, y0, x1, y1] in tensor pixels -> image pixels, clamped to the image (float32 as Python).
  void to_image(float box[4]) const;
  // A point in tensor pixels -> image pixels in double, clamped to the image (Python's
  // Geometry.point_to_image; the OCR detector's boxes and quads).
  std::array<double, 2> point_to_image(double x, double y) const;
};

// Mirrors PreprocessSpec (its fields, defaults and checks); `order` is informational.
struct PreprocessSpec {
  ColorMode color = ColorMode::rgb;
  std::optional<Size2> resize;  // [height, width]; fit_height: [height, max width]
  std::optional<Size2> crop;    // centre crop after the resize
  Interpolation interpolation = Interpolation::linear;
  double scale = 1.0 / 255.0;
  std::vector<double> mean = {0.0};     // 1 value, or one per channel
  std::vector<double> std_dev = {1.0};  // JSON "std"; 1 value, or one per channel
  Layout layout = Layout::nchw;
  ResizeMode resize_mode = ResizeMode::stretch;
  double pad_value = 0.0;
  // fit_height: "dynamic" makes the tensor as wide as the line, rounded up to a multiple of
  // width_step, within [resize.width, max_width] (the line itself at most max_width wide).
  WidthMode width_mode = WidthMode::fixed;
  int max_width = 0;  // dynamic only; 0 = unset
  int width_step = 32;

  int channels() const { return color == ColorMode::gray ? 1 : 3; }
  // Throws Error(input) with the rule broken, as the Python constructor raises DataError.
  void validate() const;
  // The "preprocess" object; unknown keys are refused (they could change the result).
  static PreprocessSpec from_json(const Json& object);
  Json to_json() const;
  // letterbox: scale min(H / h, W / w), sides rounded half up, centred; stretch / fit_height / none likewise.
  Geometry geometry(int image_height, int image_width) const;
  // fit_height: the resized line's width (Python's line_width) and the tensor's width for it (tensor_width).
  int line_width(int image_height, int image_width) const;
  int tensor_width(int line_width) const;
};

// preprocess.json: the model's feed names and the spec (absent when the bundle was
// built from tensors, "preprocess": null).
struct BundlePreprocess {
  std::vector<std::string> inputs;
  std::optional<PreprocessSpec> spec;

  static BundlePreprocess from_json(const Json& document);
  static BundlePreprocess read(const std::string& path);  // Error(input) naming the file
};

struct Tensor {
  Shape shape;  // {C, H, W} (NCHW) or {H, W, C} (NHWC); no batch axis
  std::vector<float> data;
};

class Preprocessor {
 public:
  explicit Preprocessor(PreprocessSpec spec);
  // Reads preprocess.json; Error(input) when it has no spec.
  static Preprocessor from_file(const std::string& path);

  const PreprocessSpec& spec() const { return spec_; }
  // The tensor shape an image of this size gives (fixed when the spec resizes).
  Shape output_shape(int image_height, int image_width) const;
  Tensor run(const ImageView& image) const;
  // Writes into caller memory of output_shape(...) floats (an app's input buffer).
  void run_into(const ImageView& image, float* out, std::size_t capacity) const;

 private:
  struct Plan;
  Plan plan(const ImageView& image) const;

  PreprocessSpec spec_;
  std::vector<float> tables_;  // per output channel: the float32 value of each byte, 256 each
};

}  // namespace edgekit
