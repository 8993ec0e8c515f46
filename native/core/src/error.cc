#include "edgekit/error.h"

namespace edgekit {

const char* exit_code_name(ExitCode code) {
  switch (code) {
    case ExitCode::ok: return "ok";
    case ExitCode::internal: return "internal";
    case ExitCode::usage: return "usage";
    case ExitCode::model: return "model";
    case ExitCode::version: return "version";
    case ExitCode::input: return "input";
    case ExitCode::run: return "run";
    case ExitCode::output: return "output";
    case ExitCode::signature: return "signature";
  }
  return "unknown";
}

std::string Error::line() const {
  std::string text = what();
  if (!fix_.empty()) text += "; " + fix_;
  return text;
}

}  // namespace edgekit
