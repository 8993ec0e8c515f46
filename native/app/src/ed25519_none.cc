// Builds without libsodium (EDGEKIT_WITH_SODIUM=OFF, or not found: the ARM cross builds):
// no signature verifies, so a set opened with a public key is refused, never trusted.
#include "edgekit/signature.h"

namespace edgekit {

bool signatures_available() { return false; }

bool ed25519_verify(const std::uint8_t*, const std::uint8_t*, std::size_t, const PublicKey&) { return false; }

}  // namespace edgekit
