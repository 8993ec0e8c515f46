// .npy arrays (numpy's format 1.0/2.0/3.0, C order, little-endian) read into
// memory and written whole or streamed chunk by chunk.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "edgekit/dtype.h"

namespace edgekit {

using Shape = std::vector<std::int64_t>;

struct Array {
  DType dtype = DType::float32;
  Shape shape;
  std::vector<std::uint8_t> data;  // count() * dtype_size(dtype) bytes, C order

  std::int64_t count() const;
  std::size_t bytes() const { return data.size(); }
  template <typename T>
  const T* as() const { return reinterpret_cast<const T*>(data.data()); }
  template <typename T>
  T* as() { return reinterpret_cast<T*>(data.data()); }
};

std::int64_t element_count(const Shape& shape);
// "8x1x32x32" (what messages and --expect use); "scalar" for rank 0.
std::string shape_text(const Shape& shape);

// Errors are edgekit::Error with ExitCode::input; `what` names the source in messages.
Array parse_npy(const std::uint8_t* bytes, std::size_t size, const std::string& what);
Array read_npy(const std::string& path);

// The header numpy would write for this dtype and shape (version 1.0, or 2.0 when
// the dict does not fit 64 KiB), padded so the data starts 64-byte aligned.
std::string npy_header(DType dtype, const Shape& shape);
// Throws Error(ExitCode::output) when the file cannot be written.
void write_npy(const std::string& path, const Array& array);
std::string npy_bytes(const Array& array);

// Writes the header for the final shape first, then the data as it arrives, so a
// long pass never holds every output in memory. close() checks the byte count.
class NpyStreamWriter {
 public:
  NpyStreamWriter() = default;
  NpyStreamWriter(const std::string& path, DType dtype, const Shape& shape);
  NpyStreamWriter(NpyStreamWriter&& other) noexcept;
  NpyStreamWriter& operator=(NpyStreamWriter&& other) noexcept;
  NpyStreamWriter(const NpyStreamWriter&) = delete;
  NpyStreamWriter& operator=(const NpyStreamWriter&) = delete;
  ~NpyStreamWriter();

  void append(const void* data, std::size_t bytes);
  void close();
  bool is_open() const { return file_ != nullptr; }
  const std::string& path() const { return path_; }

 private:
  std::FILE* file_ = nullptr;
  std::string path_;
  std::uint64_t expected_ = 0;
  std::uint64_t written_ = 0;
};

}  // namespace edgekit
