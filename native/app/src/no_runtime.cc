// Builds without Paddle-Lite (the host, or an app that only verifies assets): no runtime.
#include "edgekit/engine.h"

namespace edgekit {

std::shared_ptr<const Runtime> lite_runtime() { return nullptr; }

}  // namespace edgekit
