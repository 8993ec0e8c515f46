#include "edgekit/numpy_compat.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <limits>
#include <locale>
#include <sstream>

namespace edgekit {
namespace {

constexpr std::size_t kChunk = 8192;  // numpy's default iterator buffer, in elements

// numpy's pairwise_sum (loops_utils.h), in the element type.
template <typename T>
T pairwise(const T* a, std::size_t n) {
  if (n < 8) {
    T res = 0;
    for (std::size_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    T r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    std::size_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int j = 0; j < 8; ++j) r[j] += a[i + j];
    }
    T res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  std::size_t half = n / 2;
  half -= half % 8;
  return pairwise(a, half) + pairwise(a + half, n - half);
}

template <typename T>
T chunked_sum(const T* a, std::size_t n) {
  T total = 0;
  for (std::size_t start = 0; start < n; start += kChunk) total += pairwise(a + start, std::min(kChunk, n - start));
  return total;
}

template <typename T>
std::size_t argmax(const T* v, std::size_t n) {
  std::size_t best = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (std::isnan(v[i])) return i;
    if (v[i] > v[best]) best = i;
  }
  return best;
}

}  // namespace

float numpy_sum(const float* values, std::size_t count) { return chunked_sum(values, count); }
double numpy_sum(const double* values, std::size_t count) { return chunked_sum(values, count); }

float numpy_mean(const float* values, std::size_t count) {
  if (count == 0) return std::numeric_limits<float>::quiet_NaN();
  // numpy divides the float32 sum by an intp count: the division happens in float64.
  return static_cast<float>(static_cast<double>(numpy_sum(values, count)) / static_cast<double>(count));
}

std::size_t numpy_argmax(const float* values, std::size_t count) { return argmax(values, count); }
std::size_t numpy_argmax(const double* values, std::size_t count) { return argmax(values, count); }

double python_round(double value, int digits) {
  if (!std::isfinite(value)) return value;
  // The C library's fixed-point formatting is correctly rounded on the exact binary
  // value with ties to even, as CPython's dtoa; reading it back is correctly rounded too.
  std::ostringstream out;
  out.imbue(std::locale::classic());
  out << std::fixed << std::setprecision(digits) << value;
  std::istringstream back(out.str());
  back.imbue(std::locale::classic());
  double rounded = 0;
  back >> rounded;
  return rounded;
}

double numpy_round(double value, int digits) {
  double factor = 1.0;
  for (int i = 0; i < digits; ++i) factor *= 10.0;
  return std::nearbyint(value * factor) / factor;
}

}  // namespace edgekit
