// The asset-set loader on a fuzzed assets.json beside a fixed, valid model folder:
// path checks, file table, model entries, version checks.
#include <filesystem>
#include <fstream>

#include "edgekit/assets.h"
#include "edgekit/error.h"
#include "edgekit/nbfile.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace fs = std::filesystem;
  static const bool laid_out = [] {
    fs::create_directories(edgekit::fuzz::scratch() / "set" / "m" / "golden");
    edgekit::write_file_atomic((edgekit::fuzz::scratch() / "set" / "m" / "model.nb").string(),
                               edgekit::empty_nb_model("v2.13-rc"));
    edgekit::write_file_atomic((edgekit::fuzz::scratch() / "set" / "m" / "labels.txt").string(), "zero\none\n");
    return true;
  }();
  (void)laid_out;
  const std::string root = (edgekit::fuzz::scratch() / "set").string();
  edgekit::write_file_atomic(root + "/assets.json", std::string(reinterpret_cast<const char*>(data), size));
  try {
    (void)edgekit::open_assets(root, std::string("v2.13-rc")).to_json().dump();
  } catch (const edgekit::Error&) {
  }
  return 0;
}
