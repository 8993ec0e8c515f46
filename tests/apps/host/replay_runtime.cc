// Tests only: a stand-in for Paddle-Lite that answers from a model's golden files, so the
// JNI bridge's pixel path can be checked on an x86 host, where no Paddle-Lite C++ library
// exists. It replaces the core's `lite_runtime()` (engine.h, the seam a build without Lite
// fills with nullptr) when linked before native/'s edgekit_app archive.
//
// The engine answers an input tensor only when it equals, bit for bit, a golden input
// sample (golden/input_0.npy, golden/images/input.npy or a per-image input); it then returns that sample's
// reference outputs. Any other tensor gets zeros (cosine 0), so a wrong stride or channel
// order fails the self-test instead of being answered. It proves pixels -> core ->
// tensor -> post-processing -> JSON -> Java, never inference.
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "edgekit/engine.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/npy.h"

#ifndef EDGEKIT_REPLAY_VERSION
#error "define EDGEKIT_REPLAY_VERSION (the opt version the replayed asset set carries)"
#endif

namespace edgekit {
namespace {
namespace fs = std::filesystem;

// Inputs [N, ...] with their outputs [N, ...] in the model's output order.
struct GoldenCases {
  Array inputs;
  std::vector<Array> outputs;
};

std::size_t sample_bytes(const Array& a) { return a.data.size() / static_cast<std::size_t>(a.shape.at(0)); }

class ReplayEngine : public Engine {
 public:
  explicit ReplayEngine(const std::string& nb_file) {
    const fs::path dir = fs::path(nb_file).parent_path();
    const Json golden = Json::parse(read_file_text((dir / "golden" / "golden.json").string(), ExitCode::model));
    for (const Json& in : golden.at("inputs").items()) inputs_.push_back(in.at("name").as_string());
    GoldenCases vectors;
    vectors.inputs = read_npy((dir / in_file(golden)).string());
    for (const Json& out : golden.at("outputs").items()) {
      outputs_.push_back(out.at("name").as_string());
      vectors.outputs.push_back(read_npy((dir / out.at("file").as_string()).string()));
    }
    cases_.push_back(std::move(vectors));
    if (const Json* images = golden.find("images"); images != nullptr && images->is_object()) {
      // stacked images, or a variable-width bundle's images one file each ("per_image")
      const Json* apart = images->find("per_image");
      std::vector<const Json*> entries;
      if (apart != nullptr) {
        for (const Json& e : apart->items()) entries.push_back(&e);
      } else {
        entries.push_back(images);
      }
      for (const Json* e : entries) {
        GoldenCases pictures;
        pictures.inputs = read_npy((dir / e->at("input").as_string()).string());
        for (const Json& f : e->at("outputs").items()) pictures.outputs.push_back(read_npy((dir / f.as_string()).string()));
        cases_.push_back(std::move(pictures));
      }
    }
  }

  std::vector<std::string> input_names() const override { return inputs_; }
  std::vector<std::string> output_names() const override { return outputs_; }

  void set_input(std::size_t, DType dtype, const Shape& shape, const void* data) override {
    std::int64_t count = 1;
    for (std::int64_t d : shape) count *= d;
    input_.assign(static_cast<const std::uint8_t*>(data),
                  static_cast<const std::uint8_t*>(data) + count * static_cast<std::int64_t>(dtype_size(dtype)));
  }

  void run() override {
    answer_.clear();
    for (const GoldenCases& c : cases_) {
      const std::size_t bytes = sample_bytes(c.inputs);
      for (std::int64_t k = 0; bytes == input_.size() && k < c.inputs.shape[0]; ++k) {
        if (std::memcmp(c.inputs.data.data() + k * bytes, input_.data(), bytes) == 0) {
          for (const Array& out : c.outputs) answer_.push_back(sample_of(out, k, false));
          return;
        }
      }
    }
    for (const Array& out : cases_.front().outputs) answer_.push_back(sample_of(out, 0, true));  // no match: zeros
  }

  Array output(std::size_t i) const override { return answer_.at(i); }

 private:
  static std::string in_file(const Json& golden) { return golden.at("inputs").at(0).at("file").as_string(); }

  static Array sample_of(const Array& all, std::int64_t k, bool zero) {
    Array one;
    one.dtype = all.dtype;
    one.shape = all.shape;
    one.shape[0] = 1;
    const std::size_t bytes = sample_bytes(all);
    one.data.assign(all.data.begin() + static_cast<std::ptrdiff_t>(k * bytes),
                    all.data.begin() + static_cast<std::ptrdiff_t>((k + 1) * bytes));
    if (zero) std::fill(one.data.begin(), one.data.end(), 0);
    return one;
  }

  std::vector<std::string> inputs_, outputs_;
  std::vector<GoldenCases> cases_;
  std::vector<std::uint8_t> input_;
  std::vector<Array> answer_;
};

class ReplayRuntime : public Runtime {
 public:
  std::string version() const override { return EDGEKIT_REPLAY_VERSION; }
  std::unique_ptr<Engine> load(const std::string& nb_file, const RunConfig&) const override {
    return std::make_unique<ReplayEngine>(nb_file);
  }
};

}  // namespace

std::shared_ptr<const Runtime> lite_runtime() {
  static const auto runtime = std::make_shared<const ReplayRuntime>();
  return runtime;
}

}  // namespace edgekit
