// Ed25519 verification by libsodium (Debian: libsodium-dev), a maintained and audited
// implementation; edgekit writes no cryptography of its own.
#include <sodium.h>

#include "edgekit/signature.h"

namespace edgekit {

static_assert(crypto_sign_PUBLICKEYBYTES == 32 && crypto_sign_BYTES == 64, "Ed25519 sizes");

bool signatures_available() { return true; }

bool ed25519_verify(const std::uint8_t* signature, const std::uint8_t* message, std::size_t size, const PublicKey& key) {
  // sodium_init is idempotent and thread-safe; the static makes it once per process.
  static const bool ready = sodium_init() >= 0;
  if (!ready || signature == nullptr || (message == nullptr && size != 0)) return false;
  return crypto_sign_verify_detached(signature, message, size, key.bytes.data()) == 0;
}

}  // namespace edgekit
