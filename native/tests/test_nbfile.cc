#include "edgekit/file_io.h"
#include "edgekit/nbfile.h"
#include "harness.h"
#include "temp_dir.h"

using namespace edgekit;

namespace {

void put(std::string& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out += static_cast<char>((value >> (8 * i)) & 0xff);
}

// A synthetic format-2 .nb: header, a junk program, and `params` parameters of 40 bytes.
std::string synthetic_nb(const std::string& version, std::size_t program, int params) {
  std::string out;
  put(out, 2, 2);
  std::string field = version;
  field.resize(16, '\0');
  field[15] = '\0';
  out += field;
  put(out, program, 8);
  out.append(program, 'P');
  put(out, 0, 2);           // params version
  put(out, 3, 2), out += "abc";  // meta
  put(out, 6, 2), put(out, static_cast<std::uint64_t>(params), 2), put(out, 40, 4);
  for (int i = 0; i < params; ++i) put(out, 40, 4), out.append(40, 'w');
  return out;
}

NbHeader header_of(const test::TempDir& dir, const std::string& bytes) {
  const std::string path = dir.file("model.nb");
  write_file_atomic(path, bytes);
  return read_nb_header(path);
}

}  // namespace

EK_TEST(nbfile, reads_a_well_formed_header) {
  test::TempDir dir;
  const NbHeader h = header_of(dir, synthetic_nb("v2.13-rc", 100, 3));
  EK_CHECK_EQ(h.format_version, 2u);
  EK_CHECK_EQ(h.opt_version, std::string("v2.13-rc"));
  EK_CHECK_EQ(h.program_bytes, 100u);
  EK_CHECK_EQ(h.param_count, 3);
  EK_CHECK_EQ(h.params_bytes, 2u + 5 + 8 + 3 * 44);
  EK_CHECK_EQ(h.file_bytes, 26u + 100 + h.params_bytes);
}

EK_TEST(nbfile, opt_padding_garbage_after_the_nul_is_ignored) {
  test::TempDir dir;
  std::string bytes = synthetic_nb("v2.13-rc", 10, 0);
  bytes[2 + 9] = '\x7f';  // opt 2.13rc0 leaves stack bytes after the NUL
  EK_CHECK_EQ(header_of(dir, bytes).opt_version, std::string("v2.13-rc"));
}

EK_TEST(nbfile, truncated_files_are_refused) {
  test::TempDir dir;
  const std::string good = synthetic_nb("v2.13-rc", 100, 3);
  EK_CHECK_ERROR(header_of(dir, good.substr(0, good.size() - 1)), model, "truncated: parameter 3 of 3");
  EK_CHECK_ERROR(header_of(dir, good.substr(0, 60)), model, "declares a 100-byte program");
  EK_CHECK_ERROR(header_of(dir, good.substr(0, 20)), model, "only 20 of the 26 header bytes");
  EK_CHECK_ERROR(header_of(dir, good.substr(0, 127)), model, "truncated");
  EK_CHECK_ERROR(header_of(dir, ""), model, "empty");
}

EK_TEST(nbfile, foreign_files_are_refused) {
  test::TempDir dir;
  EK_CHECK_ERROR(header_of(dir, std::string("\x7f" "ELF\x02\x01\x01", 7) + std::string(64, '\0')), model,
                 "looks like an ELF binary");
  EK_CHECK_ERROR(header_of(dir, std::string("PK\x03\x04", 4) + std::string(64, 'z')), model, "zip archive");
  std::string no_nul = synthetic_nb("v2.13-rc", 10, 0);
  for (int i = 2; i < 18; ++i) no_nul[static_cast<std::size_t>(i)] = 'v';
  EK_CHECK_ERROR(header_of(dir, no_nul), model, "no readable opt version");
  std::string bad_params = synthetic_nb("v2.13-rc", 10, 0);
  bad_params[26 + 10] = 1;
  EK_CHECK_ERROR(header_of(dir, bad_params), model, "version 0");
  EK_CHECK_ERROR(read_nb_header(dir.file("missing.nb")), model, "cannot read");
}

EK_TEST(nbfile, format_1_needs_only_some_parameters) {
  test::TempDir dir;
  std::string v1 = synthetic_nb("v2.9", 10, 0);
  v1[0] = 1;
  EK_CHECK_EQ(header_of(dir, v1).format_version, 1u);
  EK_CHECK_EQ(header_of(dir, v1).param_count, -1);
  EK_CHECK_ERROR(header_of(dir, v1.substr(0, 36)), model, "no parameters");
}

EK_TEST(nbfile, empty_model_is_a_valid_nb) {
  test::TempDir dir;
  const std::string probe = empty_nb_model("v2.13-rc");
  EK_CHECK_EQ(probe.size(), 26u + 80 + 16);
  const NbHeader h = header_of(dir, probe);
  EK_CHECK_EQ(h.opt_version, std::string("v2.13-rc"));
  EK_CHECK_EQ(h.program_bytes, 80u);
  EK_CHECK_EQ(h.param_count, 0);
  EK_CHECK_EQ(header_of(dir, empty_nb_model("a-very-long-version-string")).opt_version, std::string("a-very-long-ver"));
}
