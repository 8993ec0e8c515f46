// Signed asset sets (issue 22): with a public key the loader opens only a set whose
// assets.json is signed by it. The keys and signatures are made here with libsodium
// itself (the Python side's format is held against this one in
// tests/native/test_signed_assets.py). Builds without libsodium refuse every key.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "asset_fixture.h"
#include "edgekit/assets.h"
#include "edgekit/file_io.h"
#include "edgekit/signature.h"
#include "harness.h"
#include "temp_dir.h"

#if defined(EDGEKIT_TEST_SODIUM)
#include <sodium.h>
#endif

using namespace edgekit;
using namespace edgekit::test::fixture;
namespace fs = std::filesystem;

namespace {

// The loader must refuse with `reason` and a message holding `part`.
void expect_refusal(const std::string& path, const std::optional<PublicKey>& key, Refusal reason,
                    const std::string& part) {
  try {
    open_assets(path, kVersion, key);
  } catch (const AssetError& e) {
    if (e.reason() != reason || e.line().find(part) == std::string::npos) {
      test::fail(__FILE__, __LINE__, std::string("expected refused (") + refusal_name(reason) + ") with '" + part +
                                         "', got: " + e.line());
    }
    EK_CHECK(e.code() == (reason == Refusal::signature ? ExitCode::signature : ExitCode::model));
    return;
  }
  test::fail(__FILE__, __LINE__, std::string("expected a refusal: ") + refusal_name(reason) + " (" + part + ")");
}

Json read_json_file(const std::string& path) { return Json::parse(read_file_text(path, ExitCode::input)); }

std::string flip_byte(const std::string& path, std::size_t at) {
  std::string data = read_file_text(path, ExitCode::input);
  const std::string original = data;
  data[at] = static_cast<char>(data[at] ^ 1);
  write_file_atomic(path, data);
  return original;
}

#if defined(EDGEKIT_TEST_SODIUM)

struct Signer {
  unsigned char public_key[crypto_sign_PUBLICKEYBYTES];
  unsigned char secret_key[crypto_sign_SECRETKEYBYTES];
  Signer() {
    EK_CHECK(sodium_init() >= 0);
    crypto_sign_keypair(public_key, secret_key);
  }
  PublicKey key() const { return public_key_from_raw(public_key, sizeof public_key); }
};

std::string hex(const unsigned char* bytes, std::size_t size) {
  std::string out(2 * size + 1, '\0');
  sodium_bin2hex(&out[0], out.size(), bytes, size);
  out.pop_back();
  return out;
}

// assets.json.sig as `edgekit package --sign` writes it, over assets.json's bytes on disk.
void sign_set(const test::TempDir& dir, const Signer& signer) {
  const std::string index = read_file_text(dir.file("assets.json"), ExitCode::input);
  unsigned char signature[crypto_sign_BYTES];
  crypto_sign_detached(signature, nullptr, reinterpret_cast<const unsigned char*>(index.data()), index.size(),
                       signer.secret_key);
  Json record = Json::object();
  record.set("schema", "edgekit.signature/1");
  record.set("algorithm", "ed25519");
  record.set("signed", "assets.json");
  record.set("public_key", hex(signer.public_key, sizeof signer.public_key));
  record.set("signature", hex(signature, sizeof signature));
  write_json(dir.file("assets.json.sig"), record);
}

// The PEM `openssl pkey -pubout` writes for `raw` (32 bytes), or with another DER prefix.
std::string pem_of(const unsigned char* raw, const std::vector<unsigned char>& prefix) {
  std::vector<unsigned char> der(prefix);
  der.insert(der.end(), raw, raw + 32);
  std::string text(sodium_base64_ENCODED_LEN(der.size(), sodium_base64_VARIANT_ORIGINAL), '\0');
  sodium_bin2base64(&text[0], text.size(), der.data(), der.size(), sodium_base64_VARIANT_ORIGINAL);
  text.pop_back();
  return "-----BEGIN PUBLIC KEY-----\n" + text + "\n-----END PUBLIC KEY-----\n";
}

const std::vector<unsigned char> kEd25519Spki = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};

}  // namespace

EK_TEST(signature, a_set_signed_by_the_key_opens) {
  EK_CHECK(signatures_available());
  test::TempDir dir;
  write_asset_set(dir);
  const Signer signer;
  sign_set(dir, signer);
  const AssetSet set = open_assets(dir.file(""), kVersion, signer.key());
  EK_CHECK_EQ(set.signed_by, signer.key().id());
  EK_CHECK_EQ(set.files, std::int64_t{5});
  EK_CHECK_EQ(set.to_json().at("signed_by").as_string(), signer.key().id());
  // without a key: the checksums only, as before (the signature is not even read)
  EK_CHECK(open_assets(dir.file(""), kVersion).signed_by.empty());
  write_file_atomic(dir.file("assets.json.sig"), "not json");
  EK_CHECK_EQ(open_assets(dir.file(""), kVersion).files, std::int64_t{5});
}

EK_TEST(signature, one_byte_changed_anywhere_is_refused) {
  test::TempDir dir;
  write_asset_set(dir);
  const Signer signer;
  sign_set(dir, signer);
  std::vector<std::string> files = {"assets.json", "assets.json.sig"};
  const Json index = read_json_file(dir.file("assets.json"));
  for (const auto& [rel, meta] : index.at("files").members()) files.push_back(rel);
  std::size_t refused = 0;
  for (const std::string& rel : files) {
    const std::string path = dir.file(rel);
    const std::size_t size = fs::file_size(path);
    // every byte of the index and the signature; the first, middle and last of the others
    const bool every = rel.rfind("assets.json", 0) == 0;
    for (std::size_t at = 0; at < size; at += every ? 1 : std::max<std::size_t>(1, (size - 1) / 2)) {
      const std::string original = flip_byte(path, at);
      const Refusal reason = every ? Refusal::signature : Refusal::checksum_mismatch;
      expect_refusal(dir.file(""), signer.key(), reason, every ? std::string() : rel + " has sha256");
      write_file_atomic(path, original);
      ++refused;
    }
  }
  EK_CHECK(refused > 500);
  EK_CHECK_EQ(open_assets(dir.file(""), kVersion, signer.key()).files, std::int64_t{5});  // restored: opens again
}

