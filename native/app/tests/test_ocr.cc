#include <string>
#include <vector>

#include "edgekit/model.h"
#include "edgekit/ocr.h"
#include "edgekit/selftest.h"
#include "harness.h"

using namespace edgekit;

// predict.sort_boxes: top then left; tops closer than 10 px are one line, left to right.
EK_TEST(ocr, reading_order) {
  const std::vector<Box> boxes = {{300, 52, 400, 70}, {10, 50, 100, 70}, {10, 10, 90, 30}, {200, 45, 280, 70},
                                  {5, 100, 50, 120}};
  EK_CHECK_EQ(sort_boxes(boxes), (std::vector<std::size_t>{2, 1, 3, 0, 4}));  // as predict.sort_boxes
  EK_CHECK(sort_boxes({}).empty());
  // equal keys keep their order (Python's sort is stable)
  EK_CHECK_EQ(sort_boxes({{1, 1, 2, 2}, {1, 1, 3, 3}}), (std::vector<std::size_t>{0, 1}));
}

EK_TEST(ocr, crops_round_outwards_and_clamp) {
  const PixelRect r = crop_rect({10.4, 5.6, 20.2, 9.01}, 100, 200);
  EK_CHECK_EQ((std::vector<int>{r.top, r.left, r.height, r.width}), (std::vector<int>{5, 10, 5, 11}));
  const PixelRect edge = crop_rect({-3.5, -1, 250.5, 130}, 100, 200);
  EK_CHECK_EQ((std::vector<int>{edge.top, edge.left, edge.height, edge.width}), (std::vector<int>{0, 0, 100, 200}));
  const PixelRect outside = crop_rect({210, 5, 230, 9}, 100, 200);
  EK_CHECK(outside.width < 1);
}

EK_TEST(ocr, rotate180_reverses_rows_and_columns) {
  const std::uint8_t px[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 99, 99};  // 2x2 BGR, stride 7: 7 pads row 0
  const Image turned = rotate180(ImageView::bgr(px, 2, 2, 7));
  EK_CHECK_EQ(turned.data, (std::vector<std::uint8_t>{11, 12, 99, 8, 9, 10, 4, 5, 6, 1, 2, 3}));
}

EK_TEST(ocr, boxes_scale_like_numpy) {
  Json box = Json::array();
  for (double v : {2.675, 10.0, 100.5, 33.33}) box.push(v);
  Json item = Json::object();
  item.set("box", box);
  item.set("score", 0.7);
  Json boxes = Json::array();
  boxes.push(item);
  Geometry stretch;  // a 200 x 100 image stretched to 100 x 100: x as is, y doubled
  stretch.height = 200, stretch.width = 100, stretch.resized_height = 100, stretch.resized_width = 100;
  const Json out = boxes_to_image(boxes, stretch);
  // numpy: 2.675 * 100 is 267.5 in double, rint -> 268: 2.68 (Python's round(2.675, 2) gives 2.67)
  EK_CHECK_EQ(out.at(0).at("box").at(0).as_number(), 2.68);
  EK_CHECK_EQ(out.at(0).at("box").at(1).as_number(), 20.0);
  EK_CHECK_EQ(out.at(0).at("box").at(2).as_number(), 100.0);  // 100.5 clamped to the image's width
  EK_CHECK_EQ(out.at(0).at("box").at(3).as_number(), 66.66);
  EK_CHECK_EQ(out.at(0).at("score").as_number(), 0.7);
}

// A 100 x 200 page letterboxed into 64 x 64: scale 0.32, the page at rows 16..47; the border maps off the page.
EK_TEST(ocr, letterboxed_quads_map_back_to_the_page) {
  PreprocessSpec spec;
  spec.resize = Size2{64, 64};
  spec.resize_mode = ResizeMode::letterbox;
  const Geometry g = det_geometry(spec, 100, 200, "det");
  EK_CHECK_EQ((std::vector<int>{g.resized_height, g.resized_width, g.top, g.left}), (std::vector<int>{32, 64, 16, 0}));
  const Json boxes = Json::parse(R"([{"box": [8, 10, 40, 26], "quad": [[8, 10], [40, 10], [40, 26], [8, 26]], "score": 1}])");
  const Json out = boxes_to_image(boxes, g);
  EK_CHECK_EQ(out.at(0).at("box").dump(), Json::parse("[25.0, 0.0, 125.0, 31.25]").dump());
  EK_CHECK_EQ(out.at(0).at("quad").at(2).dump(), Json::parse("[125.0, 31.25]").dump());
  spec.resize_mode = ResizeMode::fit_height;
  EK_CHECK_ERROR(det_geometry(spec, 100, 200, "det"), input, "cannot be mapped back to the page");
}

EK_TEST(ocr, results_compare_decisions_exactly_and_scores_within_a_tolerance) {
  const Json a = Json::parse("{\"class\": 3, \"label\": \"3\", \"score\": 0.5}");
  EK_CHECK_EQ(compare_results(a, Json::parse("{\"class\": 3, \"label\": \"3\", \"score\": 0.5000009}"), 1e-6), std::string());
  EK_CHECK(!compare_results(a, Json::parse("{\"class\": 3, \"label\": \"3\", \"score\": 0.51}"), 1e-6).empty());
  EK_CHECK_EQ(compare_results(a, Json::parse("{\"class\": 3, \"label\": \"3\", \"score\": 0.51}"), 1e-6, false),
              std::string());
  EK_CHECK(!compare_results(a, Json::parse("{\"class\": 4, \"label\": \"3\", \"score\": 0.5}"), 1e-6).empty());
  const Json boxes = Json::parse("[{\"box\": [1, 2, 3, 4], \"score\": 0.9}]");
  EK_CHECK(!compare_results(boxes, Json::parse("[{\"box\": [1, 2, 3, 4.01], \"score\": 0.9}]"), 1).empty());
  EK_CHECK(!compare_results(boxes, Json::parse("[]"), 1).empty());
}
