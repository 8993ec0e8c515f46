// The JSON reader (manifests, asset indexes, specs) and a round trip through the writer.
#include <string>

#include "edgekit/error.h"
#include "edgekit/json.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  edgekit::Json value;
  try {
    value = edgekit::Json::parse(text);
  } catch (const edgekit::Error&) {
    return 0;
  }
  // what we write we must read back the same
  const std::string once = value.dump();
  if (edgekit::Json::parse(once).dump() != once) __builtin_trap();
  return 0;
}
