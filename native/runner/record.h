// The run record (schema "edgekit.runner/1"): everything a remote run needs to
// be judged without the device: what ran, how fast, how much memory, on which
// CPU path, and on failure what went wrong. Lite-free, unit-tested on the host.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "edgekit/cpuinfo.h"
#include "edgekit/error.h"
#include "edgekit/json.h"
#include "edgekit/nbfile.h"
#include "edgekit/npy.h"
#include "edgekit/platform.h"
#include "edgekit/run_config.h"

namespace edgekit {
namespace runner {

constexpr const char* kRecordSchema = "edgekit.runner/1";

struct TensorRecord {
  std::string name;
  Shape shape;                        // the whole array: samples first
  std::string dtype;
  std::string file;
  std::optional<Shape> expected;      // inputs: the --expect shape
  std::optional<std::string> declared_dtype;  // inputs: what Lite says the program declares
  std::optional<Shape> reported_shape;        // inputs: Lite's shape() before Resize ([] with v2.13-rc)
};

struct RunReport {
  std::string status = "running";    // "running" (provisional), "ok", "error"
  std::string phase = "start";       // the last step reached; tells where a crash happened
  ExitCode exit_code = ExitCode::ok;
  std::string error, fix;

  std::string runtime_version;
  std::string model_file;
  std::optional<NbHeader> header;
  RunConfig config;
  int batch = 1, warmup = 0, repeat = 0;
  std::optional<std::int64_t> samples;
  std::vector<TensorRecord> inputs, outputs;

  std::optional<double> load_ms, first_run_ms;
  std::vector<double> pass_ms, warmup_ms, iteration_ms;
  long peak_rss_kb = 0;
  // Where each library's code was mapped, read after the last run (a profile of the counted runs
  // attributes guest addresses to symbols with it; edgekit/verify/profile.py).
  std::vector<platform::CodeMapping> code_maps;
  std::vector<std::pair<std::string, unsigned long long>> resolved;   // memcpy & co.: their implementation's address
  std::optional<CpuReport> cpu;
  std::vector<std::string> notes;

  void fail(const Error& e);
  Json to_json() const;
};

// The runner's own identity: version, the ABI it was compiled for, the compiler.
Json runner_identity();

}  // namespace runner
}  // namespace edgekit