// The 0 -> 7 attack of issue 22: preprocess.json edited and assets.json re-hashed. The
// checksums are fooled (corruption, not tampering); the signature is not.
EK_TEST(signature, a_rehashed_index_without_the_key_is_a_bad_signature) {
  test::TempDir dir;
  Json doc = write_asset_set(dir);
  const Signer signer;
  sign_set(dir, signer);
  const std::string edited = "{\"inputs\": [\"image\"], \"preprocess\": {\"scale\": -1}}\n";
  write_file_atomic(dir.file("digits/preprocess.json"), edited);
  Json files = doc.at("files");
  files.set("digits/preprocess.json", entry_of(edited));
  doc.set("files", files);
  write_json(dir.file("assets.json"), doc);
  EK_CHECK_EQ(open_assets(dir.file(""), kVersion).files, std::int64_t{5});
  expect_refusal(dir.file(""), signer.key(), Refusal::signature,
                 "the signature in assets.json.sig does not match assets.json: the set was changed after signing");
}

EK_TEST(signature, unsigned_or_another_key_is_refused) {
  test::TempDir dir;
  write_asset_set(dir);
  const Signer signer, other;
  expect_refusal(dir.file(""), signer.key(), Refusal::signature,
                 "the set is not signed (no assets.json.sig) but the app requires a signature by key " + signer.key().id());
  sign_set(dir, other);
  expect_refusal(dir.file(""), signer.key(), Refusal::signature,
                 "signed by key " + other.key().id() + ", not by the app's key " + signer.key().id());
  // a record naming the app's key over another key's signature is still refused
  Json record = read_json_file(dir.file("assets.json.sig"));
  record.set("public_key", hex(signer.public_key, sizeof signer.public_key));
  write_json(dir.file("assets.json.sig"), record);
  expect_refusal(dir.file(""), signer.key(), Refusal::signature, "does not match assets.json");
  // damaged records
  record.set("schema", "edgekit.signature/2");
  write_json(dir.file("assets.json.sig"), record);
  expect_refusal(dir.file(""), signer.key(), Refusal::signature, "is not an edgekit.signature/1 record");
  record.set("schema", "edgekit.signature/1");
  record.set("signature", record.at("signature").as_string().substr(2));
  write_json(dir.file("assets.json.sig"), record);
  expect_refusal(dir.file(""), signer.key(), Refusal::signature, "is not an edgekit.signature/1 record");
  // a signature file leaving the set
  fs::remove(dir.file("assets.json.sig"));
  fs::create_symlink("/etc/hostname", dir.file("assets.json.sig"));
  expect_refusal(dir.file(""), signer.key(), Refusal::schema, "outside the folder");
}

EK_TEST(signature, a_bundle_folder_is_refused_with_a_key) {
  test::TempDir dir;
  write_file_atomic(dir.file("manifest.json"), "{}");
  const Signer signer;
  expect_refusal(dir.file(""), signer.key(), Refusal::signature, "is a bundle (manifest.json), which carries no signature");
}

EK_TEST(signature, keys_come_as_32_bytes_or_their_pem) {
  const Signer signer;
  const PublicKey key = public_key_from_pem(pem_of(signer.public_key, kEd25519Spki), "key.pub.pem");
  EK_CHECK(key.bytes == signer.key().bytes);
  EK_CHECK_EQ(key.id().size(), std::size_t{16});
  // the key id is what `edgekit package --verify` prints: sha256 of the raw key
  EK_CHECK_EQ(key.id(), sha256_hex(signer.public_key, 32).substr(0, 16));
  EK_CHECK_ERROR(public_key_from_raw(signer.public_key, 31), usage, "32 bytes, not 31");
  EK_CHECK_ERROR(public_key_from_pem("-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n",
                                     "key.pem"),
                 usage, "key.pem is a private key");
  std::vector<unsigned char> x25519 = kEd25519Spki;
  x25519[8] = 0x6e;  // OID 1.3.101.110
  EK_CHECK_ERROR(public_key_from_pem(pem_of(signer.public_key, x25519), "x.pem"), usage, "another algorithm than Ed25519");
  EK_CHECK_ERROR(public_key_from_pem("-----BEGIN PUBLIC KEY-----\nMC*q\n-----END PUBLIC KEY-----\n", "bad.pem"), usage,
                 "damaged PEM");
  EK_CHECK_ERROR(public_key_from_pem(hex(signer.public_key, 32), "hex.txt"), usage, "is not a PEM public key");
}

#else  // a build without libsodium: a key is refused, never ignored

}  // namespace

EK_TEST(signature, without_libsodium_a_key_is_refused) {
  EK_CHECK(!signatures_available());
  test::TempDir dir;
  write_asset_set(dir);
  const std::uint8_t zeros[32] = {};
  expect_refusal(dir.file(""), public_key_from_raw(zeros, 32), Refusal::signature, "cannot check signatures");
  EK_CHECK_EQ(open_assets(dir.file(""), kVersion).files, std::int64_t{5});
  (void)flip_byte;
  (void)read_json_file;
}

#endif
