// Paddle-Lite naive_buffer (.nb) files, read without the runtime.
//
// Layout: uint16 LE format version (1 or 2), a 16-byte NUL-padded opt version
// ("v2.13-rc"), uint64 LE program length, the flatbuffers program, then the
// parameters. For format 2 the parameters are: uint16 version (0), uint16 meta
// size + meta, uint16 header size + header {uint16 count, uint32 max tensor
// bytes}, then per parameter uint32 size + that many bytes. Walking those sizes
// finds truncated files before Lite reads past the end.
#pragma once

#include <cstdint>
#include <string>

namespace edgekit {

struct NbHeader {
  unsigned format_version = 0;
  std::string opt_version;
  std::uint64_t program_bytes = 0;
  std::uint64_t params_bytes = 0;
  std::uint64_t file_bytes = 0;
  std::int64_t param_count = -1;  // format 2: from the parameter header; -1 when not read
};

// Throws Error(ExitCode::model) for unreadable, foreign and truncated files.
NbHeader read_nb_header(const std::string& path);

// The smallest model Lite's light API loads: an empty one-block program and no
// parameters, stamped with `opt_version`. Creating a predictor from it is how the
// runner learns the runtime's GetVersion() before it hands a real model to Lite.
std::string empty_nb_model(const std::string& opt_version);

}  // namespace edgekit
