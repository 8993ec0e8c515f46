// Latency summaries. Percentiles interpolate linearly between order statistics
// (numpy.percentile's default), so figures match what Python computes from the
// raw samples the record also keeps.
#pragma once

#include <vector>

#include "edgekit/json.h"

namespace edgekit {

struct Summary {
  std::size_t count = 0;
  double min = 0, max = 0, mean = 0, median = 0, p90 = 0, stdev = 0;  // stdev: population

  Json to_json() const;  // null when count == 0
};

double percentile(std::vector<double> values, double q);  // q in [0, 100]; 0 for no values
Summary summarize(const std::vector<double>& values);

}  // namespace edgekit
