#include "edgekit/preprocess.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/limits.h"

namespace edgekit {
namespace {

template <typename E>
struct Named {
  E value;
  const char* name;
};

constexpr Named<ColorMode> kColors[] = {{ColorMode::rgb, "rgb"}, {ColorMode::bgr, "bgr"}, {ColorMode::gray, "gray"}};
constexpr Named<Layout> kLayouts[] = {{Layout::nchw, "NCHW"}, {Layout::nhwc, "NHWC"}};
constexpr Named<Interpolation> kInterpolations[] = {
    {Interpolation::linear, "linear"}, {Interpolation::nearest, "nearest"}, {Interpolation::area, "area"}};
constexpr Named<ResizeMode> kResizeModes[] = {
    {ResizeMode::stretch, "stretch"}, {ResizeMode::fit_height, "fit_height"}, {ResizeMode::letterbox, "letterbox"}};
constexpr Named<WidthMode> kWidthModes[] = {{WidthMode::fixed, "fixed"}, {WidthMode::dynamic, "dynamic"}};
const char* const kKnownKeys[] = {"color", "resize", "crop", "interpolation", "scale", "mean", "std",
                                  "layout", "resize_mode", "pad_value", "width_mode", "max_width", "width_step",
                                  "order"};

Error bad(const std::string& what, const std::string& fix) { return Error(ExitCode::input, what, fix); }

template <typename E, std::size_t N>
E parse_name(const Json& value, const char* key, const Named<E> (&table)[N]) {
  std::string names;
  for (const auto& entry : table) names += std::string(names.empty() ? "" : ", ") + entry.name;
  if (value.is_string()) {
    for (const auto& entry : table) {
      if (value.as_string() == entry.name) return entry.value;
    }
  }
  throw bad(std::string("preprocess.") + key + " is " + value.dump(), "use one of " + names);
}

template <typename E, std::size_t N>
const char* name_of(E value, const Named<E> (&table)[N]) {
  for (const auto& entry : table) {
    if (entry.value == value) return entry.name;
  }
  return "?";
}

double parse_number(const Json& value, const char* key) {
  if (!value.is_number()) throw bad(std::string("preprocess.") + key + " is " + value.dump(), "give a number");
  return value.as_number();
}

std::optional<Size2> parse_size(const Json& value, const char* key) {
  if (value.is_null()) return std::nullopt;
  const std::string fix = std::string("give ") + key + " as [height, width] of positive sizes";
  if (!value.is_array() || value.size() != 2) throw bad(std::string("preprocess.") + key + " is " + value.dump(), fix);
  int hw[2];
  for (int i = 0; i < 2; ++i) {
    const Json& v = value.at(static_cast<std::size_t>(i));
    if (!v.is_number() || v.as_number() != std::floor(v.as_number()) || v.as_number() < 1) {
      throw bad(std::string("preprocess.") + key + " is " + value.dump(), fix);
    }
    // A resize allocates height x width x channels floats per call: the side is bounded.
    if (v.as_number() > limits::kMaxResizeSide) {
      throw limits::beyond(ExitCode::input, std::string("preprocess.") + key + " " + value.dump() + " per side",
                           static_cast<std::uint64_t>(std::min(v.as_number(), 1e18)), "MAX_RESIZE_SIDE",
                           limits::kMaxResizeSide);
    }
    hw[i] = static_cast<int>(v.as_number());
  }
  return Size2{hw[0], hw[1]};
}

int parse_width(const Json& value, const char* key) {
  if (!value.is_number() || value.as_number() != std::floor(value.as_number()) || value.as_number() < 1 ||
      value.as_number() > 1e9) {
    throw bad(std::string("preprocess.") + key + " is " + value.dump(),
              std::string("give ") + key + " as a positive whole number of pixels");
  }
  return static_cast<int>(value.as_number());
}

std::vector<double> parse_numbers(const Json& value, const char* key) {
  if (!value.is_array() || value.size() == 0) {
    throw bad(std::string("preprocess.") + key + " is " + value.dump(), "give a list of 1 or C numbers");
  }
  std::vector<double> out;
  for (const Json& v : value.items()) out.push_back(parse_number(v, key));
  return out;
}

Json size_json(const std::optional<Size2>& size) {
  if (!size) return Json();
  Json out = Json::array();
  out.push(size->height);
  out.push(size->width);
  return out;
}

// Which source channel feeds each output channel: the colour conversion that is
// a permutation (BGR <-> RGB, dropped alpha, gray repeated) happens while writing
// the tensor, because resizing commutes with it exactly (cv2 resizes each channel
// with the same arithmetic).
std::vector<int> channel_map(ColorMode color, PixelOrder source) {
  if (color == ColorMode::gray) return {0};
  if (source == PixelOrder::gray) return {0, 0, 0};
  const bool source_rgb = source == PixelOrder::rgb || source == PixelOrder::rgba;
  const bool want_rgb = color == ColorMode::rgb;
  return source_rgb == want_rgb ? std::vector<int>{0, 1, 2} : std::vector<int>{2, 1, 0};
}

}  // namespace

void PreprocessSpec::validate() const {
  const int c = channels();
  for (const auto* values : {&mean, &std_dev}) {
    const char* key = values == &mean ? "mean" : "std";
    if (values->size() != 1 && values->size() != static_cast<std::size_t>(c)) {
      throw bad(std::string("preprocess.") + key + " has " + std::to_string(values->size()) + " values for " +
                    std::to_string(c) + " channel(s)",
                "give 1 or " + std::to_string(c) + " values");
    }
  }
  for (const auto* size : {&resize, &crop}) {
    const char* key = size == &resize ? "resize" : "crop";
    if (*size && (size->value().height < 1 || size->value().width < 1)) {
      throw bad(std::string("preprocess.") + key + " is " + size_json(*size).dump(),
                std::string("give ") + key + " as [height, width] of positive sizes");
    }
  }
  if (!(scale > 0) || !std::isfinite(scale)) {
    throw bad("preprocess.scale is " + json_number(scale), "give a positive number, e.g. 0.00392156862745098 (1/255)");
  }
  for (double s : std_dev) {
    if (s == 0) throw bad("preprocess.std contains 0", "std values divide the input: use non-zero values");
  }
  if (resize_mode == ResizeMode::fit_height && (!resize || crop)) {
    throw bad("preprocess.resize_mode fit_height needs resize = [height, max width] and no crop",
              "give resize and drop crop, or use resize_mode stretch");
  }
  if (resize_mode == ResizeMode::letterbox && (!resize || crop)) {
    throw bad("preprocess.resize_mode letterbox needs resize = [height, width] and no crop",
              "give resize and drop crop, or use resize_mode stretch");
  }
  if (width_step < 1) throw bad("preprocess.width_step is " + std::to_string(width_step), "give width_step as a positive whole number of pixels");
  if (width_mode == WidthMode::fixed) {
    if (max_width != 0) {
      throw bad("preprocess.max_width is given with width_mode fixed", "drop max_width, or set width_mode = \"dynamic\"");
    }
    return;
  }
  if (resize_mode != ResizeMode::fit_height || max_width < 1 || max_width < resize->width) {
    throw bad("preprocess.width_mode dynamic needs resize_mode fit_height and max_width >= resize[1]",
              "e.g. resize = [48, 320], resize_mode = \"fit_height\", max_width = 1280");
  }
  if (max_width > limits::kMaxResizeSide) {
    throw limits::beyond(ExitCode::input, "preprocess.max_width " + std::to_string(max_width),
                         static_cast<std::uint64_t>(max_width), "MAX_RESIZE_SIDE", limits::kMaxResizeSide);
  }
}

int PreprocessSpec::line_width(int image_height, int image_width) const {
  if (width_mode == WidthMode::dynamic) {
    // Python (PaddleOCR's resize_norm_img): wide = H * (w / h) in double; ceil(wide) when it fits in resize[1],
    // else int(wide); at most max_width
    const double wide = static_cast<double>(resize->height) * (static_cast<double>(image_width) / image_height);
    const double fits = std::ceil(wide);
    const double chosen = fits <= resize->width ? fits : std::floor(wide);
    return static_cast<int>(std::max(1.0, std::min<double>(max_width, chosen)));
  }
  // Python: max(1, min(cap, ceil(H * w / h))), the division in double
  const int cap = resize->width;
  const double wide = static_cast<double>(static_cast<long long>(resize->height) * image_width) / image_height;
  return static_cast<int>(std::max(1.0, std::min<double>(cap, std::ceil(wide))));
}

int PreprocessSpec::tensor_width(int line) const {
  if (width_mode != WidthMode::dynamic) return resize->width;
  const long long stepped = (static_cast<long long>(line) + width_step - 1) / width_step * width_step;
  return static_cast<int>(std::min<long long>(max_width, std::max<long long>(resize->width, stepped)));
}

Geometry PreprocessSpec::geometry(int image_height, int image_width) const {
  Geometry g;
  g.height = image_height;
  g.width = image_width;
  g.resized_height = image_height;
  g.resized_width = image_width;
  if (resize) {
    g.resized_height = resize->height;
    g.resized_width = resize->width;
    if (resize_mode == ResizeMode::letterbox) {
      // Python: min(H / h, W / w) in double, floor(side * scale + 0.5) within [1, H or W]
      const double s = std::min(static_cast<double>(resize->height) / image_height,
                                static_cast<double>(resize->width) / image_width);
      g.resized_height = std::max(1, std::min(resize->height, static_cast<int>(std::floor(image_height * s + 0.5))));
      g.resized_width = std::max(1, std::min(resize->width, static_cast<int>(std::floor(image_width * s + 0.5))));
      g.top = (resize->height - g.resized_height) / 2;
      g.left = (resize->width - g.resized_width) / 2;
    } else if (resize_mode == ResizeMode::fit_height) {
      g.resized_width = line_width(image_height, image_width);
    }
  }
  if (crop) {
    g.top -= (g.resized_height - crop->height) / 2;
    g.left -= (g.resized_width - crop->width) / 2;
  }
  return g;
}

void Geometry::to_image(float box[4]) const {
  const float sx = static_cast<float>(static_cast<double>(width) / resized_width);
  const float sy = static_cast<float>(static_cast<double>(height) / resized_height);
  for (int k = 0; k < 4; ++k) {
    const bool is_x = k % 2 == 0;
    const float v = (box[k] - static_cast<float>(is_x ? left : top)) * (is_x ? sx : sy);
    box[k] = std::min(std::max(v, 0.0f), static_cast<float>(is_x ? width : height));
  }
}

std::array<double, 2> Geometry::point_to_image(double x, double y) const {
  // Python: (x - left) * (width / resized_width), then min(max(v, 0.0), width), all in double
  const double sx = static_cast<double>(width) / static_cast<double>(resized_width);
  const double sy = static_cast<double>(height) / static_cast<double>(resized_height);
  return {std::min(std::max((x - left) * sx, 0.0), static_cast<double>(width)),
          std::min(std::max((y - top) * sy, 0.0), static_cast<double>(height))};
}

PreprocessSpec PreprocessSpec::from_json(const Json& object) {
  if (!object.is_object()) throw bad("preprocess is " + object.dump(), "give an object of preprocessing keys");
  for (const auto& member : object.members()) {
    if (std::find_if(std::begin(kKnownKeys), std::end(kKnownKeys),
                     [&](const char* k) { return member.first == k; }) == std::end(kKnownKeys)) {
      throw bad("unknown preprocess key: " + member.first,
                "this core reads color, resize, crop, interpolation, scale, mean, std, layout, resize_mode, "
                "pad_value, width_mode, max_width, width_step; update the app's edgekit core");
    }
  }
  PreprocessSpec spec;
  if (const Json* v = object.find("color")) spec.color = parse_name(*v, "color", kColors);
  if (const Json* v = object.find("resize")) spec.resize = parse_size(*v, "resize");
  if (const Json* v = object.find("crop")) spec.crop = parse_size(*v, "crop");
  if (const Json* v = object.find("interpolation")) spec.interpolation = parse_name(*v, "interpolation", kInterpolations);
  if (const Json* v = object.find("scale")) spec.scale = parse_number(*v, "scale");
  if (const Json* v = object.find("mean")) spec.mean = parse_numbers(*v, "mean");
  if (const Json* v = object.find("std")) spec.std_dev = parse_numbers(*v, "std");
  if (const Json* v = object.find("layout")) spec.layout = parse_name(*v, "layout", kLayouts);
  if (const Json* v = object.find("resize_mode")) spec.resize_mode = parse_name(*v, "resize_mode", kResizeModes);
  if (const Json* v = object.find("pad_value")) spec.pad_value = parse_number(*v, "pad_value");
  if (const Json* v = object.find("width_mode")) spec.width_mode = parse_name(*v, "width_mode", kWidthModes);
  if (const Json* v = object.find("max_width"); v && !v->is_null()) spec.max_width = parse_width(*v, "max_width");
  if (const Json* v = object.find("width_step")) spec.width_step = parse_width(*v, "width_step");
  spec.validate();
  return spec;
}

Json PreprocessSpec::to_json() const {
  Json out = Json::object();
  out.set("color", name_of(color, kColors));
  out.set("resize", size_json(resize));
  out.set("crop", size_json(crop));
  out.set("interpolation", name_of(interpolation, kInterpolations));
  out.set("scale", scale);
  out.set("mean", Json::array_of(mean));
  out.set("std", Json::array_of(std_dev));
  out.set("layout", name_of(layout, kLayouts));
  out.set("resize_mode", name_of(resize_mode, kResizeModes));
  out.set("pad_value", pad_value);
  if (width_mode == WidthMode::dynamic) {  // fixed-width files stay as older cores read them (Python likewise)
    out.set("width_mode", name_of(width_mode, kWidthModes));
    out.set("max_width", max_width);
    out.set("width_step", width_step);
  }
  return out;
}

BundlePreprocess BundlePreprocess::from_json(const Json& document) {
  if (!document.is_object()) throw bad("preprocess.json is not an object", "give {\"inputs\": [...], \"preprocess\": ...}");
  BundlePreprocess out;
  if (const Json* inputs = document.find("inputs")) {
    if (!inputs->is_array()) throw bad("preprocess.json inputs is not a list", "list the model's feed names");
    for (const Json& name : inputs->items()) out.inputs.push_back(name.as_string());
  }
  const Json* spec = document.find("preprocess");
  if (spec != nullptr && !spec->is_null()) out.spec = PreprocessSpec::from_json(*spec);
  return out;
}

BundlePreprocess BundlePreprocess::read(const std::string& path) {
  try {
    return from_json(Json::parse(read_file_text(path, ExitCode::input)));
  } catch (const Error& e) {
    if (e.line().rfind(path, 0) == 0) throw;
    throw Error(e.code(), path + ": " + e.what(), e.fix());
  }
}

struct Preprocessor::Plan {
  int resize_height = 0, resize_width = 0;  // 0: no resize
  int crop_top = 0, crop_left = 0;
  int height = 0, width = 0;  // the image part of the tensor
  int tensor_width = 0;       // width plus the fit_height padding
  int pad_top = 0, pad_left = 0, tensor_height = 0;  // letterbox: the image's place in the tensor
};

Preprocessor::Preprocessor(PreprocessSpec spec) : spec_(std::move(spec)) {
  spec_.validate();
  const float scale = static_cast<float>(spec_.scale);
  tables_.resize(static_cast<std::size_t>(spec_.channels()) * 256);
  for (int c = 0; c < spec_.channels(); ++c) {
    const float mean = static_cast<float>(spec_.mean[spec_.mean.size() == 1 ? 0 : c]);
    const float deviation = static_cast<float>(spec_.std_dev[spec_.std_dev.size() == 1 ? 0 : c]);
    // numpy: image.astype(float32) * float32(scale), then (x - mean) / std in float32.
    for (int p = 0; p < 256; ++p) {
      const float x = static_cast<float>(p) * scale;
      tables_[static_cast<std::size_t>(c) * 256 + p] = (x - mean) / deviation;
    }
  }
}

Preprocessor Preprocessor::from_file(const std::string& path) {
  BundlePreprocess bundle = BundlePreprocess::read(path);
  if (!bundle.spec) {
    throw Error(ExitCode::input, path + " has no preprocessing (\"preprocess\": null)",
                "the bundle was built from tensors: feed the model tensors prepared like its data");
  }
  return Preprocessor(*bundle.spec);
}

Preprocessor::Plan Preprocessor::plan(const ImageView& image) const {
  if (image.height < 1 || image.width < 1) image.check();
  Plan p;
  p.height = image.height;
  p.width = image.width;
  if (spec_.resize) {
    p.resize_height = spec_.resize->height;
    p.resize_width = spec_.resize->width;
    if (spec_.resize_mode == ResizeMode::fit_height) p.resize_width = spec_.line_width(image.height, image.width);
    if (spec_.resize_mode == ResizeMode::letterbox) {
      const Geometry g = spec_.geometry(image.height, image.width);
      p.resize_height = g.resized_height;
      p.resize_width = g.resized_width;
      p.pad_top = g.top;
      p.pad_left = g.left;
    }
    p.height = p.resize_height;
    p.width = p.resize_width;
  }
  p.tensor_width = spec_.resize_mode == ResizeMode::fit_height ? spec_.tensor_width(p.resize_width) : p.width;
  p.tensor_height = p.height;
  if (spec_.resize_mode == ResizeMode::letterbox) {
    p.tensor_height = spec_.resize->height;
    p.tensor_width = spec_.resize->width;
  }
  if (spec_.crop) {
    const Size2 c = *spec_.crop;
    if (c.height > p.height || c.width > p.width) {
      throw bad("crop " + std::to_string(c.height) + "x" + std::to_string(c.width) + " is larger than the resized image " +
                    std::to_string(p.height) + "x" + std::to_string(p.width),
                "make preprocess.crop <= preprocess.resize");
    }
    p.crop_top = (p.height - c.height) / 2;
    p.crop_left = (p.width - c.width) / 2;
    p.height = c.height;
    p.width = c.width;
    p.tensor_width = c.width;
    p.tensor_height = c.height;
  }
  return p;
}

Shape Preprocessor::output_shape(int image_height, int image_width) const {
  ImageView probe;
  probe.height = image_height;
  probe.width = image_width;
  const Plan p = plan(probe);
  const std::int64_t c = spec_.channels();
  if (spec_.layout == Layout::nchw) return {c, p.tensor_height, p.tensor_width};
  return {p.tensor_height, p.tensor_width, c};
}

Tensor Preprocessor::run(const ImageView& image) const {
  image.check();  // before the tensor is allocated for its size
  Tensor t;
  t.shape = output_shape(image.height, image.width);
  t.data.resize(static_cast<std::size_t>(element_count(t.shape)));
  run_into(image, t.data.data(), t.data.size());
  return t;
}

void Preprocessor::run_into(const ImageView& image, float* out, std::size_t capacity) const {
  image.check();
  const Plan p = plan(image);
  const int channels = spec_.channels();
  const std::size_t total = static_cast<std::size_t>(channels) * p.tensor_height * p.tensor_width;
  if (capacity < total) {
    throw Error(ExitCode::input, "the tensor buffer holds " + std::to_string(capacity) + " floats, the input needs " +
                                     std::to_string(total),
                "allocate output_shape(...) floats");
  }
  Image gray, resized;
  ImageView view = image;
  if (spec_.color == ColorMode::gray && image.order != PixelOrder::gray) {
    gray = to_gray(image);
    view = gray.view();
  }
  if (p.resize_height != 0) {
    resized = resize(view, p.resize_height, p.resize_width, spec_.interpolation);
    view = resized.view();
  }
  view = view.crop(p.crop_top, p.crop_left, p.height, p.width);

  const std::vector<int> source = channel_map(spec_.color, view.order);
  const float pad = static_cast<float>(spec_.pad_value);
  const std::size_t plane = static_cast<std::size_t>(p.tensor_height) * p.tensor_width;
  if (p.tensor_height != p.height || p.pad_left != 0) {
    // letterbox: the border is pad_value; the rows below write the image part at (pad_top, pad_left)
    std::fill(out, out + total, pad);
    const std::size_t offset = static_cast<std::size_t>(p.pad_top) * p.tensor_width + p.pad_left;
    out += spec_.layout == Layout::nchw ? offset : offset * channels;
  }
  const int row_end = p.tensor_width - p.pad_left;  // the row's last column, from the (shifted) image origin
  for (int c = 0; c < channels; ++c) {
    const float* table = tables_.data() + static_cast<std::size_t>(c) * 256;
    const int sc = source[c];
    for (int y = 0; y < p.height; ++y) {
      const std::uint8_t* s = view.row(y) + sc;
      const std::size_t row = static_cast<std::size_t>(y) * p.tensor_width;
      if (spec_.layout == Layout::nchw) {
        float* d = out + c * plane + row;
        for (int x = 0; x < p.width; ++x) d[x] = table[s[static_cast<std::size_t>(x) * view.channels]];
        std::fill(d + p.width, d + row_end, pad);
      } else {
        float* d = out + row * channels + c;
        for (int x = 0; x < p.width; ++x) d[static_cast<std::size_t>(x) * channels] = table[s[static_cast<std::size_t>(x) * view.channels]];
        for (int x = p.width; x < row_end; ++x) d[static_cast<std::size_t>(x) * channels] = pad;
      }
    }
  }
}

}  // namespace edgekit
