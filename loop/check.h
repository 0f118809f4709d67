// loop internal: the abort-on-misuse check the loop libraries use for
// programming errors found at setup (wrong thread, unknown handle, ...).
// Recoverable failures are absl::Status; this is only for bugs.
#ifndef TETHER_LOOP_CHECK_H_
#define TETHER_LOOP_CHECK_H_

#include <cstdio>
#include <cstdlib>

namespace tether::loop::internal {

// Prints "tether::loop: <file>:<line>: <what>" and aborts. Async-signal-safe
// enough for a dying process (fprintf to unbuffered stderr, then abort).
[[noreturn]] inline void CheckFailed(const char* file, int line,
                                     const char* what) {
  std::fprintf(stderr, "tether::loop: %s:%d: %s\n", file, line, what);
  std::abort();
}

}  // namespace tether::loop::internal

// Aborts with `message` (a string literal) unless `condition` holds.
#define TETHER_LOOP_CHECK(condition, message)                              \
  do {                                                                     \
    if (!(condition)) [[unlikely]] {                                       \
      ::tether::loop::internal::CheckFailed(__FILE__, __LINE__,            \
                                            "check failed: " #condition    \
                                            ": " message);                 \
    }                                                                      \
  } while (false)

#endif  // TETHER_LOOP_CHECK_H_
