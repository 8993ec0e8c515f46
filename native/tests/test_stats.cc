#include <cmath>

#include "edgekit/stats.h"
#include "harness.h"

EK_TEST(stats, percentiles_match_numpy_linear) {
  const std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  // numpy.percentile(v, [50, 90, 0, 100]) = 5.5, 9.1, 1, 10
  EK_CHECK_EQ(edgekit::percentile(v, 50), 5.5);
  EK_CHECK(std::abs(edgekit::percentile(v, 90) - 9.1) < 1e-12);
  EK_CHECK_EQ(edgekit::percentile(v, 0), 1.0);
  EK_CHECK_EQ(edgekit::percentile(v, 100), 10.0);
  EK_CHECK_EQ(edgekit::percentile({}, 50), 0.0);
  EK_CHECK_EQ(edgekit::percentile({4.0}, 90), 4.0);
}

EK_TEST(stats, summary_and_its_json) {
  const auto s = edgekit::summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EK_CHECK_EQ(s.count, 8u);
  EK_CHECK_EQ(s.mean, 5.0);
  EK_CHECK_EQ(s.stdev, 2.0);
  EK_CHECK_EQ(s.median, 4.5);
  EK_CHECK_EQ(s.min, 2.0);
  EK_CHECK_EQ(s.max, 9.0);
  const auto j = s.to_json();
  EK_CHECK_EQ(j.at("count").as_int(), 8);
  EK_CHECK_EQ(j.at("p90").as_number(), 7.6);
  EK_CHECK(edgekit::summarize({}).to_json().is_null());
}
