// The allocation checker (//loop:rt_alloc_check linked in): a heap
// allocation planted inside a RealtimeScope aborts with a message and a
// stack trace naming the culprit; outside a scope, or inside an
// AllowAllocationScope, allocation works. Inside a FailurePathAllocationScope
// the failure path may allocate and the success path may not.
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loop/realtime.h"
#include "util/failure_path.h"

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

// What transport's message checks do: a check that allocates only when it
// fails (Cap'n Proto's exceptions).
[[gnu::noinline]] bool CheckThatAllocatesWhenItFails(bool fail) {
  util::FailurePathAllocationScope scope;
  try {
    if (fail) throw std::runtime_error("a description on the heap");
  } catch (const std::exception&) {
    scope.Failed();
    return false;
  }
  return true;
}

TEST(RtAllocCheck, AFailurePathMayAllocateInARealtimeScope) {
  RealtimeScope scope;
  for (int i = 0; i < 3; ++i) {
    EXPECT_FALSE(CheckThatAllocatesWhenItFails(true));
    EXPECT_TRUE(CheckThatAllocatesWhenItFails(false));
  }
  // What a failed inner scope noted is forgiven: the outer scope's success
  // path did not allocate.
  util::FailurePathAllocationScope outer;
  EXPECT_FALSE(CheckThatAllocatesWhenItFails(true));
}

TEST(RtAllocCheckDeathTest, ASuccessPathThatAllocatesAbortsWithItsStack) {
  EXPECT_DEATH(
      {
        RealtimeScope scope;
        util::FailurePathAllocationScope check;
        (void)PlantedAllocation(25);
      },
      "heap allocation in a real-time scope: operator new \\(100 "
      "bytes\\)(.|\n)*success path of a FailurePathAllocationScope"
      "(.|\n)*PlantedAllocation");
}

TEST(RtAllocCheckDeathTest, AnInnerFailureDoesNotExcuseTheOuterSuccessPath) {
  EXPECT_DEATH(
      {
        RealtimeScope scope;
        util::FailurePathAllocationScope outer;
        (void)PlantedAllocation(25);
        EXPECT_FALSE(CheckThatAllocatesWhenItFails(true));
      },
      "success path of a FailurePathAllocationScope(.|\n)*PlantedAllocation");
}

}  // namespace
}  // namespace tether::loop
