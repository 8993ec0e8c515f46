// LD_PRELOAD shim for emulation only: makes fopen("/proc/cpuinfo") return an ARM
// cpuinfo text, so Paddle-Lite under qemu-user (which passes the x86 host's
// cpuinfo through) classifies the cores as a real board's and picks the same
// INT8 kernels. Lite reads cpuinfo with fopen only (lite/core/device_info.cc);
// fopen64 is covered for callers built with large-file support.
//
//   EDGEKIT_CPU_PART   "0xd05" (Cortex-A55) or a list "0xd05,0xd05,0xd41"; cores
//                      beyond the list repeat its last entry, as Lite does
//   EDGEKIT_CPU_COUNT  processors to list (default: the core count Lite will see)
//
// Without EDGEKIT_CPU_PART the shim passes everything through.
// Large-file builds rename fopen to fopen64 in the headers; this file defines both by name.
#undef _FILE_OFFSET_BITS
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <string>

namespace {

using FopenFn = FILE* (*)(const char*, const char*);

FopenFn next_symbol(const char* name) { return reinterpret_cast<FopenFn>(dlsym(RTLD_NEXT, name)); }

int core_count(FopenFn real_fopen) {
  if (const char* env = getenv("EDGEKIT_CPU_COUNT")) {
    const int n = atoi(env);
    if (n > 0) return n;
  }
  // Lite counts /sys/devices/system/cpu/cpuN/uevent; listing more cores than it
  // counts would make it index past its own table.
  int n = 0;
  while (n < 4096) {
    const std::string path = "/sys/devices/system/cpu/cpu" + std::to_string(n) + "/uevent";
    FILE* f = real_fopen(path.c_str(), "rb");
    if (!f) break;
    fclose(f);
    ++n;
  }
  return n > 0 ? n : 1;
}

std::string cpuinfo_text(const char* parts_env, int cores) {
  std::string parts = parts_env;
  std::string text, part;
  std::size_t pos = 0;
  for (int cpu = 0; cpu < cores; ++cpu) {
    if (pos != std::string::npos && pos <= parts.size()) {
      const std::size_t comma = parts.find(',', pos);
      const std::string next = parts.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
      if (!next.empty()) part = next;
      pos = comma == std::string::npos ? std::string::npos : comma + 1;
    }
    text += "processor\t: " + std::to_string(cpu) + "\n";
    text += "BogoMIPS\t: 48.00\n";
    text += "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp\n";
    text += "CPU implementer\t: 0x41\n";
    text += "CPU architecture: 8\n";
    text += "CPU variant\t: 0x0\n";
    text += "CPU part\t: " + part + "\n";
    text += "CPU revision\t: 0\n\n";
  }
  return text;
}

FILE* open_fake(const std::string& text) {
  FILE* f = fmemopen(nullptr, text.size() + 1, "w+");
  if (!f) return nullptr;
  fwrite(text.data(), 1, text.size(), f);
  rewind(f);
  return f;
}

FILE* shimmed(FopenFn real, const char* path, const char* mode) {
  const char* parts = getenv("EDGEKIT_CPU_PART");
  if (parts && *parts && path && strcmp(path, "/proc/cpuinfo") == 0) {
    if (FILE* fake = open_fake(cpuinfo_text(parts, core_count(real)))) return fake;
  }
  return real(path, mode);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) FILE* fopen(const char* path, const char* mode) {
  static FopenFn real = next_symbol("fopen");
  return shimmed(real, path, mode);
}

__attribute__((visibility("default"))) FILE* fopen64(const char* path, const char* mode) {
  static FopenFn real = next_symbol("fopen64");
  return shimmed(real, path, mode);
}

}  // extern "C"
