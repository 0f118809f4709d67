// The allocation checker (//loop:rt_alloc_check linked in): a heap
// allocation planted inside a RealtimeScope aborts with a message and a
// stack trace naming the culprit; outside a scope, or inside an
// AllowAllocationScope, allocation works.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loop/realtime.h"

namespace tether::loop {
namespace {

void* volatile g_sink = nullptr;

// The planted allocation; noinline so the trace shows its name, and the
// buffer escapes so the compiler cannot elide it.
[[gnu::noinline]] size_t PlantedAllocation(size_t n) {
  std::vector<int> v(n, 1);
  g_sink = v.data();
  return v.size();
}

[[gnu::noinline]] void PlantedFree(int* p) { delete p; }

TEST(RtAllocCheck, IsActiveInThisBinary) {
  EXPECT_TRUE(AllocationCheckActive());
}

TEST(RtAllocCheckDeathTest, AllocationInARealtimeScopeAbortsWithAStackTrace) {
  EXPECT_DEATH(
      {
        RealtimeScope scope;
        (void)PlantedAllocation(100);
      },
      "heap allocation in a real-time scope: operator new \\(400 "
      "bytes\\)(.|\n)*PlantedAllocation");
}

TEST(RtAllocCheckDeathTest, FreeInARealtimeScopeAborts) {
  int* p = new int(3);
  EXPECT_DEATH(
      {
        RealtimeScope scope;
        PlantedFree(p);
      },
      "heap allocation in a real-time scope: operator delete");
  delete p;
}

TEST(RtAllocCheck, AllocationOutsideAScopeOrWhenAllowedWorks) {
  EXPECT_EQ(PlantedAllocation(10), 10u);
  RealtimeScope scope;
  {
    AllowAllocationScope allow;
    EXPECT_EQ(PlantedAllocation(10), 10u);
  }
  // Another thread is not in this thread's scope.
  size_t other = 0;
  {
    AllowAllocationScope allow;  // std::thread itself allocates
    std::thread t([&] { other = PlantedAllocation(5); });
    t.join();
  }
  EXPECT_EQ(other, 5u);
}

}  // namespace
}  // namespace tether::loop
