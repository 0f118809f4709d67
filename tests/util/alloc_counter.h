// Test helper: counts heap allocations (malloc, calloc, realloc, operator
// new) made anywhere in the process while an AllocationCounter is alive.
// Linking //tests/util:alloc_counter replaces the allocator entry points of
// the test binary (or installs sanitizer hooks under ASan/TSan).
#ifndef TETHER_TESTS_UTIL_ALLOC_COUNTER_H_
#define TETHER_TESTS_UTIL_ALLOC_COUNTER_H_

#include <atomic>
#include <cstdint>

namespace tether::testing_util {

extern std::atomic<bool> g_counting;
extern std::atomic<int64_t> g_allocations;

// Counts allocations while alive. Not nestable.
class AllocationCounter {
 public:
  AllocationCounter() {
    g_allocations.store(0);
    g_counting.store(true);
  }
  ~AllocationCounter() { g_counting.store(false); }
  int64_t count() const { return g_allocations.load(); }
};

}  // namespace tether::testing_util

#endif  // TETHER_TESTS_UTIL_ALLOC_COUNTER_H_
