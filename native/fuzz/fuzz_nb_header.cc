// The .nb header and parameter walk (what the version lock and the loader read).
#include "edgekit/error.h"
#include "edgekit/nbfile.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = edgekit::fuzz::write_input("model.nb", data, size);
  try {
    const edgekit::NbHeader h = edgekit::read_nb_header(path);
    if (h.program_bytes > h.file_bytes) __builtin_trap();
  } catch (const edgekit::Error&) {
  }
  return 0;
}
