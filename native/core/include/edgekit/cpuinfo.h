// Which INT8 kernels Paddle-Lite will pick on this CPU, decided the way Lite
// v2.13-rc decides it (lite/core/device_info.{h,cc}): every line of
// /proc/cpuinfo containing "part" names one core; its "CPU part" id maps to a
// core type; cores without a line repeat the last one; and the ARMv8.2
// dot-product (sdot) kernels run only when *every* core is of a type Lite lists
// as dot-capable and the library was built with WITH_ARM_DOTPROD. Otherwise Lite
// uses its plain NEON INT8 kernels (the Cortex-A53/A72 path).
#pragma once

#include <string>
#include <vector>

#include "edgekit/json.h"

namespace edgekit {

enum class CoreType { unknown, a35, a53, a55, a57, a72, a73, a75, a76, a77, a78, x1, x2, a510, a710 };

struct CorePart {
  unsigned part;
  CoreType core;
};

// The part-id table Lite uses ("CPU part" -> core type).
const std::vector<CorePart>& lite_part_table();
CoreType core_type_for_part(unsigned part);
const char* core_type_name(CoreType core);  // "A55", "X1", "unknown"
// Lite's has_dot() list: A55, A76, A77, A78, X1, X2, A510, A710 (A75 is not on it).
bool lite_dot_capable(CoreType core);

struct CpuReport {
  std::string arch;               // uname machine, e.g. "aarch64", "armv7l"
  int cores = 0;                  // the core count Lite uses
  std::vector<std::string> parts; // every "CPU part" value seen, in order ("0xd05")
  std::vector<CoreType> core_types;  // per core, as Lite fills them
  bool dot_capable = false;       // all cores dot-capable (Lite's has_dot() with DOTPROD on)
  bool runtime_dotprod = false;   // the Lite library was built with WITH_ARM_DOTPROD
  std::string source;             // where the text came from, or why there was none

  // "dotprod" or "neon": the INT8 GEMM/conv kernels Lite will run.
  std::string int8_kernel_path() const { return dot_capable && runtime_dotprod ? "dotprod" : "neon"; }
  Json to_json() const;
};

// `core_count` <= 0: one core per "part" line (at least one).
CpuReport classify_cpuinfo(const std::string& text, int core_count, bool runtime_dotprod);

// This machine, through platform.h (reads /proc/cpuinfo where there is one).
CpuReport detect_cpu(bool runtime_dotprod);

}  // namespace edgekit
