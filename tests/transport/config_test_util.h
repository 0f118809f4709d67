// Test helpers for the stack config tests: the known message types, a
// fresh directory per test, files written into it, and stack JSON made of
// channel and node entries, loaded as LoadStackConfig loads a stack.
#ifndef TETHER_TESTS_TRANSPORT_CONFIG_TEST_UTIL_H_
#define TETHER_TESTS_TRANSPORT_CONFIG_TEST_UTIL_H_

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "tests/util/test_dir.h"
#include "transport/config.h"

namespace tether::transport::testing {

inline KnownTypes TestTypes() {
  KnownTypes types;
  types.names = {"test.capnp:A", "test.capnp:B", "test.capnp:JointState"};
  types.ids = {0x9eb32e19f86ee174ull};
  return types;
}

// A fresh directory under TEST_TMPDIR for the running test.
inline std::filesystem::path TestDir() {
  return tether::testing::FreshTestDir();
}

using tether::testing::WriteFile;

// Writes `files` (name -> JSON) into a fresh directory and loads
// "stack.json" from it.
inline absl::StatusOr<StackConfig> LoadFiles(
    const std::map<std::string, std::string>& files,
    const KnownTypes& types = TestTypes()) {
  const std::filesystem::path dir = TestDir();
  for (const auto& [name, text] : files) WriteFile(dir / name, text);
  return LoadStackConfig(dir / "stack.json", types);
}

// A valid channel; `extra` members replace the default "queueDepth": 4.
inline std::string Channel(const std::string& name,
                           const std::string& extra = "") {
  return R"({"name": ")" + name +
         R"(", "type": "test.capnp:A", "maxSize": 64)" +
         (extra.empty() ? R"(, "queueDepth": 4)" : ", " + extra) + "}";
}

inline std::string Node(const std::string& name,
                        const std::string& extra = "") {
  return R"({"name": ")" + name + R"(", "command": "/bin/true")" +
         (extra.empty() ? "" : ", " + extra) + "}";
}

inline std::string Stack(const std::vector<std::string>& channels,
                         const std::vector<std::string>& nodes = {},
                         const std::string& extra = "") {
  std::string out = R"({"channels": [)";
  for (size_t i = 0; i < channels.size(); ++i) {
    out += (i ? ",\n  " : "\n  ") + channels[i];
  }
  out += "\n],\n\"nodes\": [";
  for (size_t i = 0; i < nodes.size(); ++i) {
    out += (i ? ",\n  " : "\n  ") + nodes[i];
  }
  out += "\n]";
  if (!extra.empty()) out += ",\n" + extra;
  return out + "}\n";
}

}  // namespace tether::transport::testing

#endif  // TETHER_TESTS_TRANSPORT_CONFIG_TEST_UTIL_H_
