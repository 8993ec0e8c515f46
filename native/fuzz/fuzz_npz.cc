// .npz (stored zip) reading: end record, zip64, central directory, local headers.
#include "edgekit/error.h"
#include "edgekit/npz.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = edgekit::fuzz::write_input("input.npz", data, size);
  try {
    for (const auto& item : edgekit::read_npz(path)) (void)item.array.count();
  } catch (const edgekit::Error&) {
  }
  return 0;
}
