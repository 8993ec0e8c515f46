// Shared by the libFuzzer harnesses: readers that take a path get the input as a
// file (one per process, in the temp folder), and every harness accepts only
// edgekit::Error as a refusal. Anything else (a crash, a sanitizer report, another
// exception escaping) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include <unistd.h>

#include "edgekit/file_io.h"

namespace edgekit {
namespace fuzz {

// A scratch folder for this process, created on first use.
inline const std::filesystem::path& scratch() {
  static const std::filesystem::path dir = [] {
    auto path = std::filesystem::temp_directory_path() / ("edgekit-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    return path;
  }();
  return dir;
}

inline std::string write_input(const std::string& name, const std::uint8_t* data, std::size_t size) {
  const std::string path = (scratch() / name).string();
  write_file_atomic(path, std::string(reinterpret_cast<const char*>(data), size));
  return path;
}

}  // namespace fuzz
}  // namespace edgekit
