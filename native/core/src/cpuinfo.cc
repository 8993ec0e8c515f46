#include "edgekit/cpuinfo.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "edgekit/platform.h"

namespace edgekit {

const std::vector<CorePart>& lite_part_table() {
  static const std::vector<CorePart> table = {
      {0xd03, CoreType::a53}, {0xd04, CoreType::a35}, {0x803, CoreType::a55}, {0x805, CoreType::a55},
      {0xd05, CoreType::a55}, {0xd07, CoreType::a57}, {0xd08, CoreType::a72}, {0x205, CoreType::a72},
      {0x800, CoreType::a73}, {0x801, CoreType::a73}, {0xd09, CoreType::a73}, {0x802, CoreType::a75},
      {0xd0a, CoreType::a75}, {0x804, CoreType::a76}, {0xd40, CoreType::a76}, {0xd0d, CoreType::a77},
      {0xd41, CoreType::a78}, {0xd44, CoreType::x1},  {0xd46, CoreType::a510}, {0xd47, CoreType::a710},
      {0xd48, CoreType::x2},
  };
  return table;
}

CoreType core_type_for_part(unsigned part) {
  for (const auto& entry : lite_part_table()) {
    if (entry.part == part) return entry.core;
  }
  return CoreType::unknown;
}

const char* core_type_name(CoreType core) {
  switch (core) {
    case CoreType::unknown: return "unknown";
    case CoreType::a35: return "A35";
    case CoreType::a53: return "A53";
    case CoreType::a55: return "A55";
    case CoreType::a57: return "A57";
    case CoreType::a72: return "A72";
    case CoreType::a73: return "A73";
    case CoreType::a75: return "A75";
    case CoreType::a76: return "A76";
    case CoreType::a77: return "A77";
    case CoreType::a78: return "A78";
    case CoreType::x1: return "X1";
    case CoreType::x2: return "X2";
    case CoreType::a510: return "A510";
    case CoreType::a710: return "A710";
  }
  return "unknown";
}

bool lite_dot_capable(CoreType core) {
  switch (core) {
    case CoreType::a55:
    case CoreType::a76:
    case CoreType::a77:
    case CoreType::a78:
    case CoreType::x1:
    case CoreType::x2:
    case CoreType::a510:
    case CoreType::a710:
      return true;
    default:
      return false;
  }
}

namespace {

// Lite reads `CPU part\t: %x` from every line that contains "part"; a line that
// contains "part" but not that pattern still counts as a core, of unknown type.
bool parse_part(const std::string& line, unsigned* part) {
  const std::string key = "CPU part";
  if (line.compare(0, key.size(), key) != 0) return false;
  std::size_t i = key.size();
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  if (i >= line.size() || line[i] != ':') return false;
  ++i;
  while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
  char* end = nullptr;
  const unsigned long value = std::strtoul(line.c_str() + i, &end, 16);
  if (end == line.c_str() + i) return false;
  *part = static_cast<unsigned>(value);
  return true;
}

std::string hex(unsigned value) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%03x", value);
  return buf;
}

}  // namespace

CpuReport classify_cpuinfo(const std::string& text, int core_count, bool runtime_dotprod) {
  CpuReport report;
  report.runtime_dotprod = runtime_dotprod;
  std::vector<CoreType> listed;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.find("part") == std::string::npos) continue;
    unsigned part = 0;
    if (parse_part(line, &part)) {
      report.parts.push_back(hex(part));
      listed.push_back(core_type_for_part(part));
    } else {
      listed.push_back(CoreType::unknown);
    }
  }
  report.cores = core_count > 0 ? core_count : std::max<int>(1, static_cast<int>(listed.size()));
  report.core_types.assign(static_cast<std::size_t>(report.cores), CoreType::unknown);
  for (std::size_t i = 0; i < report.core_types.size(); ++i) {
    if (i < listed.size()) report.core_types[i] = listed[i];
    else if (!listed.empty()) report.core_types[i] = report.core_types[i - 1];
  }
  report.dot_capable = true;
  for (auto core : report.core_types) report.dot_capable = report.dot_capable && lite_dot_capable(core);
  return report;
}

Json CpuReport::to_json() const {
  Json out = Json::object();
  out.set("arch", arch);
  out.set("cores", cores);
  out.set("parts", Json::array_of(parts));
  Json types = Json::array();
  for (auto core : core_types) types.push(core_type_name(core));
  out.set("core_types", types);
  out.set("dot_capable_cores", dot_capable);
  out.set("runtime_dotprod", runtime_dotprod);
  out.set("int8_kernel_path", int8_kernel_path());
  out.set("source", source);
  return out;
}

CpuReport detect_cpu(bool runtime_dotprod) {
  const auto text = platform::read_cpuinfo();
  CpuReport report = classify_cpuinfo(text ? *text : std::string(), platform::cpu_core_count(), runtime_dotprod);
  report.arch = platform::machine_arch();
  report.source = text ? "/proc/cpuinfo" : "unavailable (no /proc/cpuinfo on this platform)";
  return report;
}

}  // namespace edgekit
