// Public keys and assets.json.sig records (signature.h); the Ed25519 arithmetic itself
// is libsodium's (ed25519_sodium.cc) or absent (ed25519_none.cc).
#include "edgekit/signature.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "edgekit/assets.h"
#include "edgekit/error.h"
#include "edgekit/file_io.h"
#include "edgekit/json.h"
#include "edgekit/limits.h"
#include "edgekit/sha256.h"

namespace edgekit {
namespace {

namespace fs = std::filesystem;

// DER of an Ed25519 SubjectPublicKeyInfo up to its key (RFC 8410): SEQUENCE(42) {
// SEQUENCE(5) { OID 1.3.101.112 }, BIT STRING(33) { 0 unused bits, <32 bytes> } }.
constexpr std::uint8_t kSpkiPrefix[] = {0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00};
constexpr const char* kPemBegin = "-----BEGIN PUBLIC KEY-----";
constexpr const char* kPemEnd = "-----END PUBLIC KEY-----";
constexpr const char* kKeyHint =
    "pass the public half of the signing key: `openssl pkey -in key.pem -pubout -out key.pub.pem`";

int base64_value(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

// Standard base64 with '=' padding only at the end; whitespace (PEM's line breaks) skipped.
bool base64_decode(const std::string& text, std::vector<std::uint8_t>* out) {
  std::uint32_t bits = 0;
  int count = 0, padding = 0;
  for (char c : text) {
    if (c == ' ' || c == '\t' || c == '\r' || c == '\n') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int value = base64_value(c);
    if (value < 0 || padding > 0) return false;
    bits = (bits << 6) | static_cast<std::uint32_t>(value);
    if (++count == 4) {
      out->push_back(static_cast<std::uint8_t>(bits >> 16));
      out->push_back(static_cast<std::uint8_t>(bits >> 8));
      out->push_back(static_cast<std::uint8_t>(bits));
      bits = 0;
      count = 0;
    }
  }
  if (count == 2 && padding == 2) {
    out->push_back(static_cast<std::uint8_t>(bits >> 4));
  } else if (count == 3 && padding == 1) {
    out->push_back(static_cast<std::uint8_t>(bits >> 10));
    out->push_back(static_cast<std::uint8_t>(bits >> 2));
  } else if (count != 0 || padding != 0) {
    return false;
  }
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// Exactly `size` bytes as 2 x size lowercase hex digits, nothing else (no spaces, no upper case): the one spelling
// Python's --verify accepts too (docs/security.md).
bool hex_decode(const std::string& text, std::size_t size, std::vector<std::uint8_t>* out) {
  if (text.size() != 2 * size) return false;
  for (std::size_t i = 0; i < text.size(); i += 2) {
    const int high = hex_value(text[i]), low = hex_value(text[i + 1]);
    if (high < 0 || low < 0) return false;
    out->push_back(static_cast<std::uint8_t>(high * 16 + low));
  }
  return true;
}

[[noreturn]] void refuse(const std::string& what, const std::string& fix) {
  throw AssetError(Refusal::signature, what, fix);
}

const char* const kSignFix = "sign the set with `edgekit package ... --sign KEY` using the key whose public half the app has";

}  // namespace

std::string PublicKey::id() const { return sha256_hex(bytes.data(), bytes.size()).substr(0, 16); }

PublicKey public_key_from_raw(const std::uint8_t* bytes, std::size_t size) {
  if (bytes == nullptr || size != 32) {
    throw Error(ExitCode::usage, "an Ed25519 public key has 32 bytes, not " + std::to_string(bytes ? size : 0),
                "pass the key's 32 raw bytes (what `public_key` in assets.json.sig holds as hex)");
  }
  PublicKey key;
  std::copy(bytes, bytes + size, key.bytes.begin());
  return key;
}

PublicKey public_key_from_pem(const std::string& text, const std::string& what) {
  if (text.find("PRIVATE KEY-----") != std::string::npos) {
    throw Error(ExitCode::usage, what + " is a private key; an app needs only the public one", kKeyHint);
  }
  const std::size_t begin = text.find(kPemBegin);
  const std::size_t end = begin == std::string::npos ? begin : text.find(kPemEnd, begin);
  if (end == std::string::npos) {
    throw Error(ExitCode::usage, what + " is not a PEM public key (no \"" + kPemBegin + "\" ... \"" + kPemEnd + "\")",
                kKeyHint);
  }
  const std::size_t body = begin + std::string(kPemBegin).size();
  std::vector<std::uint8_t> der;
  if (!base64_decode(text.substr(body, end - body), &der)) {
    throw Error(ExitCode::usage, what + " is a damaged PEM file (its base64 does not decode)", kKeyHint);
  }
  const std::size_t prefix = sizeof(kSpkiPrefix);
  if (der.size() != prefix + 32 || !std::equal(kSpkiPrefix, kSpkiPrefix + prefix, der.begin())) {
    throw Error(ExitCode::usage, what + " holds a public key of another algorithm than Ed25519",
                "make the signing key with `openssl genpkey -algorithm ed25519 -out key.pem`; " + std::string(kKeyHint));
  }
  return public_key_from_raw(der.data() + prefix, 32);
}

PublicKey read_public_key_file(const std::string& path) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > 64 * 1024) {
    throw Error(ExitCode::usage, path + " has " + std::to_string(size) + " bytes, too many for a PEM public key",
                kKeyHint);
  }
  return public_key_from_pem(read_file_text(path, ExitCode::usage), path);
}

void check_index_signature(const std::string& sig_file, const std::string& index_bytes, const PublicKey& key) {
  if (!signatures_available()) {
    refuse("this build cannot check signatures (native/ was built without libsodium), so it cannot open a set "
           "with a public key",
           "rebuild native/ with libsodium (Debian: libsodium-dev; CMake option EDGEKIT_WITH_SODIUM=ON)");
  }
  std::error_code ec;
  if (!fs::is_regular_file(sig_file, ec)) {
    refuse(std::string("the set is not signed (no ") + kSignatureFile + ") but the app requires a signature by key " +
               key.id(),
           kSignFix);
  }
  const std::uintmax_t size = fs::file_size(sig_file, ec);
  if (ec || size > limits::kMaxJsonBytes) {
    refuse(std::string(kSignatureFile) + " has " + (ec ? "no readable size" : std::to_string(size) + " bytes") +
               ", beyond the limit MAX_JSON_BYTES = " + std::to_string(limits::kMaxJsonBytes),
           kSignFix);
  }
  Json record;
  try {
    record = Json::parse(read_file_text(sig_file, ExitCode::model));
  } catch (const Error& e) {
    refuse(std::string(kSignatureFile) + " is not readable JSON (" + e.what() + ")", kSignFix);
  }
  const auto text = [&](const char* name) -> std::string {
    const Json* value = record.is_object() ? record.find(name) : nullptr;
    return value && value->is_string() ? value->as_string() : std::string();
  };
  std::vector<std::uint8_t> signer, signature;
  // "signed" must name what is checked, so no byte of the record goes unchecked.
  if (text("schema") != kSignatureSchema || text("algorithm") != "ed25519" || text("signed") != "assets.json" ||
      !hex_decode(text("public_key"), 32, &signer) || !hex_decode(text("signature"), 64, &signature)) {
    refuse(std::string(kSignatureFile) + " is not an " + kSignatureSchema + " record (schema, algorithm \"ed25519\", " +
               "signed \"assets.json\", public_key of 64 and signature of 128 hex digits)",
           kSignFix);
  }
  // The record's key only selects: a set signed by someone else is refused by name.
  const PublicKey named = public_key_from_raw(signer.data(), signer.size());
  if (named.bytes != key.bytes) {
    refuse("the set is signed by key " + named.id() + ", not by the app's key " + key.id(), kSignFix);
  }
  const auto* message = reinterpret_cast<const std::uint8_t*>(index_bytes.data());
  if (!ed25519_verify(signature.data(), message, index_bytes.size(), key)) {
    refuse(std::string("the signature in ") + kSignatureFile +
               " does not match assets.json: the set was changed after signing",
           "package it again from verified bundles, and sign it");
  }
}

}  // namespace edgekit
