#include <cmath>
#include <vector>

#include "edgekit/db_geometry.h"
#include "edgekit/numpy_compat.h"
#include "edgekit/postprocess.h"
#include "harness.h"

namespace {

using namespace edgekit;

Array floats(const Shape& shape, const std::vector<float>& values) {
  Array a;
  a.dtype = DType::float32;
  a.shape = shape;
  a.data.resize(values.size() * sizeof(float));
  std::copy(values.begin(), values.end(), a.as<float>());
  return a;
}

Postprocessor task(const std::string& json) { return Postprocessor(TaskSpec::from_json(Json::parse(json))); }

}  // namespace

EK_TEST(numpy, sum_is_pairwise_like_numpy) {
  // numpy.float32 sum of [1e8, 1, -1e8] + [1] * 10 is 9 (8 partial sums); a running sum gives 10
  std::vector<float> v = {1e8f, 1, -1e8f};
  v.resize(13, 1.0f);
  EK_CHECK_EQ(numpy_sum(v.data(), v.size()), 9.0f);
  EK_CHECK_EQ(numpy_mean(v.data(), v.size()), static_cast<float>(9.0 / 13.0));
  EK_CHECK(std::isnan(numpy_mean(v.data(), 0)));
  const std::vector<double> d = {0.25, 0.5, 0.125};
  EK_CHECK_EQ(numpy_sum(d.data(), d.size()), 0.875);
}

EK_TEST(numpy, argmax_takes_the_first_maximum_and_nan_wins) {
  const std::vector<float> tie = {1, 3, 3, 2}, nan = {1, NAN, 5, NAN};
  EK_CHECK_EQ(numpy_argmax(tie.data(), tie.size()), 1u);
  EK_CHECK_EQ(numpy_argmax(nan.data(), nan.size()), 1u);
}

EK_TEST(numpy, python_and_numpy_rounding_differ_as_they_do) {
  EK_CHECK_EQ(python_round(2.675, 2), 2.67);        // 2.67499999... in binary
  EK_CHECK_EQ(numpy_round(2.675, 2), 2.68);         // rint(267.49999999999997 * ...) path
  EK_CHECK_EQ(python_round(0.0078125, 6), 0.007812);  // an exact tie: to even
  EK_CHECK_EQ(python_round(0.66524143, 6), 0.665241);
  EK_CHECK_EQ(numpy_round(7.0, 2), 7.0);
}

EK_TEST(postprocess, contours_follow_borders_and_holes_like_cv2) {
  // cv2.findContours(RETR_LIST, CHAIN_APPROX_SIMPLE) on a 3x3 square, a 6x2 bar and a
  // 5x4 block with a 1x2 hole: the last border found comes first, the hole before its block.
  std::vector<std::uint8_t> b(20 * 20, 0);
  auto fill = [&](int y0, int y1, int x0, int x1, std::uint8_t v) {
    for (int y = y0; y < y1; ++y)
      for (int x = x0; x < x1; ++x) b[y * 20 + x] = v;
  };
  fill(2, 5, 2, 5, 1);
  fill(10, 14, 3, 8, 1);
  fill(11, 13, 5, 6, 0);
  fill(2, 4, 12, 18, 1);
  const auto c = find_contours(b.data(), 20, 20);
  EK_CHECK_EQ(c.size(), 4u);
  const std::vector<std::vector<std::int64_t>> want = {
      {4, 11, 5, 10, 6, 11, 6, 12, 5, 13, 4, 12}, {3, 10, 3, 13, 7, 13, 7, 10}, {12, 2, 12, 3, 17, 3, 17, 2},
      {2, 2, 2, 4, 4, 4, 4, 2}};
  for (std::size_t i = 0; i < want.size(); ++i) {
    std::vector<std::int64_t> got;
    for (const IPoint& p : c[i]) got.push_back(p.x), got.push_back(p.y);
    EK_CHECK_EQ(got, want[i]);
  }
  const std::vector<std::uint8_t> dot = {0, 1, 0, 0};
  EK_CHECK_EQ(find_contours(dot.data(), 2, 2).size(), 1u);
}

