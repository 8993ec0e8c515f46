// .npy parsing: header dict, shape arithmetic, byte counts.
#include "edgekit/error.h"
#include "edgekit/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const edgekit::Array a = edgekit::parse_npy(data, size, "fuzz.npy");
    // what the runner and the self-test do next: count, copy, write back
    if (static_cast<std::uint64_t>(a.count()) * edgekit::dtype_size(a.dtype) != a.bytes()) __builtin_trap();
    (void)edgekit::npy_bytes(a);
  } catch (const edgekit::Error&) {
  }
  return 0;
}
