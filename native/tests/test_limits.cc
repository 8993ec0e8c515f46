// Crafted inputs from issue 22 against the core's readers: each must be refused with
// the limit it hits (limits.h), never wrap around, read out of bounds or take seconds.
#include <chrono>
#include <cstring>
#include <string>

#include "edgekit/json.h"
#include "edgekit/limits.h"
#include "edgekit/npy.h"
#include "edgekit/platform.h"
#include "edgekit/db_geometry.h"
#include "edgekit/postprocess.h"
#include "edgekit/preprocess.h"
#include "harness.h"
#include "record.h"

using namespace edgekit;

namespace {

// A version 1.0 .npy of `descr` and `shape` (numpy's tuple text) followed by `data`.
std::string npy_file(const std::string& descr, const std::string& shape, const std::string& data = "") {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  dict.append(63 - (10 + dict.size()) % 64, ' ');
  dict += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

Array parse(const std::string& bytes) {
  return parse_npy(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "crafted.npy");
}

Array floats(Shape shape) {
  Array a;
  a.shape = std::move(shape);
  a.data.resize(static_cast<std::size_t>(element_count(a.shape)) * sizeof(float), 0);
  return a;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

EK_TEST(limits, messages_name_the_limit) {
  EK_CHECK_ERROR(limits::check(ExitCode::input, "x", limits::kMaxJsonBytes + 1, "MAX_JSON_BYTES", limits::kMaxJsonBytes),
                 input, "x is 16,777,217, beyond the limit MAX_JSON_BYTES = 16,777,216");
  const std::int64_t dims[] = {1 << 15, 1 << 14};
  EK_CHECK_ERROR(limits::check_tensor(ExitCode::input, "t", dims, 2, 4), input, "beyond the limit MAX_TENSOR_BYTES");
  const std::int64_t huge[] = {std::int64_t{1} << 62, std::int64_t{1} << 62};
  EK_CHECK_ERROR(limits::check_tensor(ExitCode::input, "t", huge, 2, 1), input,
                 "t in elements is more than 64 bits hold, beyond the limit MAX_TENSOR_ELEMENTS");
  const std::int64_t empty[] = {std::int64_t{1} << 62, std::int64_t{1} << 62, 0};
  EK_CHECK_EQ(limits::check_tensor(ExitCode::input, "t", empty, 3, 8), std::uint64_t{0});
  const std::int64_t negative[] = {2, -1};
  EK_CHECK_ERROR(limits::check_tensor(ExitCode::input, "t", negative, 2, 1), input, "negative dimension");
}

// Issue 22: 2^62 float32 elements are 2^64 bytes, which wrapped to 0: an empty file
// body was accepted as a gigantic array and the runner / postprocess crashed on it.
EK_TEST(limits, npy_byte_count_cannot_wrap) {
  // 2^61 float64 elements are 2^64 bytes (the header parser takes up to 18 digits per dimension)
  EK_CHECK_ERROR(parse(npy_file("<f8", "(576460752303423488, 4)")), input, "beyond the limit MAX_TENSOR_ELEMENTS");
  // 2^63 elements: element_count itself overflowed int64 here, and 2 bytes each wrapped to 0
  EK_CHECK_ERROR(parse(npy_file("<i2", "(4294967296, 2147483648)")), input, "beyond the limit MAX_TENSOR_ELEMENTS");
  EK_CHECK_ERROR(parse(npy_file("<f4", "(536870912,)")), input, "in bytes is 2,147,483,648, beyond the limit MAX_TENSOR_BYTES");
  // an empty array may still have large other dimensions, as numpy allows
  const Array empty = parse(npy_file("<f4", "(0, 576460752303423488)"));
  EK_CHECK_EQ(empty.count(), std::int64_t{0});
  EK_CHECK_ERROR(element_count({std::int64_t{1} << 62, 8}), input, "no element count in 64 bits");
}

// Issue 22: a zero-length map axis made detect() read H x W floats of an empty array.
EK_TEST(limits, db_on_a_zero_length_axis_reads_nothing) {
  const Postprocessor det(TaskSpec::from_json(Json::parse("{\"kind\": \"ocr_det\"}")));
  EK_CHECK_ERROR(det.run(floats({1, 0, 64, 64})), input, "first of the probability maps");
  EK_CHECK_EQ(det.run(floats({1, 1, 0, 64})).at(0).size(), std::size_t{0});
  EK_CHECK_EQ(det.run(floats({1, 1, 64, 0})).at(0).size(), std::size_t{0});
  EK_CHECK_EQ(det.run(floats({0, 0, 64, 64})).size(), std::size_t{0});
  EK_CHECK_EQ(db_boxes(nullptr, 0, 64, DbOptions{}).size(), std::size_t{0});
  EK_CHECK_EQ(find_contours(nullptr, 64, 0).size(), std::size_t{0});
}

EK_TEST(limits, resize_and_image_sizes) {
  EK_CHECK_ERROR(PreprocessSpec::from_json(Json::parse("{\"resize\": [1000000, 1000000]}")), input,
                 "beyond the limit MAX_RESIZE_SIDE = 8,192");
  EK_CHECK_ERROR(PreprocessSpec::from_json(Json::parse("{\"crop\": [8193, 1]}")), input, "MAX_RESIZE_SIDE");
  EK_CHECK(PreprocessSpec::from_json(Json::parse("{\"resize\": [8192, 8192]}")).resize->width == 8192);
  // a view is only checked, never read: the limit holds before any pixel is touched
  const std::uint8_t pixel = 0;
  const ImageView huge = ImageView::gray(&pixel, 1 << 14, (1 << 12) + 1, 1);
  EK_CHECK_ERROR(huge.check(), input, "beyond the limit MAX_IMAGE_PIXELS = 67,108,864");
  const Preprocessor pre(PreprocessSpec::from_json(Json::parse("{\"color\": \"gray\"}")));
  EK_CHECK_ERROR(pre.run(huge), input, "MAX_IMAGE_PIXELS");
}

// Issue 22: objects were built with a linear search per member (a 1.6 MB manifest took 25 s).
EK_TEST(limits, json_objects_parse_in_linear_time) {
  std::string text = "{";
  for (int i = 0; i < 100000; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  const Json doc = Json::parse(text);
  const double took = seconds_since(start);
  EK_CHECK_EQ(doc.size(), std::size_t{100000});
  EK_CHECK_EQ(doc.at("k99999").as_int(), std::int64_t{99999});
  EK_CHECK(doc.find("k100000") == nullptr);
  EK_CHECK(took < 10.0);  // ~0.1 s; the quadratic parser needed minutes here under emulation
  // duplicates: the first position, the last value (Python's json), small and large objects alike
  EK_CHECK_EQ(Json::parse("{\"a\": 1, \"b\": 2, \"a\": 3}").dump(), std::string("{\"a\":3,\"b\":2}"));
  Json big = Json::parse(text.substr(0, text.size() - 1) + ",\"k5\": -1}");
  EK_CHECK_EQ(big.size(), std::size_t{100000});
  EK_CHECK_EQ(big.members()[5].second.as_int(), std::int64_t{-1});
  big.set("k7", "seven");
  EK_CHECK_EQ(big.at("k7").as_string(), std::string("seven"));
}

EK_TEST(limits, json_depth_and_size) {
  std::string deep(limits::kMaxJsonDepth, '[');
  deep += std::string(limits::kMaxJsonDepth, ']');
  EK_CHECK_EQ(Json::parse(deep).size(), std::size_t{1});
  EK_CHECK_ERROR(Json::parse("[" + deep + "]"), input, "is 65, beyond the limit MAX_JSON_DEPTH = 64");
  // deep enough to overflow a small thread stack without the limit
  EK_CHECK_ERROR(Json::parse(std::string(1 << 20, '[')), input, "MAX_JSON_DEPTH");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  EK_CHECK_ERROR(Json::parse(objects), input, "MAX_JSON_DEPTH");
  std::string big = "\"" + std::string(limits::kMaxJsonBytes, 'x') + "\"";
  EK_CHECK_ERROR(Json::parse(big), input, "beyond the limit MAX_JSON_BYTES");
}

// Issue 22: the ABI was spelled three ways ("arm" in platform_posix.cc).
EK_TEST(limits, one_abi_name) {
  const std::string abi = platform::compiled_abi();
  EK_CHECK(abi == "aarch64" || abi == "armhf" || abi == "armel" || abi == "x86_64" || abi == "x86");
#if defined(__arm__) && defined(__ARM_PCS_VFP)
  EK_CHECK_EQ(abi, std::string("armhf"));  // what lite/native.py's Abi.armhf and the device code expect
#endif
  EK_CHECK_EQ(runner::runner_identity().at("abi").as_string(), abi);
}
