#include <string>

#include "edgekit/file_io.h"
#include "edgekit/sha256.h"
#include "harness.h"
#include "temp_dir.h"

using namespace edgekit;

// FIPS 180-4 examples and the NIST long-message vector.
EK_TEST(sha256, known_vectors) {
  EK_CHECK_EQ(sha256_hex("", 0), std::string("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
  EK_CHECK_EQ(sha256_hex("abc", 3), std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EK_CHECK_EQ(sha256_hex(two_blocks.data(), two_blocks.size()),
              std::string("248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"));
  const std::string million(1000000, 'a');
  EK_CHECK_EQ(sha256_hex(million.data(), million.size()),
              std::string("cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"));
}

// Any split of the input gives the same digest (the buffering across update calls).
EK_TEST(sha256, streaming_equals_one_shot) {
  std::string data;
  for (int i = 0; i < 1000; ++i) data += static_cast<char>((i * 7919) & 0xff);
  const std::string whole = sha256_hex(data.data(), data.size());
  for (std::size_t step : {1u, 3u, 55u, 56u, 63u, 64u, 65u, 127u, 999u}) {
    Sha256 h;
    for (std::size_t at = 0; at < data.size(); at += step) h.update(data.data() + at, std::min(step, data.size() - at));
    EK_CHECK_EQ(h.hex(), whole);
  }
  Sha256 reused;
  reused.update("x", 1);
  reused.hex();
  reused.reset();
  reused.update(data.data(), data.size());
  EK_CHECK_EQ(reused.hex(), whole);
}

EK_TEST(sha256, files_and_missing_files) {
  test::TempDir dir;
  write_file_atomic(dir.file("a.bin"), "abc");
  std::uint64_t bytes = 0;
  EK_CHECK_EQ(sha256_file(dir.file("a.bin"), ExitCode::model, &bytes),
              std::string("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"));
  EK_CHECK_EQ(bytes, std::uint64_t{3});
  EK_CHECK_ERROR(sha256_file(dir.file("none.bin"), ExitCode::model), model, "none.bin");
}
