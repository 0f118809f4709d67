// Test helpers for the launcher tests: temporary directories and files,
// stack JSON for shell-script nodes, process liveness from /proc, and
// polling with a deadline.
#ifndef TETHER_TESTS_TOOLS_LAUNCH_TEST_UTIL_H_
#define TETHER_TESTS_TOOLS_LAUNCH_TEST_UTIL_H_

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <sstream>
#include <string>
#include <thread>

#include "tests/util/test_dir.h"
#include "util/json_writer.h"

namespace tether::tools::testing {

// A fresh directory under $TEST_TMPDIR (or /tmp). Not removed: Bazel
// cleans TEST_TMPDIR.
inline std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string pattern =
      std::string(base != nullptr ? base : "/tmp") + "/launch-XXXXXX";
  if (::mkdtemp(pattern.data()) == nullptr) return "/tmp";
  return pattern;
}

using ::tether::testing::WriteFile;

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

inline bool FileExists(const std::string& path) {
  return ::access(path.c_str(), F_OK) == 0;
}

// True when `pid` no longer runs: no /proc entry, or a zombie / dead task.
inline bool ProcessGone(pid_t pid) {
  const std::string stat = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (stat.empty()) return true;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos || paren + 2 >= stat.size()) return true;
  const char state = stat[paren + 2];
  return state == 'Z' || state == 'X';
}

// Polls `done` every 10 ms until it is true (returns true) or `timeout`
// passes (returns false).
inline bool WaitUntil(const std::function<bool()>& done,
                      std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

// A stack node running `script` with /bin/sh -c; `extra` is more JSON
// members (starting with a comma), e.g. R"(, "startAfter": ["a"])".
inline std::string ShellNode(const std::string& name, const std::string& script,
                             const std::string& extra = "") {
  return "{\"name\": " + util::JsonQuote(name) +
         ", \"command\": \"/bin/sh\", \"args\": [\"-c\", " +
         util::JsonQuote(script) + "]" + extra + "}";
}

// A stack JSON with `channels` and `nodes` (each a JSON object text).
inline std::string StackJson(std::initializer_list<std::string> channels,
                             std::initializer_list<std::string> nodes) {
  std::string out = "{\n  \"channels\": [";
  bool first = true;
  for (const std::string& c : channels) {
    out += (first ? "\n    " : ",\n    ") + c;
    first = false;
  }
  out += "],\n  \"nodes\": [";
  first = true;
  for (const std::string& n : nodes) {
    out += (first ? "\n    " : ",\n    ") + n;
    first = false;
  }
  return out + "]\n}\n";
}

// `stack_json` (an object) naming the demo's schema file in its "schemas",
// as the tether command needs it for demo-typed channels: the file in the
// runfiles, where tests run -- also the launcher's default working
// directory, the import root that names the types "examples/demo.capnp:...".
// The test needs //examples:demo_capnp_schemas in its data.
inline std::string WithDemoSchema(const std::string& stack_json) {
  char cwd[4096];
  const std::string root = ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : ".";
  const size_t brace = stack_json.find('{');
  return stack_json.substr(0, brace + 1) + "\"schemas\": [" +
         util::JsonQuote(root + "/examples/demo.capnp") + "], " +
         stack_json.substr(brace + 1);
}

// A small demo-typed channel.
inline std::string ImuChannel(const std::string& name) {
  return "{\"name\": " + util::JsonQuote(name) +
         ", \"type\": \"examples/demo.capnp:ImuSample\", \"maxSize\": 256, "
         "\"frequencyHz\": 100, \"queueDepth\": 8}";
}

}  // namespace tether::tools::testing

#endif  // TETHER_TESTS_TOOLS_LAUNCH_TEST_UTIL_H_
