// edgekit-core-tests: the core's unit tests, plus helper modes the Python tests
// use to cross-check the C++ readers and writers against numpy and Python:
//
//   edgekit-core-tests [SUITE ...]          run the cases of these suites (default: all)
//   edgekit-core-tests --list
//   edgekit-core-tests --npy-roundtrip SRC DST   read every .npy/.npz in SRC, write it to DST
//   edgekit-core-tests --json-roundtrip IN OUT   parse IN, write it pretty-printed to OUT
//   edgekit-core-tests --nb-header FILE     print the .nb header as JSON (exit code on error)
//   edgekit-core-tests --cpu-report [--runtime-dotprod] [--want-int8-path neon|dotprod]
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "edgekit/cpuinfo.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/nbfile.h"
#include "edgekit/npy.h"
#include "edgekit/npz.h"
#include "harness.h"

namespace {

using namespace edgekit;

Json describe(const Array& a) {
  Json out = Json::object();
  out.set("dtype", dtype_name(a.dtype));
  out.set("shape", Json::array_of(a.shape));
  return out;
}

int npy_roundtrip(const std::string& src, const std::string& dst) {
  make_dirs(dst);
  Json report = Json::object();
  for (const auto& entry : std::filesystem::directory_iterator(src)) {
    const std::string name = entry.path().filename().string();
    const std::string ext = entry.path().extension().string();
    if (ext == ".npy") {
      const Array a = read_npy(entry.path().string());
      write_npy(join_path(dst, name), a);
      report.set(name, describe(a));
    } else if (ext == ".npz") {
      const auto arrays = read_npz(entry.path().string());
      write_npz(join_path(dst, name), arrays);
      Json items = Json::object();
      for (const auto& item : arrays) items.set(item.name, describe(item.array));
      report.set(name, items);
    }
  }
  std::printf("%s\n", report.dump(2).c_str());
  return 0;
}

int nb_header(const std::string& path) {
  const NbHeader h = read_nb_header(path);
  Json out = Json::object();
  out.set("format_version", h.format_version);
  out.set("opt_version", h.opt_version);
  out.set("program_bytes", h.program_bytes);
  out.set("params_bytes", h.params_bytes);
  out.set("file_bytes", h.file_bytes);
  out.set("param_count", h.param_count);
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

int cpu_report(const std::vector<std::string>& args) {
  bool dotprod = false;
  std::string want;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--runtime-dotprod") dotprod = true;
    if (args[i] == "--want-int8-path" && i + 1 < args.size()) want = args[++i];
  }
  const CpuReport report = detect_cpu(dotprod);
  std::printf("%s\n", report.to_json().dump(2).c_str());
  if (!want.empty() && report.int8_kernel_path() != want) {
    std::printf("expected int8_kernel_path %s\n", want.c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (!args.empty() && args[0] == "--list") {
      for (const auto& c : test::registry()) std::printf("%s\n", c.name.c_str());
      return 0;
    }
    if (args.size() == 3 && args[0] == "--npy-roundtrip") return npy_roundtrip(args[1], args[2]);
    if (args.size() == 3 && args[0] == "--json-roundtrip") {
      write_file_atomic(args[2], Json::parse(read_file_text(args[1], ExitCode::input)).dump(2) + "\n");
      return 0;
    }
    if (args.size() == 2 && args[0] == "--nb-header") return nb_header(args[1]);
    if (!args.empty() && args[0] == "--cpu-report") return cpu_report(args);
  } catch (const Error& e) {
    std::fprintf(stderr, "edgekit-core-tests: error: %s\n", e.line().c_str());
    return static_cast<int>(e.code());
  }
  return test::run_cases(args);
}
