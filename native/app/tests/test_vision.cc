#include <string>

#include "edgekit/json.h"
#include "edgekit/selftest.h"
#include "edgekit/vision_task.h"
#include "harness.h"

using namespace edgekit;

namespace {
Json parse(const std::string& text) { return Json::parse(text); }
}  // namespace

// The self-test's detection check: classes in order, the worst corner, the worst IoU.
EK_TEST(vision, detections_compared_in_order) {
  const Json want = parse(R"([{"box": [0, 0, 10, 10], "class": 1}, {"box": [20, 20, 30, 30], "class": 0}])");
  const Json same = compare_detections(want, parse(R"([{"box": [0.5, 0, 10, 10], "class": 1},
                                                       {"box": [20, 20, 30, 30], "class": 0}])"));
  EK_CHECK(same.at("same_classes").as_bool());
  EK_CHECK_EQ(same.at("max_corner_px").as_number(), 0.5);
  EK_CHECK(same.at("min_iou").as_number() > 0.94 && same.at("min_iou").as_number() < 0.96);
  const Json swapped = compare_detections(want, parse(R"([{"box": [0, 0, 10, 10], "class": 0},
                                                          {"box": [20, 20, 30, 30], "class": 0}])"));
  EK_CHECK(!swapped.at("same_classes").as_bool());
  const Json fewer = compare_detections(want, parse(R"([{"box": [0, 0, 10, 10], "class": 1}])"));
  EK_CHECK(!fewer.at("same_classes").as_bool());
  EK_CHECK_EQ(fewer.at("expected_count").as_int(), 2);
  EK_CHECK(compare_detections(parse("[]"), parse("[]")).at("same_classes").as_bool());  // nothing found: agreement
}

// The mask check: run-length masks decoded and compared pixel by pixel.
EK_TEST(vision, masks_compared_pixel_by_pixel) {
  const Json want = parse(R"({"size": [2, 3], "rle": [[0, 4], [2, 2]]})");
  EK_CHECK_EQ(compare_masks(want, want).at("differing").as_int(), 0);
  EK_CHECK_EQ(compare_masks(want, parse(R"({"size": [2, 3], "rle": [[0, 3], [2, 3]]})")).at("differing").as_int(), 1);
  EK_CHECK_EQ(compare_masks(want, parse(R"({"size": [3, 2], "rle": [[0, 4], [2, 2]]})")).at("differing").as_int(), 6);
  EK_CHECK_EQ(compare_masks(want, parse(R"({"size": [2, 3], "rle": [[0, 9]]})")).at("differing").as_int(), 6);
}

// The INT8 self-test's matching: per class, best score first, the best unmatched IoU >= 0.5;
// a score crossing the threshold is no miss, a moved or re-classed box is.
EK_TEST(vision, detections_matched_like_map) {
  const Json want = parse(R"([{"box": [0, 0, 10, 10], "class": 1, "score": 0.9},
                              {"box": [20, 20, 30, 30], "class": 0, "score": 0.6},
                              {"box": [50, 50, 60, 60], "class": 0, "score": 0.2}])");
  // reordered, the second one's score below the threshold, a weak extra box: all found
  const Json got = parse(R"([{"box": [20, 20, 30, 31], "class": 0, "score": 0.45},
                             {"box": [0, 0, 10, 10], "class": 1, "score": 0.95},
                             {"box": [70, 70, 80, 80], "class": 2, "score": 0.1}])");
  const Json m = match_detections(want, got, 0.5, 0.5);
  EK_CHECK_EQ(m.at("expected").as_int(), 2);
  EK_CHECK_EQ(m.at("found").as_int(), 2);
  EK_CHECK_EQ(m.at("recall").as_number(), 1.0);
  EK_CHECK_EQ(m.at("confident").as_int(), 1);
  EK_CHECK_EQ(m.at("precision").as_number(), 1.0);
  EK_CHECK(m.at("min_iou").as_number() > 0.9 && m.at("min_iou").as_number() < 0.91);
  // the class-1 box moved by half its size and a confident box of the wrong class
  const Json bad = match_detections(want, parse(R"([{"box": [5, 5, 15, 15], "class": 1, "score": 0.9},
                                                    {"box": [20, 20, 30, 30], "class": 2, "score": 0.8}])"),
                                    0.5, 0.5);
  EK_CHECK_EQ(bad.at("found").as_int(), 0);
  EK_CHECK_EQ(bad.at("recall").as_number(), 0.0);
  EK_CHECK_EQ(bad.at("precision").as_number(), 0.0);
  EK_CHECK(bad.at("min_iou").is_null());
  const Json none = match_detections(parse("[]"), parse("[]"), 0.5, 0.5);  // nothing to find: agreement
  EK_CHECK_EQ(none.at("recall").as_number(), 1.0);
  EK_CHECK_EQ(none.at("precision").as_number(), 1.0);
}
