// Ed25519 signatures of asset sets, the C++ side of `edgekit package --sign` /
// `--verify --pubkey` (edgekit/consumers/package.py, docs/security.md).
//
// `edgekit package --sign KEY.pem` writes assets.json.sig beside assets.json:
//   {"schema": "edgekit.signature/1", "algorithm": "ed25519", "signed": "assets.json",
//    "public_key": <32 bytes, 64 hex digits>, "signature": <64 bytes, 128 hex digits>}
// The signature covers the exact bytes of assets.json, which lists every file's sha256
// and size, so it covers the whole set. Trust comes from the key the app was built
// with, never from the record's "public_key" (it only selects and reports).
//
// One key format: the 32 raw bytes of an Ed25519 public key (RFC 8032). On disk it is
// the PEM that `openssl pkey -in key.pem -pubout` writes and `edgekit package --verify
// --pubkey` reads ("-----BEGIN PUBLIC KEY-----", a SubjectPublicKeyInfo holding those
// 32 bytes); public_key_from_pem takes it apart.
//
// Verification needs libsodium (crypto_sign_verify_detached); builds without it
// (EDGEKIT_WITH_SODIUM=OFF, or libsodium not found, as in the ARM cross builds)
// refuse every key instead of skipping the check.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace edgekit {

constexpr const char* kSignatureFile = "assets.json.sig";
constexpr const char* kSignatureSchema = "edgekit.signature/1";

struct PublicKey {
  std::array<std::uint8_t, 32> bytes{};
  // The first 16 hex digits of the key's sha256, as `edgekit package --verify` names keys.
  std::string id() const;
};

// Exactly 32 bytes, else Error(usage).
PublicKey public_key_from_raw(const std::uint8_t* bytes, std::size_t size);
// An Ed25519 "PUBLIC KEY" PEM; Error(usage) naming `what` for anything else (a private
// key, another algorithm, damaged base64).
PublicKey public_key_from_pem(const std::string& text, const std::string& what);
PublicKey read_public_key_file(const std::string& path);

// True when this build links libsodium and can verify signatures.
bool signatures_available();

// Whether `signature` (64 bytes) is `key`'s Ed25519 signature of `message`; never throws.
// False in builds without libsodium.
bool ed25519_verify(const std::uint8_t* signature, const std::uint8_t* message, std::size_t size, const PublicKey& key);

// A set signed by `key`: reads `sig_file` (the set's assets.json.sig, already resolved
// inside the set) and checks its signature over `index_bytes`, the bytes of assets.json
// as the loader read them (and will parse: no second read). AssetError(Refusal::signature)
// when the file is absent (an unsigned set), damaged, names another key or does not
// verify, and in builds without libsodium.
void check_index_signature(const std::string& sig_file, const std::string& index_bytes, const PublicKey& key);

}  // namespace edgekit
