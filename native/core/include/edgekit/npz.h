// .npz archives as numpy.savez writes them: a zip of STORED .npy entries.
// Compressed archives (numpy.savez_compressed) are refused with a clear error:
// a deflate decoder would be the one dependency this tree does not need.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "edgekit/npy.h"

namespace edgekit {

struct NamedArray {
  std::string name;  // the entry name without ".npy" (numpy.savez's keyword)
  Array array;
};

// In archive order. Errors are Error(ExitCode::input).
std::vector<NamedArray> read_npz(const std::string& path);
// STORED entries with CRC-32, deterministic timestamps; Error(ExitCode::output).
void write_npz(const std::string& path, const std::vector<NamedArray>& arrays);

std::uint32_t crc32(const void* data, std::size_t size, std::uint32_t crc = 0);

}  // namespace edgekit
