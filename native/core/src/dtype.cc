#include "edgekit/dtype.h"

#include <iterator>

namespace edgekit {
namespace {

const DTypeInfo kTable[] = {
    {DType::float32, "float32", "<f4", 4}, {DType::float64, "float64", "<f8", 8},
    {DType::int8, "int8", "|i1", 1},       {DType::int16, "int16", "<i2", 2},
    {DType::int32, "int32", "<i4", 4},     {DType::int64, "int64", "<i8", 8},
    {DType::uint8, "uint8", "|u1", 1},     {DType::uint16, "uint16", "<u2", 2},
    {DType::boolean, "bool", "|b1", 1},
};

}  // namespace

const DTypeInfo& dtype_info(DType dtype) {
  for (const auto& info : kTable) {
    if (info.dtype == dtype) return info;
  }
  return kTable[0];  // unreachable: every enumerator is in the table
}

const char* dtype_name(DType dtype) { return dtype_info(dtype).name; }
std::size_t dtype_size(DType dtype) { return dtype_info(dtype).size; }

std::optional<DType> dtype_from_name(const std::string& name) {
  for (const auto& info : kTable) {
    if (name == info.name) return info.dtype;
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_descr(const std::string& descr, bool* big_endian) {
  if (big_endian) *big_endian = false;
  if (descr.empty()) return std::nullopt;
  char order = descr[0];
  std::string code = descr;
  if (order == '<' || order == '>' || order == '|' || order == '=') {
    code = descr.substr(1);
  } else {
    order = '=';
  }
  for (const auto& info : kTable) {
    if (code != info.descr + 1) continue;
    if (order == '>' && info.size > 1) {
      if (big_endian) *big_endian = true;
      return std::nullopt;
    }
    return info.dtype;
  }
  return std::nullopt;
}

std::string dtype_names() {
  std::string out;
  for (const auto& info : kTable) {
    if (!out.empty()) out += ", ";
    out += info.name;
  }
  return out;
}

}  // namespace edgekit
