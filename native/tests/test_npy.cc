#include <cstring>

#include "edgekit/file_io.h"
#include "edgekit/npy.h"
#include "edgekit/npz.h"
#include "harness.h"
#include "temp_dir.h"

using namespace edgekit;

namespace {

// Headers exactly as numpy 1.26 numpy.save writes them (test vectors).
std::string numpy_header(const std::string& dict) {
  std::string h = std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict;
  h.append(127 - h.size(), ' ');
  return h + "\n";
}

Array iota(DType dtype, Shape shape) {
  Array a;
  a.dtype = dtype;
  a.shape = shape;
  a.data.resize(static_cast<std::size_t>(element_count(shape)) * dtype_size(dtype));
  for (std::size_t i = 0; i < a.data.size(); ++i) a.data[i] = static_cast<std::uint8_t>(i * 7 + 1);
  return a;
}

}  // namespace

EK_TEST(npy, header_is_byte_identical_to_numpy) {
  EK_CHECK_EQ(npy_header(DType::float32, {2, 3}), numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"));
  EK_CHECK_EQ(npy_header(DType::int64, {5}), numpy_header("{'descr': '<i8', 'fortran_order': False, 'shape': (5,), }"));
  EK_CHECK_EQ(npy_header(DType::float64, {}), numpy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"));
  EK_CHECK_EQ(npy_header(DType::uint8, {0, 3}), numpy_header("{'descr': '|u1', 'fortran_order': False, 'shape': (0, 3), }"));
  EK_CHECK_EQ(npy_header(DType::boolean, {4}), numpy_header("{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }"));
  EK_CHECK_EQ(npy_header(DType::float32, {1, 1, 32, 32}).size() % 64, 0u);
}

EK_TEST(npy, parse_what_numpy_writes) {
  std::string bytes = numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  const float values[6] = {0.5f, -1, 2, 3.25f, 4, 1e-3f};
  bytes.append(reinterpret_cast<const char*>(values), sizeof values);
  const Array a = parse_npy(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "x.npy");
  EK_CHECK(a.dtype == DType::float32);
  EK_CHECK_EQ(a.shape, (Shape{2, 3}));
  EK_CHECK_EQ(a.as<float>()[3], 3.25f);
  EK_CHECK_EQ(a.as<float>()[5], 1e-3f);
}

EK_TEST(npy, round_trip_every_dtype) {
  test::TempDir dir;
  for (DType t : {DType::float32, DType::float64, DType::int8, DType::int16, DType::int32, DType::int64, DType::uint8,
                  DType::uint16, DType::boolean}) {
    const Array a = iota(t, {3, 2, 5});
    const std::string path = dir.file(std::string(dtype_name(t)) + ".npy");
    write_npy(path, a);
    const Array b = read_npy(path);
    EK_CHECK(b.dtype == t);
    EK_CHECK_EQ(b.shape, a.shape);
    EK_CHECK(b.data == a.data);
  }
  write_npy(dir.file("scalar.npy"), iota(DType::float64, {}));
  EK_CHECK_EQ(read_npy(dir.file("scalar.npy")).count(), 1);
}

EK_TEST(npy, refuses_what_it_cannot_read) {
  const auto parse = [](const std::string& bytes) {
    return parse_npy(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), "f.npy");
  };
  EK_CHECK_ERROR(parse("not numpy at all"), input, "no NUMPY magic");
  EK_CHECK_ERROR(parse(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }") + "short"), input,
                 "truncated data");
  EK_CHECK_ERROR(parse(numpy_header("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }") + "abcd"), input,
                 "big-endian");
  EK_CHECK_ERROR(parse(numpy_header("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }") + "abcdefgh"), input,
                 "dtype <c8");
  EK_CHECK_ERROR(parse(numpy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }") + std::string(16, 'x')),
                 input, "Fortran order");
  EK_CHECK_ERROR(parse(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }") + "abcdEXTRA"), input,
                 "unexpected bytes");
  // Fortran order with one non-trivial axis is the same bytes as C order
  const Array a = parse(numpy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (1, 2), }") + "abcdefgh");
  EK_CHECK_EQ(a.shape, (Shape{1, 2}));
  EK_CHECK_ERROR(read_npy("/nonexistent/edgekit.npy"), input, "cannot read");
}

EK_TEST(npy, stream_writer_checks_the_byte_count) {
  test::TempDir dir;
  NpyStreamWriter w(dir.file("s.npy"), DType::int32, {4, 2});
  const std::int32_t chunk[4] = {1, 2, 3, 4};
  w.append(chunk, sizeof chunk);
  EK_CHECK_ERROR(w.close(), internal, "wrote 16 of 32 bytes");
  NpyStreamWriter full(dir.file("full.npy"), DType::int32, {4, 2});
  full.append(chunk, sizeof chunk);
  full.append(chunk, sizeof chunk);
  EK_CHECK_ERROR(full.append(chunk, sizeof chunk), internal, "more data");
  full.close();
  const Array back = read_npy(dir.file("full.npy"));
  EK_CHECK_EQ(back.as<std::int32_t>()[5], 2);
  EK_CHECK_ERROR(NpyStreamWriter(dir.file("no/such/dir.npy"), DType::int32, {1}), output, "cannot create");
}

EK_TEST(npz, crc32_check_value) {
  EK_CHECK_EQ(crc32("123456789", 9), 0xcbf43926u);
  EK_CHECK_EQ(crc32("", 0), 0u);
}

EK_TEST(npz, round_trip_keeps_names_and_order) {
  test::TempDir dir;
  std::vector<NamedArray> arrays = {{"image", iota(DType::float32, {8, 1, 4, 4})},
                                    {"im_shape", iota(DType::int64, {8, 2})},
                                    {"x2paddle_input/0", iota(DType::uint8, {8})}};
  write_npz(dir.file("in.npz"), arrays);
  const auto back = read_npz(dir.file("in.npz"));
  EK_CHECK_EQ(back.size(), 3u);
  for (std::size_t i = 0; i < back.size(); ++i) {
    EK_CHECK_EQ(back[i].name, arrays[i].name);
    EK_CHECK_EQ(back[i].array.shape, arrays[i].array.shape);
    EK_CHECK(back[i].array.data == arrays[i].array.data);
  }
}

EK_TEST(npz, refuses_compressed_damaged_and_foreign) {
  test::TempDir dir;
  write_npz(dir.file("ok.npz"), {{"a", iota(DType::float32, {2, 2})}});
  std::string bytes = read_file_text(dir.file("ok.npz"), ExitCode::input);

  std::string deflated = bytes;  // mark the entry compressed in its central directory record
  const auto central = deflated.find(std::string("PK\x01\x02", 4));
  deflated[central + 10] = 8;
  write_file_atomic(dir.file("deflated.npz"), deflated);
  EK_CHECK_ERROR(read_npz(dir.file("deflated.npz")), input, "numpy.savez, not numpy.savez_compressed");

  std::string damaged = bytes;
  damaged[170] = static_cast<char>(damaged[170] ^ 0x55);  // inside the array data
  write_file_atomic(dir.file("damaged.npz"), damaged);
  EK_CHECK_ERROR(read_npz(dir.file("damaged.npz")), input, "CRC-32");

  write_file_atomic(dir.file("cut.npz"), bytes.substr(0, bytes.size() - 30));
  EK_CHECK_ERROR(read_npz(dir.file("cut.npz")), input, "not a readable .npz");
  write_file_atomic(dir.file("text.npz"), "hello");
  EK_CHECK_ERROR(read_npz(dir.file("text.npz")), input, "not a readable .npz");
}
