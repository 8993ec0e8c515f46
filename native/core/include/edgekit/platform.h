// The only operating-system specific calls of the core (implemented in
// platform_posix.cc, with fallbacks where a platform lacks them), so the rest
// builds unchanged for Linux boards, Android and iOS.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace edgekit {
namespace platform {

// The text of /proc/cpuinfo (read with fopen, so an LD_PRELOAD shim can stand
// in for it under emulation); nullopt where there is none (iOS, macOS).
std::optional<std::string> read_cpuinfo();
// The core count Lite uses on Linux (/sys/devices/system/cpu/cpuN entries);
// std::thread::hardware_concurrency() elsewhere; at least 1.
int cpu_core_count();
// The ABI this binary was compiled for, as edgekit names runner builds: "aarch64",
// "armhf" (32-bit ARM, hard-float), "armel", "x86_64", "x86" or "unknown".
const char* compiled_abi();
// uname's machine ("aarch64", "armv7l", "x86_64"), else compiled_abi().
std::string machine_arch();
// Peak resident set size of this process in KiB (max of getrusage and
// /proc/self/status VmHWM); 0 when unknown.
long peak_rss_kb();

// One executable, file-backed mapping of this process (from /proc/self/maps):
// where the dynamic loader put a library's code, so that a profile of guest
// addresses can be read against the library's symbols.
struct CodeMapping {
  unsigned long long start = 0, end = 0, offset = 0;
  std::string path;
};
// The executable file mappings of this process; empty where there is no /proc.
std::vector<CodeMapping> code_mappings();
// Where memcpy, memmove and memset resolved to in this process (glibc picks one
// implementation per CPU; its symbol is local, so a profile names it from here).
std::vector<std::pair<std::string, unsigned long long>> resolved_memory_functions();

// Sends this process's stderr to the null device for the guard's lifetime
// (Lite logs a screenful for every predictor, including throw-away probes).
class StderrSilencer {
 public:
  StderrSilencer();
  ~StderrSilencer();
  StderrSilencer(const StderrSilencer&) = delete;
  StderrSilencer& operator=(const StderrSilencer&) = delete;

 private:
  int saved_ = -1;
};

}  // namespace platform
}  // namespace edgekit
