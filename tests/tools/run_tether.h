// Test helper: runs the real `tether` binary (a data dependency of the test)
// with arguments, as a user would, and returns its exit code and output.
#ifndef TETHER_TESTS_TOOLS_RUN_TETHER_H_
#define TETHER_TESTS_TOOLS_RUN_TETHER_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace tether::tools::test {

struct Outcome {
  int code = -1;  // exit code, or 128 + signal
  std::string out;
  std::string err;
  // The command was still running at RunOptions::timeout_s and got SIGTERM;
  // killed: it outlived the SIGTERM by 2 s too and got SIGKILL.
  bool timed_out = false;
  bool killed = false;
};

struct RunOptions {
  // Seconds to wait before stopping the command (SIGTERM, then SIGKILL two
  // seconds later), so a command that hangs fails the test instead of
  // hanging it. 0: wait as long as it runs.
  double timeout_s = 0;
  // The command's RLIMIT_FSIZE in bytes, with SIGXFSZ ignored: a write past
  // it fails (EFBIG) after writing what fits, as on a filesystem that
  // fills up. It also bounds the files that capture the command's stdout
  // and stderr. 0: no limit.
  uint64_t file_size_limit = 0;
};

// The binary's path in the test's runfiles.
std::string TetherPath();

// Runs `tether args...`, capturing stdout and stderr through files in
// TEST_TMPDIR. Blocks until it exits; a failure to start is a test failure.
Outcome RunTether(std::vector<std::string> args,
                  const RunOptions& options = {});

// Starts `tether args...` in the background with stdout and stderr going
// to files in TEST_TMPDIR named after `tag`; Wait() collects it like
// RunTether. For tests that signal a running command.
pid_t StartTether(std::vector<std::string> args, const std::string& tag,
                  const RunOptions& options = {});
Outcome WaitTether(pid_t pid, const std::string& tag,
                   const RunOptions& options = {});
// What the command StartTether() started as `tag` has written to stderr so
// far.
std::string StartedStderr(const std::string& tag);

}  // namespace tether::tools::test

#endif  // TETHER_TESTS_TOOLS_RUN_TETHER_H_
