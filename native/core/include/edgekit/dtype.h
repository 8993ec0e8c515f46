// Element types shared by the .npy reader/writer, the engine and the record.
// One table (dtype.cc) maps each to its numpy name, its .npy descr and its size.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace edgekit {

enum class DType { float32, float64, int8, int16, int32, int64, uint8, uint16, boolean };

struct DTypeInfo {
  DType dtype;
  const char* name;   // numpy's name: "float32", "bool"
  const char* descr;  // little-endian .npy descr: "<f4", "|b1"
  std::size_t size;
};

const DTypeInfo& dtype_info(DType dtype);
const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);
// "float32" / "int64" / ... (numpy names); nullopt when unknown.
std::optional<DType> dtype_from_name(const std::string& name);
// A .npy descr such as "<f4", "|u1", "<i8" (also "=f4" and "f4"); nullopt when
// unsupported. Big-endian descrs are reported through *big_endian so callers can
// say why they refuse the file.
std::optional<DType> dtype_from_descr(const std::string& descr, bool* big_endian = nullptr);
// All names, for messages: "float32, float64, ...".
std::string dtype_names();

}  // namespace edgekit
