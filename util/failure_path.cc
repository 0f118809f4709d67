#include "util/failure_path.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "util/hot_path.h"

namespace tether::util {
namespace {

thread_local int t_depth = 0;
// Allocations noted on this thread and not forgiven by a failed scope.
thread_local uint64_t t_noted = 0;
std::atomic<internal::SuccessPathAllocationHandler> g_handler{nullptr};

}  // namespace

TETHER_HOT_PATH FailurePathAllocationScope::FailurePathAllocationScope()
    : noted_at_start_(t_noted) {
  ++t_depth;
}

TETHER_HOT_PATH FailurePathAllocationScope::~FailurePathAllocationScope() {
  --t_depth;
  if (failed_) {
    t_noted = noted_at_start_;
    return;
  }
  if (t_noted == noted_at_start_) [[likely]] return;
  // The success path allocated. Only the checker notes anything, and it set
  // the handler before it could.
  if (internal::SuccessPathAllocationHandler handler =
          g_handler.load(std::memory_order_relaxed)) {
    handler();
  }
  std::fprintf(stderr,
               "tether: heap allocation on the success path of a "
               "FailurePathAllocationScope\n");
  std::abort();
}

namespace internal {

bool InFailurePathScope() { return t_depth > 0; }

bool NoteFailurePathAllocation() { return t_noted++ == 0; }

void SetSuccessPathAllocationHandler(SuccessPathAllocationHandler handler) {
  g_handler.store(handler, std::memory_order_relaxed);
}

}  // namespace internal
}  // namespace tether::util
