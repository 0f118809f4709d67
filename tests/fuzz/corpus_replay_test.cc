// Runs every input kept for a fuzz target (its corpus and every crash
// reproducer, tests/fuzz/corpus/<target>/) through the target once, built
// with the project's ordinary compiler: the default test suite keeps every
// finding fixed without needing clang. The fuzz target is linked in
// (LLVMFuzzerTestOneInput); the corpus folder is the test's data, named by
// the TETHER_FUZZ_CORPUS environment variable (runfiles-relative).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

namespace fs = std::filesystem;

TEST(FuzzCorpus, EveryKeptInputRunsCleanly) {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* corpus = std::getenv("TETHER_FUZZ_CORPUS");
  ASSERT_NE(corpus, nullptr) << "the BUILD rule sets TETHER_FUZZ_CORPUS";
  const fs::path dir =
      srcdir != nullptr ? fs::path(srcdir) / "tether" / corpus : fs::path(corpus);
  ASSERT_TRUE(fs::is_directory(dir)) << dir;
  std::vector<fs::path> inputs;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) inputs.push_back(e.path());
  }
  // A corpus that lost its files would make this test pass vacuously.
  ASSERT_GE(inputs.size(), 3u) << "corpus " << dir << " is (nearly) empty";
  for (const fs::path& p : inputs) {
    std::ifstream in(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    SCOPED_TRACE(p.filename().string());
    EXPECT_EQ(LLVMFuzzerTestOneInput(
                  reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()),
              0);
  }
}

}  // namespace
