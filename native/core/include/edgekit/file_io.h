// Whole-file reads and atomic writes with the standard library only, so the same
// code serves Linux boards, Android and iOS.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgekit/error.h"

namespace edgekit {

// Throws Error(code) naming the path and the OS reason.
std::vector<std::uint8_t> read_file_bytes(const std::string& path, ExitCode code);
std::string read_file_text(const std::string& path, ExitCode code);
// Writes `path.partial` then renames it over `path`: readers never see half a file.
// Throws Error(ExitCode::output).
void write_file_atomic(const std::string& path, const std::string& content);
// Creates `dir` and its parents; throws Error(ExitCode::output).
void make_dirs(const std::string& dir);
// Renames; throws Error(ExitCode::output).
void rename_file(const std::string& from, const std::string& to);
void remove_file_quietly(const std::string& path);
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace edgekit
