// Scratch folders for the fuzz targets: "<base>/tether-fuzz-<pid>-<what>-
// XXXXXX", where <base> is $TETHER_FUZZ_SCRATCH when set, else the base the
// target names (/dev/shm, /tmp). run_fuzz.sh points $TETHER_FUZZ_SCRATCH at
// a folder of its own for each fuzzer run and removes that folder when the
// fuzzer (and the processes of its -merge) have exited, however they
// exited: killed, crashed, or through -runs or -max_total_time, whose exits
// skip atexit handlers. The random part keeps apart two processes that share
// a pid (corpus tests in the pid namespaces of different Bazel sandboxes).
// A target either makes and removes one per input (nothing is left between
// inputs) or keeps one for the process (state carried from input to input)
// and removes it at exit.
//
// Any thread; not for real-time code (file system calls).
#ifndef TETHER_TESTS_FUZZ_FUZZ_SCRATCH_H_
#define TETHER_TESTS_FUZZ_FUZZ_SCRATCH_H_

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace tether::fuzz {

// A new empty folder under $TETHER_FUZZ_SCRATCH or else `base` (e.g.
// "/dev/shm"); aborts if it cannot be made (a fuzzer without its scratch
// space has nothing to test).
inline std::string MakeScratchDir(const std::string& base,
                                  const std::string& what) {
  const char* env = std::getenv("TETHER_FUZZ_SCRATCH");
  const std::string dir = env != nullptr && *env != '\0' ? env : base;
  std::string name = dir + "/tether-fuzz-" + std::to_string(::getpid()) +
                     "-" + what + "-XXXXXX";
  if (::mkdtemp(name.data()) == nullptr) {
    std::perror(("fuzz: cannot make " + name).c_str());
    std::abort();
  }
  return name;
}

// Removes `dir` and everything under it; a missing folder is fine.
inline void RemoveScratchDir(const std::string& dir) {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

}  // namespace tether::fuzz

#endif  // TETHER_TESTS_FUZZ_FUZZ_SCRATCH_H_
