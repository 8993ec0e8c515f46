// One error type for the whole native tree: what failed, how to fix it, and the
// process exit code a command-line front end should use for it.
#pragma once

#include <stdexcept>
#include <string>

namespace edgekit {

// Documented exit codes of edgekit-lite-run (native/README.md); 16 is the loader's. Library code picks
// the code where it knows the cause; front ends only map Error::code() to exit().
enum class ExitCode : int {
  ok = 0,
  internal = 1,  // a bug or an unexpected exception
  usage = 2,     // bad command line
  model = 3,     // unreadable, truncated or foreign .nb, or Lite could not load it
  version = 4,   // .nb opt version differs from the runtime's version
  input = 5,     // input files, count, names, shapes or dtypes do not fit the model
  run = 6,       // Lite failed while running
  output = 7,    // outputs or the record could not be written
  // An asset set opened with a public key is unsigned, signed by another key or changed
  // after signing: edgekit's SignatureError has the same exit code (edgekit/core/errors.py).
  signature = 16,
};

const char* exit_code_name(ExitCode code);

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what, std::string fix = "")
      : std::runtime_error(what), code_(code), fix_(std::move(fix)) {}

  ExitCode code() const { return code_; }
  const std::string& fix() const { return fix_; }
  // "<what>; <fix>" (or just "<what>"): the one line a front end prints.
  std::string line() const;

 private:
  ExitCode code_;
  std::string fix_;
};

}  // namespace edgekit
