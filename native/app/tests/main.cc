// edgekit-app-tests: the app core's unit tests (loader, SHA-256, OCR geometry), plus
// helper modes the Python tests use to hold the C++ against Python:
//
//   edgekit-app-tests [SUITE ...]                     run these suites (default: all)
//   edgekit-app-tests --sha256 FILE ...               one "<hex>  <file>" line per file
//   edgekit-app-tests --verify PATH [--runtime-version V] [--pubkey KEY.pub.pem]
//                                                     open_assets(PATH): its JSON, or the refusal
//                                                     on stderr with exit 3 (files) / 4 (version) /
//                                                     16 (signature); --pubkey requires a signed set
//   edgekit-app-tests --decode FILE ...               decode_image_file: one JSON line per file,
//                                                     {"file", "ok", "width", "height", "channels"}
//                                                     or {"file", "ok": false, "error"}
//   edgekit-app-tests --ocr-geometry IN.json OUT.json sort_boxes / crop_rect / det_geometry + boxes_to_image cases
//                                                     (and rotate_crop of .npy images, "rotate")
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/decode.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/model.h"
#include "edgekit/npy.h"
#include "edgekit/ocr.h"
#include "edgekit/sha256.h"
#include "harness.h"

namespace {

using namespace edgekit;

Box box_of(const Json& j) { return {j.at(0).as_number(), j.at(1).as_number(), j.at(2).as_number(), j.at(3).as_number()}; }

// {"sort": [[box, ...], ...], "crop": [{"box", "height", "width"}], "scale": [{"boxes", "spec", "height", "width"}]}
int ocr_geometry(const std::string& in, const std::string& out) {
  const Json cases = Json::parse(read_file_text(in, ExitCode::input));
  Json result = Json::object();
  Json sorted = Json::array();
  for (const Json& list : cases.at("sort").items()) {
    std::vector<Box> boxes;
    for (const Json& b : list.items()) boxes.push_back(box_of(b));
    sorted.push(Json::array_of(sort_boxes(boxes)));
  }
  result.set("sort", sorted);
  Json crops = Json::array();
  for (const Json& c : cases.at("crop").items()) {
    const PixelRect r = crop_rect(box_of(c.at("box")), static_cast<int>(c.at("height").as_int()),
                                  static_cast<int>(c.at("width").as_int()));
    crops.push(Json::array_of(std::vector<int>{r.top, r.left, std::max(0, r.height), std::max(0, r.width)}));
  }
  result.set("crop", crops);
  // each case: the detector's boxes, its preprocess spec and the page's size -> the boxes on the page, or the refusal
  Json mapped = Json::array();
  for (const Json& c : cases.at("scale").items()) {
    const PreprocessSpec spec = PreprocessSpec::from_json(c.at("spec"));
    const int h = static_cast<int>(c.at("height").as_int()), w = static_cast<int>(c.at("width").as_int());
    try {
      mapped.push(boxes_to_image(c.at("boxes"), det_geometry(spec, h, w, "det")));
    } catch (const Error& e) {
      mapped.push(e.line());
    }
  }
  result.set("scale", mapped);
  // optional: rotate_crop of a uint8 .npy image (HxW or HxWx3) by a quad, written as .npy
  if (const Json* rotations = cases.find("rotate")) {
    for (const Json& c : rotations->items()) {
      const Array image = read_npy(c.at("image").as_string());
      const int h = static_cast<int>(image.shape.at(0)), w = static_cast<int>(image.shape.at(1));
      const PixelOrder order = image.shape.size() == 3 ? PixelOrder::bgr : PixelOrder::gray;
      Quad quad{};
      for (std::size_t k = 0; k < 4; ++k) quad[k] = {c.at("quad").at(k).at(0).as_number(), c.at("quad").at(k).at(1).as_number()};
      const Image piece = rotate_crop(ImageView::of(image.as<std::uint8_t>(), h, w, order), quad);
      Array saved;
      saved.dtype = DType::uint8;
      saved.shape = {piece.height, piece.width};
      if (order == PixelOrder::bgr) saved.shape.push_back(3);
      saved.data = piece.data;
      write_npy(c.at("out").as_string(), saved);
    }
  }
  write_file_atomic(out, result.dump() + "\n");
  return 0;
}

// One file through the decoder the apps use, as a JSON line (the Python tests hold it
// against edgekit.core.images.decode_image: both sides must refuse the same files).
Json decode_report(const std::string& path) {
  Json out = Json::object();
  out.set("file", path);
  try {
    const Image image = decode_image_file(path);
    out.set("ok", true);
    out.set("width", image.width);
    out.set("height", image.height);
    out.set("channels", image.channels);
  } catch (const Error& e) {
    out.set("ok", false);
    out.set("error", e.line());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "--sha256") {
      for (std::size_t i = 1; i < args.size(); ++i) {
        std::printf("%s  %s\n", sha256_file(args[i], ExitCode::input).c_str(), args[i].c_str());
      }
      return 0;
    }
    if (args.size() >= 2 && args[0] == "--verify") {
      std::optional<std::string> runtime;
      std::optional<PublicKey> key;
      for (std::size_t i = 2; i + 1 < args.size(); i += 2) {
        if (args[i] == "--runtime-version") runtime = args[i + 1];
        if (args[i] == "--pubkey") key = read_public_key_file(args[i + 1]);
      }
      std::printf("%s\n", open_assets(args[1], runtime, key).to_json().dump(2).c_str());
      return 0;
    }
    if (!args.empty() && args[0] == "--decode") {
      for (std::size_t i = 1; i < args.size(); ++i) std::printf("%s\n", decode_report(args[i]).dump().c_str());
      return 0;
    }
    if (args.size() == 3 && args[0] == "--ocr-geometry") return ocr_geometry(args[1], args[2]);
  } catch (const Error& e) {
    std::fprintf(stderr, "edgekit-app-tests: error: %s\n", e.line().c_str());
    return static_cast<int>(e.code());
  }
  return test::run_cases(args);
}
