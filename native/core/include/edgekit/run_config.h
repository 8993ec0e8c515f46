// How a model runs: threads and Lite's power mode (which cores the threads are
// bound to). Lite-free so command lines, records and a future C API share it.
#pragma once

#include <optional>
#include <string>

namespace edgekit {

// Mirrors Lite's PowerMode; no_bind lets the OS schedule (Lite's default).
enum class PowerMode { no_bind, high, low, full, rand_high, rand_low };

struct PowerModeName {
  PowerMode mode;
  const char* name;
};
const PowerModeName* power_mode_table(std::size_t* count);
const char* power_mode_name(PowerMode mode);
std::optional<PowerMode> power_mode_from_name(const std::string& name);
std::string power_mode_names();  // "no_bind|high|low|full|rand_high|rand_low"

struct RunConfig {
  int threads = 1;
  PowerMode power_mode = PowerMode::no_bind;
};

}  // namespace edgekit
