#include "edgekit/run_config.h"

#include <iterator>

namespace edgekit {
namespace {

const PowerModeName kModes[] = {
    {PowerMode::no_bind, "no_bind"}, {PowerMode::high, "high"},          {PowerMode::low, "low"},
    {PowerMode::full, "full"},       {PowerMode::rand_high, "rand_high"}, {PowerMode::rand_low, "rand_low"},
};

}  // namespace

const PowerModeName* power_mode_table(std::size_t* count) {
  *count = std::size(kModes);
  return kModes;
}

const char* power_mode_name(PowerMode mode) {
  for (const auto& m : kModes) {
    if (m.mode == mode) return m.name;
  }
  return "no_bind";
}

std::optional<PowerMode> power_mode_from_name(const std::string& name) {
  for (const auto& m : kModes) {
    if (name == m.name) return m.mode;
  }
  return std::nullopt;
}

std::string power_mode_names() {
  std::string out;
  for (const auto& m : kModes) {
    if (!out.empty()) out += "|";
    out += m.name;
  }
  return out;
}

}  // namespace edgekit
