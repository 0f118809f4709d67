// Test helpers: a fresh, empty directory for the running test, under
// $TEST_TMPDIR (Bazel removes it) or /tmp, named after the test; a file
// written into it.
#ifndef TETHER_TESTS_UTIL_TEST_DIR_H_
#define TETHER_TESTS_UTIL_TEST_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace tether::testing {

// <tmp>/<suite>.<test>/, emptied if it was there. Call from a test body.
inline std::filesystem::path FreshTestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = std::string(info->test_suite_name()) + "." + info->name();
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  const std::filesystem::path dir =
      std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// Writes `text` to `path` (bytes as given, replacing the file), making its
// directories first. A write that fails fails the running test.
inline void WriteFile(const std::filesystem::path& path,
                      const std::string& text) {
  if (path.has_parent_path()) {
    std::filesystem::create_directories(path.parent_path());
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_UTIL_TEST_DIR_H_
