// edgekit-lite-run's command line, parsed without Lite so it is unit-tested on
// the host. The usage text in options.cc is the reference; native/README.md
// repeats it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "edgekit/dtype.h"
#include "edgekit/npy.h"
#include "edgekit/run_config.h"

namespace edgekit {
namespace runner {

// --expect NAME:SHAPE[:DTYPE], SHAPE like -1x1x32x32 (-1 = any), DTYPE default float32.
struct Expect {
  std::string name;
  Shape shape;
  DType dtype = DType::float32;
};

struct FeedFile {
  std::string name;  // empty: "the model's only input"
  std::string path;
};

struct Options {
  enum class Mode { run, help, version, cpu_info };
  Mode mode = Mode::run;
  std::string model;
  std::vector<FeedFile> inputs;  // --input, repeatable
  std::string inputs_npz;        // --inputs
  std::string out_dir;
  std::string record;            // default <out_dir>/record.json
  std::vector<Expect> expects;
  RunConfig config;
  int batch = 1;
  bool rows = false;             // --rows: outputs are NMS rows + a per-sample count (see usage_text)
  int warmup = 1;
  int repeat = 10;
};

// Throws Error(ExitCode::usage) naming the offending argument.
Options parse_options(const std::vector<std::string>& args);

// Test hook: EDGEKIT_RUNNER_DELAY_MS, a sleep added inside every warm-up and timed
// run so a suite can prove it notices a slowdown. `text` is the variable's value
// (null or empty: 0). Throws Error(ExitCode::usage) for anything but 0..60000.
constexpr const char* kDelayVariable = "EDGEKIT_RUNNER_DELAY_MS";
int parse_delay_ms(const char* text);
Expect parse_expect(const std::string& text);
std::string usage_text();

}  // namespace runner
}  // namespace edgekit
