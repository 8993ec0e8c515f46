// SHA-256 (FIPS 180-4), so the apps' loader can check a bundle's or an asset set's
// file table without a crypto library. Streamed: a model file is hashed in chunks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "edgekit/error.h"

namespace edgekit {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  // The digest; the object is spent afterwards (reset() to reuse it).
  std::array<std::uint8_t, 32> finish();
  std::string hex();  // finish() as 64 lowercase hex digits (what manifests store)
  void reset();

 private:
  void block(const std::uint8_t* p);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_;
  std::size_t buffered_ = 0;
  std::uint64_t total_ = 0;  // bytes
};

std::string sha256_hex(const void* data, std::size_t size);
// Error(code) naming the path when it cannot be read; *bytes gets the file size.
std::string sha256_file(const std::string& path, ExitCode code, std::uint64_t* bytes = nullptr);

}  // namespace edgekit
