// preprocess.json and task.json: parsed, then applied to a small image and to model
// outputs of a shape taken from the input, as an app would.
#include <algorithm>
#include <string>
#include <vector>

#include "edgekit/error.h"
#include "edgekit/json.h"
#include "edgekit/postprocess.h"
#include "edgekit/preprocess.h"

namespace {

// The first bytes choose an output shape (each side 0..15), the rest is the spec text.
edgekit::Array output_of(const std::uint8_t* data, std::size_t size, std::size_t* used) {
  edgekit::Array a;
  const std::size_t rank = size ? 1 + data[0] % 4 : 2;
  for (std::size_t i = 0; i < rank; ++i) a.shape.push_back(1 + i < size ? data[1 + i] % 16 : 1);
  *used = std::min(size, 1 + rank);
  a.data.resize(static_cast<std::size_t>(edgekit::element_count(a.shape)) * sizeof(float));
  for (std::size_t i = 0; i < a.data.size() / sizeof(float); ++i) a.as<float>()[i] = static_cast<float>(i % 7) / 7.0f;
  return a;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::size_t used = 0;
  const edgekit::Array output = output_of(data, size, &used);
  const std::string text(reinterpret_cast<const char*>(data + used), size - used);
  try {
    const edgekit::Json doc = edgekit::Json::parse(text);
    if (doc.find("kind")) {
      edgekit::Postprocessor post(edgekit::TaskSpec::from_json(doc));
      post.set_top_k(3);
      (void)post.run(output);
    } else {
      const edgekit::BundlePreprocess bundle = edgekit::BundlePreprocess::from_json(doc);
      if (!bundle.spec) return 0;
      const edgekit::Preprocessor pre(*bundle.spec);
      std::vector<std::uint8_t> pixels(static_cast<std::size_t>(7 * 5 * 4), 128);
      (void)pre.run(edgekit::ImageView::rgba(pixels.data(), 7, 5));
    }
  } catch (const edgekit::Error&) {
  }
  return 0;
}
