#include <string>

#include "edgekit/json.h"
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
