#include "edgekit/limits.h"

#include <limits>

namespace edgekit {
namespace limits {
namespace {

// 1073741824 -> "1,073,741,824", as Python's f"{n:,}" writes it in the twin's messages.
std::string grouped(std::uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

constexpr const char* kHint =
    "this limit guards against crafted files (native/core/include/edgekit/limits.h); if the file is genuine, make it smaller";

}  // namespace

Error beyond(ExitCode code, const std::string& what, std::uint64_t value, const char* name, std::uint64_t limit) {
  const std::string shown = value == std::numeric_limits<std::uint64_t>::max() ? "more than 64 bits hold" : grouped(value);
  return Error(code, what + " is " + shown + ", beyond the limit " + name + " = " + grouped(limit), kHint);
}

void check(ExitCode code, const std::string& what, std::uint64_t value, const char* name, std::uint64_t limit) {
  if (value > limit) throw beyond(code, what, value, name, limit);
}

bool multiply(std::uint64_t a, std::uint64_t b, std::uint64_t* product) {
  if (a != 0 && b > std::numeric_limits<std::uint64_t>::max() / a) return false;
  *product = a * b;
  return true;
}

std::uint64_t check_tensor(ExitCode code, const std::string& what, const std::int64_t* dims, std::size_t rank,
                           std::uint64_t itemsize) {
  constexpr std::uint64_t kOverflow = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t i = 0; i < rank; ++i) {
    if (dims[i] < 0) throw Error(code, what + " has a negative dimension (" + std::to_string(dims[i]) + ")");
    if (dims[i] == 0) return 0;  // empty whatever the other dimensions say
  }
  std::uint64_t elements = 1;
  for (std::size_t i = 0; i < rank && elements != kOverflow; ++i) {
    if (!multiply(elements, static_cast<std::uint64_t>(dims[i]), &elements)) elements = kOverflow;
  }
  check(code, what + " in elements", elements, "MAX_TENSOR_ELEMENTS", kMaxTensorElements);
  std::uint64_t bytes = 0;
  multiply(elements, itemsize, &bytes);  // elements <= 2^30 and itemsize <= 8: no overflow
  check(code, what + " in bytes", bytes, "MAX_TENSOR_BYTES", kMaxTensorBytes);
  return bytes;
}

}  // namespace limits
}  // namespace edgekit
