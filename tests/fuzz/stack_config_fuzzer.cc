// Fuzz target: a stack config as JSON text (transport::ParseStackConfig —
// what `tether launch` and every node read first): the JSON parser, the
// decoder into config.capnp structs, validation and its error locator
// (file:line, field path). Includes resolve against an empty folder, so an
// "include" of a relative path fails with an error, as it must. Findings:
// crashes, sanitizer reports, uncaught exceptions, hangs.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_scratch.h"
#include "transport/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tr = tether::transport;
  static const tr::KnownTypes* types = [] {
    auto* t = new tr::KnownTypes();
    t->names.insert("examples/demo.capnp:JointState");
    t->names.insert("fuzz.capnp:Sample");
    t->ids.insert(0x9eb32e19f86ee174ull);
    return t;
  }();
  // An empty folder of its own for each input, removed after it.
  const std::string empty_dir = tether::fuzz::MakeScratchDir("/tmp", "config");
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  std::vector<tr::ConfigProblem> problems;
  try {
    auto config = tr::ParseStackConfig(json, "<fuzz>", *types, empty_dir,
                                       &problems);
    (void)config;
  } catch (...) {
    __builtin_trap();  // errors are statuses, never exceptions
  }
  tether::fuzz::RemoveScratchDir(empty_dir);
  return 0;
}
