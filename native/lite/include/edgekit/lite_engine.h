// One loaded .nb model on Paddle-Lite's light API (MobileConfig). The header
// carries no Lite types, so front ends (the runner, later a C API for JNI and
// Objective-C++) compile against it without Lite's headers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "edgekit/dtype.h"
#include "edgekit/npy.h"
#include "edgekit/run_config.h"

namespace edgekit {

// A read-only view of an output; valid until the next run().
struct TensorView {
  DType dtype = DType::float32;
  Shape shape;
  const void* data = nullptr;
  std::size_t bytes = 0;
};

class LiteEngine {
 public:
  // The runtime's GetVersion(), learnt by loading a built-in empty model stamped
  // `stamp` (Lite offers no version call without a predictor). Lite warns on
  // stderr when the stamp differs from its version and, once per process, logs
  // the CPU it detected; `quiet` hides both. Error(model) when even that fails.
  static std::string runtime_version(const std::string& stamp = "v0.0-probe", bool quiet = true);

  // Error(model) with Lite's one-line reason when it cannot load the file.
  LiteEngine(const std::string& nb_path, const RunConfig& config);
  ~LiteEngine();
  LiteEngine(const LiteEngine&) = delete;
  LiteEngine& operator=(const LiteEngine&) = delete;

  std::string version() const;
  const std::vector<std::string>& input_names() const;
  const std::vector<std::string>& output_names() const;
  // The element type the program declares for input i (Lite reports it before
  // any Resize); nullopt when Lite's type has no numpy counterpart.
  std::optional<DType> declared_input_dtype(std::size_t i) const;
  // What Lite reports as input i's shape before Resize. Measured with v2.13-rc:
  // always empty, so declared shapes must come from elsewhere (--expect).
  Shape reported_input_shape(std::size_t i) const;

  // Error(input) for a dtype Lite cannot take.
  void set_input(std::size_t i, DType dtype, const Shape& shape, const void* data);
  // Error(run) with Lite's reason.
  void run();
  // Error(run) for an output type the runner cannot write.
  TensorView output(std::size_t i) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgekit
