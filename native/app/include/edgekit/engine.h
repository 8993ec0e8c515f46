// What a model runs on. The app core talks to this interface; `lite_runtime()`
// (app/src/lite_runtime.cc, only in builds with Paddle-Lite) provides the real
// one over LiteEngine, so everything else here builds and is tested without Lite.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "edgekit/npy.h"
#include "edgekit/run_config.h"

namespace edgekit {

class Engine {
 public:
  virtual ~Engine() = default;
  virtual std::vector<std::string> input_names() const = 0;
  virtual std::vector<std::string> output_names() const = 0;
  // Error(input) when Lite cannot take the dtype.
  virtual void set_input(std::size_t i, DType dtype, const Shape& shape, const void* data) = 0;
  // Error(run) with the runtime's reason.
  virtual void run() = 0;
  // A copy of output i (the runtime's buffer is reused by the next run).
  virtual Array output(std::size_t i) const = 0;
};

class Runtime {
 public:
  virtual ~Runtime() = default;
  // GetVersion() of the linked library: the version every .nb must carry.
  virtual std::string version() const = 0;
  virtual std::unique_ptr<Engine> load(const std::string& nb_file, const RunConfig& config) const = 0;
};

// Paddle-Lite's light API; nullptr in a build without it (EDGEKIT_LITE_DIR unset).
// The version is learnt once per process (see LiteEngine::runtime_version).
std::shared_ptr<const Runtime> lite_runtime();

}  // namespace edgekit
