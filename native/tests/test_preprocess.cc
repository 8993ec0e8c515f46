#include <cmath>
#include <vector>

#include "edgekit/preprocess.h"
#include "harness.h"

namespace {

using namespace edgekit;

PreprocessSpec spec_of(const std::string& json) { return PreprocessSpec::from_json(Json::parse(json)); }

}  // namespace

EK_TEST(preprocess, spec_reads_python_json_with_defaults_for_old_bundles) {
  const PreprocessSpec s = spec_of(
      R"({"color": "bgr", "crop": null, "interpolation": "area", "layout": "NHWC", "mean": [0.5, 0.4, 0.3],
          "order": ["decode", "color", "resize", "crop", "scale", "normalize", "layout"], "resize": [32, 48],
          "scale": 0.00392156862745098, "std": [0.25]})");
  EK_CHECK(s.color == ColorMode::bgr && s.interpolation == Interpolation::area && s.layout == Layout::nhwc);
  EK_CHECK(s.resize_mode == ResizeMode::stretch && s.pad_value == 0.0);  // absent in old bundles
  EK_CHECK_EQ(s.resize->height, 32);
  EK_CHECK_EQ(s.resize->width, 48);
  EK_CHECK_EQ(s.mean.size(), 3u);
  EK_CHECK(!s.crop);
  EK_CHECK_EQ(PreprocessSpec::from_json(s.to_json()).to_json().dump(), s.to_json().dump());
}

EK_TEST(preprocess, spec_refuses_what_python_refuses) {
  EK_CHECK_ERROR(spec_of(R"({"colour": "rgb"})"), input, "unknown preprocess key: colour");
  EK_CHECK_ERROR(spec_of(R"({"color": "hsv"})"), input, "use one of rgb, bgr, gray");
  EK_CHECK_ERROR(spec_of(R"({"color": "gray", "mean": [1, 2, 3]})"), input, "3 values for 1 channel(s)");
  EK_CHECK_ERROR(spec_of(R"({"std": [1, 0, 1]})"), input, "std contains 0");
  EK_CHECK_ERROR(spec_of(R"({"scale": 0})"), input, "preprocess.scale");
  EK_CHECK_ERROR(spec_of(R"({"resize": [0, 4]})"), input, "positive sizes");
  EK_CHECK_ERROR(spec_of(R"({"resize_mode": "fit_height"})"), input, "fit_height needs resize");
  EK_CHECK_ERROR(spec_of(R"({"resize_mode": "fit_height", "resize": [32, 100], "crop": [8, 8]})"), input, "no crop");
}

EK_TEST(preprocess, values_are_float32_scale_then_mean_and_std) {
  Preprocessor pre(spec_of(R"({"color": "gray", "scale": 0.00392156862745098, "mean": [0.5], "std": [0.5]})"));
  const std::uint8_t px[] = {0, 255, 128};
  const Tensor t = pre.run(ImageView::gray(px, 1, 3));
  EK_CHECK_EQ(t.shape, (Shape{1, 1, 3}));
  for (int i = 0; i < 3; ++i) {
    const float x = static_cast<float>(px[i]) * static_cast<float>(0.00392156862745098);
    EK_CHECK_EQ(t.data[i], (x - 0.5f) / 0.5f);
  }
  EK_CHECK_EQ(t.data[0], -1.0f);
}

EK_TEST(preprocess, channel_order_follows_the_source_and_the_spec) {
  // one RGBA pixel (R=10, G=20, B=30, A=40) into RGB and BGR tensors, scale 1
  const std::uint8_t rgba[] = {10, 20, 30, 40};
  Preprocessor to_rgb(spec_of(R"({"color": "rgb", "scale": 1})"));
  Preprocessor to_bgr(spec_of(R"({"color": "bgr", "scale": 1, "layout": "NHWC"})"));
  EK_CHECK_EQ(to_rgb.run(ImageView::rgba(rgba, 1, 1)).data, (std::vector<float>{10, 20, 30}));
  EK_CHECK_EQ(to_bgr.run(ImageView::rgba(rgba, 1, 1)).data, (std::vector<float>{30, 20, 10}));
  EK_CHECK_EQ(to_rgb.run(ImageView::bgra(rgba, 1, 1)).data, (std::vector<float>{30, 20, 10}));
  const std::uint8_t gray[] = {7};
  EK_CHECK_EQ(to_rgb.run(ImageView::gray(gray, 1, 1)).data, (std::vector<float>{7, 7, 7}));
}

EK_TEST(preprocess, layouts_and_centre_crop) {
  // 2x4 BGR, crop 2x2 at left (4 - 2) // 2 = 1
  std::vector<std::uint8_t> px;
  for (int i = 0; i < 24; ++i) px.push_back(static_cast<std::uint8_t>(i));
  Preprocessor chw(spec_of(R"({"color": "bgr", "scale": 1, "crop": [2, 2]})"));
  Preprocessor hwc(spec_of(R"({"color": "bgr", "scale": 1, "crop": [2, 2], "layout": "NHWC"})"));
  const Tensor a = chw.run(ImageView::bgr(px.data(), 2, 4)), b = hwc.run(ImageView::bgr(px.data(), 2, 4));
  EK_CHECK_EQ(a.shape, (Shape{3, 2, 2}));
  EK_CHECK_EQ(b.shape, (Shape{2, 2, 3}));
  EK_CHECK_EQ(a.data, (std::vector<float>{3, 6, 15, 18, 4, 7, 16, 19, 5, 8, 17, 20}));
  EK_CHECK_EQ(b.data, (std::vector<float>{3, 4, 5, 6, 7, 8, 15, 16, 17, 18, 19, 20}));
  Preprocessor too_big(spec_of(R"({"crop": [3, 3]})"));
  EK_CHECK_ERROR(too_big.run(ImageView::bgr(px.data(), 2, 4)), input, "larger than the resized image 2x4");
}

EK_TEST(preprocess, fit_height_keeps_the_aspect_and_pads_the_tensor) {
  Preprocessor pre(spec_of(
      R"({"color": "gray", "resize": [4, 10], "resize_mode": "fit_height", "scale": 1, "pad_value": -7})"));
  // width ceil(4 * 6 / 8) = 3 of 10; a wide line is capped at 10
  EK_CHECK_EQ(pre.output_shape(8, 6), (Shape{1, 4, 10}));
  EK_CHECK_EQ(pre.output_shape(2, 1000), (Shape{1, 4, 10}));
  std::vector<std::uint8_t> px(8 * 6, 50);
  const Tensor t = pre.run(ImageView::gray(px.data(), 8, 6));
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 10; ++x) EK_CHECK_EQ(t.data[y * 10 + x], x < 3 ? 50.0f : -7.0f);
  }
  std::vector<float> small(10);
  EK_CHECK_ERROR(pre.run_into(ImageView::gray(px.data(), 8, 6), small.data(), small.size()), input, "needs 40");
}

EK_TEST(preprocess, bundle_json_with_and_without_a_spec) {
  const auto with = BundlePreprocess::from_json(Json::parse(R"({"inputs": ["x"], "preprocess": {"color": "gray"}})"));
  EK_CHECK_EQ(with.inputs, (std::vector<std::string>{"x"}));
  EK_CHECK(with.spec && with.spec->color == ColorMode::gray);
  const auto without = BundlePreprocess::from_json(Json::parse(R"({"inputs": ["a", "b"], "preprocess": null})"));
  EK_CHECK(!without.spec);
}
