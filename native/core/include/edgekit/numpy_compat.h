// The few numpy and Python arithmetic rules edgekit's post-processing depends on,
// reproduced so the C++ results equal the Python ones to the last bit:
//  - numpy's sum: pairwise summation (8 accumulators, blocks of <= 128, halves
//    above) inside chunks of 8192 elements (the iterator's buffer), chunk sums
//    added in order onto 0;
//  - numpy's float32 mean: float32(double(sum) / count);
//  - numpy's argmax / max: first maximum, a NaN wins;
//  - Python's round(x, n) on a float (correctly rounded decimal, ties to even) and
//    numpy's round on a float64 scalar (rint(x * 10^n) / 10^n), which differ.
#pragma once

#include <cstddef>
#include <cstdint>

namespace edgekit {

float numpy_sum(const float* values, std::size_t count);
double numpy_sum(const double* values, std::size_t count);
float numpy_mean(const float* values, std::size_t count);  // NaN for count 0, as numpy

// Index of the first maximum (of the first NaN if any); 0 for count 0.
std::size_t numpy_argmax(const float* values, std::size_t count);
std::size_t numpy_argmax(const double* values, std::size_t count);

double python_round(double value, int digits);
double numpy_round(double value, int digits);

}  // namespace edgekit