EK_TEST(postprocess, min_area_rect_hull_and_fill_match_python) {
  // edgekit/tasks/db.py: min_area_rect([[0,0],[4,2],[3,4],[-1,2]]) is the rectangle itself, short side sqrt(5)
  const MinRect r = min_area_rect({{0, 0}, {4, 2}, {3, 4}, {-1, 2}, {2, 2}});
  EK_CHECK_EQ(r.corners[0].x, 0.0);
  EK_CHECK_EQ(r.corners[1].x, 4.0);
  EK_CHECK_EQ(r.corners[2].y, 4.0);
  EK_CHECK_EQ(r.corners[3].x, -1.0);
  EK_CHECK_EQ(r.short_side, std::sqrt(5.0));
  EK_CHECK_EQ(convex_hull({{0, 0}, {2, 0}, {1, 0}, {2, 2}, {0, 2}, {1, 1}}).size(), 4u);  // collinear and inner dropped
  // db.polygon_mask([[1,0],[6,2],[4,6],[0,3]], 7, 7) == cv2.fillPoly
  const std::vector<std::uint8_t> want = {0, 1, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                          1, 1, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0};
  EK_CHECK_EQ(polygon_mask({{1, 0}, {6, 2}, {4, 6}, {0, 3}}, 7, 7), want);
  // db.unclip: the 3x3 square grown by 9 * 1.5 / 12 through Clipper
  const Contour grown = unclip({DPoint{3, 2}, DPoint{6, 2}, DPoint{6, 5}, DPoint{3, 5}}, 1.5);
  const Contour expected = {{7, 2}, {7, 5}, {6, 6}, {3, 6}, {2, 5}, {2, 2}, {3, 1}, {6, 1}};
  EK_CHECK_EQ(grown.size(), expected.size());
  for (std::size_t i = 0; i < expected.size() && i < grown.size(); ++i) EK_CHECK(grown[i] == expected[i]);
}

EK_TEST(postprocess, db_boxes_are_paddleocr_quads) {
  // 10x12 map, a 4x4 blob of 0.9 at (3, 2) and a 2x2 blob (too small) -- Python gives
  // [(((2, 1), (7, 1), (7, 6), (2, 6)), 0.9)]
  std::vector<float> p(10 * 12, 0.0f);
  for (int y = 2; y < 6; ++y)
    for (int x = 3; x < 7; ++x) p[y * 12 + x] = 0.9f;
  for (int y = 8; y < 10; ++y)
    for (int x = 0; x < 2; ++x) p[y * 12 + x] = 0.8f;
  const auto boxes = db_boxes(p.data(), 10, 12, DbOptions{});
  EK_CHECK_EQ(boxes.size(), 1u);
  EK_CHECK_EQ(boxes[0].quad[0][0], std::int64_t{2});
  EK_CHECK_EQ(boxes[0].quad[0][1], std::int64_t{1});
  EK_CHECK_EQ(boxes[0].quad[2][0], std::int64_t{7});
  EK_CHECK_EQ(boxes[0].quad[2][1], std::int64_t{6});
  EK_CHECK_EQ(boxes[0].x0, 2.0);
  EK_CHECK_EQ(boxes[0].y1, 6.0);
  EK_CHECK_EQ(boxes[0].score, 0.9);
}

EK_TEST(postprocess, ctc_collapses_repeats_drops_blanks_and_speaks_utf8) {
  // classes: blank, "a", "中", " "; steps: a a blank a 中 中 blank
  const std::vector<std::string> chars = {"", "a", "\xe4\xb8\xad", " "};
  const std::vector<int> best = {1, 1, 0, 1, 2, 2, 0};
  std::vector<float> probs;
  for (int b : best)
    for (int c = 0; c < 4; ++c) probs.push_back(c == b ? 0.5f + 0.0625f * c : 0.1f);
  const TextLine line = ctc_greedy_decode(probs.data(), 7, 4, chars);
  EK_CHECK_EQ(line.text, std::string("aa\xe4\xb8\xad"));
  // kept steps 0, 3, 4: (0.5625 + 0.5625 + 0.625) / 3
  EK_CHECK_EQ(line.confidence, python_round(static_cast<float>((0.5625 + 0.5625 + 0.625) / 3.0), 6));
  std::vector<float> blank(4 * 2, 0.0f);
  blank[0] = blank[4] = 1.0f;
  EK_CHECK_EQ(ctc_greedy_decode(blank.data(), 2, 4, chars).text, std::string());
  EK_CHECK_EQ(ctc_greedy_decode(blank.data(), 2, 4, chars).confidence, 0.0);
}

