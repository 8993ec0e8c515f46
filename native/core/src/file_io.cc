#include "edgekit/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace edgekit {
namespace fs = std::filesystem;

std::vector<std::uint8_t> read_file_bytes(const std::string& path, ExitCode code) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (!file) throw Error(code, "cannot read " + path + ": " + std::strerror(errno), "check the path");
  std::vector<std::uint8_t> out;
  std::uint8_t buffer[1 << 16];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) out.insert(out.end(), buffer, buffer + got);
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) throw Error(code, "cannot read " + path + ": I/O error", "check the file and the storage");
  return out;
}

std::string read_file_text(const std::string& path, ExitCode code) {
  const auto bytes = read_file_bytes(path, code);
  return std::string(bytes.begin(), bytes.end());
}

void write_file_atomic(const std::string& path, const std::string& content) {
  const std::string partial = path + ".partial";
  std::FILE* file = std::fopen(partial.c_str(), "wb");
  if (!file) {
    throw Error(ExitCode::output, "cannot create " + partial + ": " + std::strerror(errno),
                "check that the folder exists and is writable");
  }
  const bool written = std::fwrite(content.data(), 1, content.size(), file) == content.size();
  const bool closed = std::fclose(file) == 0;
  if (!written || !closed) {
    remove_file_quietly(partial);
    throw Error(ExitCode::output, "cannot write " + partial, "check free space on that folder");
  }
  rename_file(partial, path);
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    throw Error(ExitCode::output, "cannot create the folder " + dir + ": " + ec.message(),
                "pass an output folder you can write to");
  }
}

void rename_file(const std::string& from, const std::string& to) {
  std::error_code ec;
  fs::rename(from, to, ec);
  if (ec) {
    remove_file_quietly(from);
    throw Error(ExitCode::output, "cannot move " + from + " to " + to + ": " + ec.message(),
                "check the output folder's permissions");
  }
}

void remove_file_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove(path, ec);
}

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return (fs::path(dir) / name).string();
}

}  // namespace edgekit
