// A minimal test harness: EK_TEST registers a case named "suite.name"; checks
// throw on failure; run_cases runs the cases whose suite is named on the command
// line (all by default). No third-party framework, so it builds for any target.
#pragma once

#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "edgekit/error.h"

namespace edgekit {
namespace test {

struct Case {
  std::string name;
  void (*fn)();
};

inline std::vector<Case>& registry() {
  static std::vector<Case> cases;
  return cases;
}

struct Register {
  Register(const char* name, void (*fn)()) { registry().push_back({name, fn}); }
};

struct Failure {
  std::string message;
};

[[noreturn]] inline void fail(const char* file, int line, const std::string& message) {
  throw Failure{std::string(file) + ":" + std::to_string(line) + ": " + message};
}

template <typename T, typename = void>
struct streamable : std::false_type {};
template <typename T>
struct streamable<T, std::void_t<decltype(std::declval<std::ostream&>() << std::declval<const T&>())>> : std::true_type {};

template <typename T>
std::string show(const T& value) {
  if constexpr (streamable<T>::value) {
    std::ostringstream out;
    out.precision(17);
    out << value;
    return out.str();
  } else {
    std::string out = "[";
    for (const auto& item : value) out += (out.size() > 1 ? ", " : "") + show(item);
    return out + "]";
  }
}

// Runs `body`, which must throw edgekit::Error with `code` and a message holding `part`.
inline void expect_error(const char* file, int line, const std::function<void()>& body, ExitCode code,
                         const std::string& part) {
  try {
    body();
  } catch (const Error& e) {
    if (e.code() != code) {
      fail(file, line, std::string("expected exit code ") + exit_code_name(code) + ", got " + exit_code_name(e.code()) +
                           ": " + e.line());
    }
    if (e.line().find(part) == std::string::npos) fail(file, line, "message lacks '" + part + "': " + e.line());
    return;
  }
  fail(file, line, std::string("expected an edgekit::Error (") + exit_code_name(code) + ")");
}

// Runs the registered cases whose suite (or full "suite.name") is in `suites` (all when empty), one "ok"/"FAIL" line each; 0 when all
// passed and at least one ran.
inline int run_cases(const std::vector<std::string>& suites) {
  int failed = 0, ran = 0;
  for (const auto& c : registry()) {
    bool wanted = suites.empty();
    for (const auto& s : suites) wanted = wanted || c.name == s || c.name.rfind(s + ".", 0) == 0;
    if (!wanted) continue;
    ++ran;
    try {
      c.fn();
      std::printf("ok   %s\n", c.name.c_str());
      std::fflush(stdout);  // a sanitizer abort in the next case must not swallow this line
    } catch (const Failure& f) {
      ++failed;
      std::printf("FAIL %s\n     %s\n", c.name.c_str(), f.message.c_str());
    } catch (const std::exception& e) {
      ++failed;
      std::printf("FAIL %s\n     unexpected exception: %s\n", c.name.c_str(), e.what());
    }
  }
  std::printf("%d of %d passed\n", ran - failed, ran);
  if (ran == 0) std::printf("no test matched\n");
  return failed == 0 && ran > 0 ? 0 : 1;
}

}  // namespace test
}  // namespace edgekit

#define EK_TEST(suite, name)                                                                   \
  static void ek_test_##suite##_##name();                                                      \
  static const ::edgekit::test::Register ek_register_##suite##_##name(#suite "." #name,        \
                                                                      ek_test_##suite##_##name); \
  static void ek_test_##suite##_##name()

#define EK_CHECK(cond)                                                       \
  do {                                                                       \
    if (!(cond)) ::edgekit::test::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

#define EK_CHECK_EQ(a, b)                                                                                 \
  do {                                                                                                    \
    const auto ek_a = (a);                                                                               \
    const auto ek_b = (b);                                                                               \
    if (!(ek_a == ek_b)) {                                                                                \
      ::edgekit::test::fail(__FILE__, __LINE__,                                                           \
                            "CHECK_EQ(" #a ", " #b "): " + ::edgekit::test::show(ek_a) + " != " +         \
                                ::edgekit::test::show(ek_b));                                             \
    }                                                                                                     \
  } while (0)

#define EK_CHECK_ERROR(expr, code, part) \
  ::edgekit::test::expect_error(__FILE__, __LINE__, [&] { expr; }, ::edgekit::ExitCode::code, part)
