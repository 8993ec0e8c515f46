#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "edgekit/platform.h"

#if defined(__unix__) || defined(__APPLE__)
#define EDGEKIT_POSIX 1
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>
#endif

namespace edgekit {
namespace platform {
namespace {

std::optional<std::string> read_text(const char* path) {
  // std::fopen on purpose: the emulation shim interposes fopen, as Lite uses it.
  std::FILE* file = std::fopen(path, "rb");
  if (!file) return std::nullopt;
  std::string text;
  char buffer[4096];
  std::size_t got = 0;
  while ((got = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, got);
  std::fclose(file);
  return text;
}

}  // namespace

// The one definition of the ABI names (the runner's record, ek_version, machine_arch's
// fallback): lite/native.py builds and looks up runners by these names (Abi.aarch64,
// Abi.armhf), so 32-bit hard-float ARM is "armhf", never plain "arm".
const char* compiled_abi() {
#if defined(__aarch64__)
  return "aarch64";
#elif defined(__arm__) && defined(__ARM_PCS_VFP)
  return "armhf";
#elif defined(__arm__)
  return "armel";
#elif defined(__x86_64__)
  return "x86_64";
#elif defined(__i386__)
  return "x86";
#else
  return "unknown";
#endif
}

std::optional<std::string> read_cpuinfo() {
#if defined(__linux__)
  return read_text("/proc/cpuinfo");
#else
  return std::nullopt;
#endif
}

int cpu_core_count() {
#if defined(__linux__)
  // Lite counts /sys/devices/system/cpu/cpuN/uevent files until one is missing.
  int count = 0;
  while (true) {
    const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(count) + "/uevent";
    std::FILE* file = std::fopen(path.c_str(), "rb");
    if (!file) break;
    std::fclose(file);
    ++count;
  }
  if (count > 0) return count;
#endif
  const unsigned n = std::thread::hardware_concurrency();
  return n > 0 ? static_cast<int>(n) : 1;
}

std::string machine_arch() {
#if defined(EDGEKIT_POSIX)
  struct utsname name;
  if (uname(&name) == 0 && name.machine[0]) return name.machine;
#endif
  return compiled_abi();
}

std::vector<CodeMapping> code_mappings() {
  std::vector<CodeMapping> found;
#if defined(__linux__)
  const auto maps = read_text("/proc/self/maps");
  if (!maps) return found;
  std::size_t at = 0;
  while (at < maps->size()) {
    std::size_t end = maps->find('\n', at);
    if (end == std::string::npos) end = maps->size();
    const std::string line = maps->substr(at, end - at);
    at = end + 1;
    CodeMapping m;
    char perms[8] = {0};
    int path_at = 0;
    // start-end perms offset dev inode path
    if (std::sscanf(line.c_str(), "%llx-%llx %7s %llx %*s %*s %n", &m.start, &m.end, perms, &m.offset, &path_at) < 4) {
      continue;
    }
    if (perms[2] != 'x' || path_at <= 0 || static_cast<std::size_t>(path_at) >= line.size()) continue;
    m.path = line.substr(static_cast<std::size_t>(path_at));
    if (m.path.empty() || m.path[0] != '/') continue;   // [vdso], anonymous code
    found.push_back(m);
  }
#endif
  return found;
}

std::vector<std::pair<std::string, unsigned long long>> resolved_memory_functions() {
  // Through volatile pointers, so the compiler keeps the addresses the dynamic loader resolved.
  void* (*volatile copy)(void*, const void*, std::size_t) = &std::memcpy;
  void* (*volatile move)(void*, const void*, std::size_t) = &std::memmove;
  void* (*volatile set)(void*, int, std::size_t) = &std::memset;
  return {{"memcpy", reinterpret_cast<unsigned long long>(copy)},
          {"memmove", reinterpret_cast<unsigned long long>(move)},
          {"memset", reinterpret_cast<unsigned long long>(set)}};
}

long peak_rss_kb() {
  long peak = 0;
#if defined(EDGEKIT_POSIX)
  struct rusage usage;
  if (getrusage(RUSAGE_SELF, &usage) == 0) {
#if defined(__APPLE__)
    peak = static_cast<long>(usage.ru_maxrss / 1024);  // bytes there, KiB on Linux
#else
    peak = static_cast<long>(usage.ru_maxrss);
#endif
  }
#endif
#if defined(__linux__)
  if (auto status = read_text("/proc/self/status")) {
    const auto at = status->find("VmHWM:");
    if (at != std::string::npos) {
      const long hwm = std::strtol(status->c_str() + at + 6, nullptr, 10);
      if (hwm > peak) peak = hwm;
    }
  }
#endif
  return peak;
}

StderrSilencer::StderrSilencer() {
#if defined(EDGEKIT_POSIX)
  std::fflush(stderr);
  saved_ = dup(STDERR_FILENO);
  const int null_fd = open("/dev/null", O_WRONLY);
  if (saved_ >= 0 && null_fd >= 0) dup2(null_fd, STDERR_FILENO);
  if (null_fd >= 0) close(null_fd);
#endif
}

StderrSilencer::~StderrSilencer() {
#if defined(EDGEKIT_POSIX)
  if (saved_ >= 0) {
    std::fflush(stderr);
    dup2(saved_, STDERR_FILENO);
    close(saved_);
  }
#endif
}

}  // namespace platform
}  // namespace edgekit
