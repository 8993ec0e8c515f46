// The Runtime over Paddle-Lite (built only when EDGEKIT_LITE_DIR is set).
#include <mutex>

#include "edgekit/engine.h"
#include "edgekit/lite_engine.h"

namespace edgekit {
namespace {

class LiteBackedEngine : public Engine {
 public:
  LiteBackedEngine(const std::string& nb_file, const RunConfig& config) : engine_(nb_file, config) {}

  std::vector<std::string> input_names() const override { return engine_.input_names(); }
  std::vector<std::string> output_names() const override { return engine_.output_names(); }
  void set_input(std::size_t i, DType dtype, const Shape& shape, const void* data) override {
    engine_.set_input(i, dtype, shape, data);
  }
  void run() override { engine_.run(); }
  Array output(std::size_t i) const override {
    const TensorView view = engine_.output(i);
    Array out;
    out.dtype = view.dtype;
    out.shape = view.shape;
    const auto* bytes = static_cast<const std::uint8_t*>(view.data);
    out.data.assign(bytes, bytes + view.bytes);
    return out;
  }

 private:
  LiteEngine engine_;
};

class LiteRuntime : public Runtime {
 public:
  std::string version() const override {
    // Learnt once per process; Lite's probe warnings and CPU log are silenced.
    std::call_once(once_, [this] { version_ = LiteEngine::runtime_version(); });
    return version_;
  }
  std::unique_ptr<Engine> load(const std::string& nb_file, const RunConfig& config) const override {
    return std::make_unique<LiteBackedEngine>(nb_file, config);
  }

 private:
  mutable std::once_flag once_;
  mutable std::string version_;
};

}  // namespace

std::shared_ptr<const Runtime> lite_runtime() {
  static const auto runtime = std::make_shared<const LiteRuntime>();
  return runtime;
}

}  // namespace edgekit