EK_TEST(postprocess, classification_decides_softmax_for_the_whole_batch) {
  // Python: one logit row makes the batch logits: [1, 3, 2] -> 0.665241, [0.2, 0.5, 0.3] -> 0.390694
  auto post = task(R"({"kind": "classification", "options": {"labels": ["a", "b", "c"]}})");
  const Json both = post.run(floats({2, 3}, {1, 3, 2, 0.2f, 0.5f, 0.3f}));
  EK_CHECK_EQ(both.at(std::size_t{0}).at("score").as_number(), 0.665241);
  EK_CHECK_EQ(both.at(std::size_t{1}).at("score").as_number(), 0.390694);
  EK_CHECK_EQ(both.at(std::size_t{1}).at("label").as_string(), std::string("b"));
  // a distribution alone stays; without labels the index is the label
  auto plain = task(R"({"kind": "classification", "options": {}})");
  const Json alone = plain.run(floats({1, 3}, {0.2f, 0.5f, 0.3f}));
  EK_CHECK_EQ(alone.at(std::size_t{0}).at("score").as_number(), 0.5);
  EK_CHECK_EQ(alone.at(std::size_t{0}).at("label").as_string(), std::string("1"));
  EK_CHECK(alone.at(std::size_t{0}).find("top") == nullptr);
}

EK_TEST(postprocess, top_k_is_sorted_with_ties_by_index) {
  const auto r = classify(std::vector<float>{0.1f, 0.3f, 0.3f, 0.3f}.data(), 1, 4, {}, 3);
  EK_CHECK_EQ(r[0].top.index, 1);
  EK_CHECK_EQ(r[0].best.size(), 3u);
  EK_CHECK_EQ(r[0].best[1].index, 2);
  EK_CHECK_EQ(r[0].best[2].index, 3);
}

EK_TEST(postprocess, task_options_are_checked_like_python) {
  EK_CHECK_ERROR(task(R"({"kind": "ocr_det", "options": {"thresh": 2}})"), input, "not a number in [0, 1]");
  EK_CHECK_ERROR(task(R"({"kind": "ocr_det", "options": {"radius": 2}})"), input, "unknown option: radius");
  EK_CHECK_ERROR(task(R"({"kind": "ocr_rec", "options": {"dictionary": [""]}})"), input, "list of tokens");
  EK_CHECK_ERROR(task(R"({"kind": "ocr_rec", "options": {"dictionary": ["a\nb"]}})"), input, "list of tokens");
  EK_CHECK_ERROR(task(R"({"kind": "ocr_cls", "options": {"labels": ["0"]}})"), input, "at least two");
  EK_CHECK_ERROR(task(R"({"kind": "detector"})"), input, "not known");
  auto rec = task(R"({"kind": "ocr_rec", "options": {"dictionary": ["x", "\u4e2d"], "use_space_char": false}})");
  EK_CHECK_EQ(rec.characters().size(), 3u);
  EK_CHECK_ERROR(rec.run(floats({1, 2, 4}, std::vector<float>(8, 0.f))), input, "the dictionary gives 3");
  EK_CHECK_ERROR(rec.run(floats({1, 8}, std::vector<float>(8, 0.f))), input, "shape 1x8");
  EK_CHECK(is_token("\xe4\xb8\xad") && is_token("ab") && is_token("\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa"));
  EK_CHECK(!is_token("") && !is_token("\xe4\xb8") && !is_token("a\xe4\xb8") && !is_token("a\r") && !is_token("\xff"));
}

EK_TEST(postprocess, ctc_dictionary_tokens_of_several_code_points) {
  // PP-OCRv5's dictionary holds flags (two regional indicators, one class); a token is emitted whole
  auto rec = task(R"({"kind": "ocr_rec", "options": {"dictionary": ["\ud83c\udde9\ud83c\uddea", "ff", "x"],
                                                     "use_space_char": false}})");
  EK_CHECK_EQ(rec.characters().size(), 4u);
  EK_CHECK_EQ(rec.characters()[1], std::string("\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa"));
  const std::vector<int> best = {1, 1, 0, 1, 2, 3};
  std::vector<float> probs;
  for (int b : best)
    for (int c = 0; c < 4; ++c) probs.push_back(c == b ? 0.9f : 0.05f);
  const TextLine line = ctc_greedy_decode(probs.data(), 6, 4, rec.characters());
  EK_CHECK_EQ(line.text, std::string("\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa\xf0\x9f\x87\xa9\xf0\x9f\x87\xaa" "ffx"));
}

EK_TEST(postprocess, direction_labels_and_scores) {
  auto cls = task(R"({"kind": "ocr_cls", "options": {}})");
  const Json out = cls.run(floats({2, 2}, {0.9f, 0.1f, 0.25f, 0.75f}));
  EK_CHECK_EQ(out.at(std::size_t{0}).at("label").as_string(), std::string("0"));
  EK_CHECK_EQ(out.at(std::size_t{0}).at("score").as_number(), 0.9);
  EK_CHECK_EQ(out.at(std::size_t{1}).at("label").as_string(), std::string("180"));
  EK_CHECK_EQ(out.at(std::size_t{1}).at("score").as_number(), 0.75);
}
