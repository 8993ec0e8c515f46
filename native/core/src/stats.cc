#include "edgekit/stats.h"

#include <algorithm>
#include <cmath>

namespace edgekit {

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::clamp(q, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(rank));
  const auto hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return values[lo] + (values[hi] - values[lo]) * frac;
}

Summary summarize(const std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  s.min = *std::min_element(values.begin(), values.end());
  s.max = *std::max_element(values.begin(), values.end());
  double sum = 0;
  for (double v : values) sum += v;
  s.mean = sum / static_cast<double>(values.size());
  double sq = 0;
  for (double v : values) sq += (v - s.mean) * (v - s.mean);
  s.stdev = std::sqrt(sq / static_cast<double>(values.size()));
  s.median = percentile(values, 50);
  s.p90 = percentile(values, 90);
  return s;
}

Json Summary::to_json() const {
  if (count == 0) return Json();
  const auto r = [](double v) { return std::round(v * 1000.0) / 1000.0; };
  Json out = Json::object();
  out.set("count", count);
  out.set("min", r(min));
  out.set("median", r(median));
  out.set("mean", r(mean));
  out.set("p90", r(p90));
  out.set("max", r(max));
  out.set("stdev", r(stdev));
  return out;
}

}  // namespace edgekit
