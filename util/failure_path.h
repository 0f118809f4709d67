// util: FailurePathAllocationScope, the mark of code whose failure path may
// touch the heap although its success path must not, for the allocation
// checker (//loop:rt_alloc_check). The checker lives in loop/; the code that
// needs the mark lives below it: transport's checks of messages that come
// from outside the process (Cap'n Proto reports a bad pointer by throwing a
// kj::Exception, whose description is formatted on the heap). Depends on
// nothing but the standard library, so any layer may use it.
#ifndef TETHER_UTIL_FAILURE_PATH_H_
#define TETHER_UTIL_FAILURE_PATH_H_

#include <cstdint>

namespace tether::util {

// While alive on a thread where the checker forbids allocation (inside a
// loop::RealtimeScope), heap allocations and frees on that thread are let
// through but noted (how many; the first one's size and stack). When the
// scope ends:
//  - Failed() was called (the code took its failure path): what it noted is
//    forgiven. The failure path may allocate and free (an exception, its
//    description), never block on a lock another process holds.
//  - Failed() was not called (the success path ran): if anything was noted,
//    the checker reports it exactly as it reports any allocation in a
//    real-time scope (size and the allocation's stack) and aborts. The
//    success path stays checked; the verdict only waits for the outcome.
// Without the checker linked (or outside a RealtimeScope) nothing is noted
// and the scope costs a thread-local increment and decrement.
// Nestable; an inner scope judges only what was noted while it was alive.
// Thread of construction only; RT-safe.
class FailurePathAllocationScope {
 public:
  FailurePathAllocationScope();
  ~FailurePathAllocationScope();
  FailurePathAllocationScope(const FailurePathAllocationScope&) = delete;
  FailurePathAllocationScope& operator=(const FailurePathAllocationScope&) =
      delete;

  // The code took its failure path: allocations noted in this scope are
  // allowed. Call it before the scope ends (e.g. in the catch block, so
  // that the exception's own free is inside the scope too). RT-safe.
  void Failed() { failed_ = true; }

 private:
  uint64_t noted_at_start_;
  bool failed_ = false;
};

namespace internal {
// For the allocation checker only.

// True on a thread inside a FailurePathAllocationScope. RT-safe.
bool InFailurePathScope();
// Notes one allocation on this thread; true if it is the first one not yet
// forgiven (the checker keeps that one's size and stack for its report).
bool NoteFailurePathAllocation();
// What ~FailurePathAllocationScope calls when the success path allocated:
// reports the first noted allocation and aborts. Set once, by the checker
// at static initialisation (before any thread could note an allocation).
using SuccessPathAllocationHandler = void (*)();
void SetSuccessPathAllocationHandler(SuccessPathAllocationHandler handler);
}  // namespace internal

}  // namespace tether::util

#endif  // TETHER_UTIL_FAILURE_PATH_H_
