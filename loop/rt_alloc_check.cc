// loop: the debug allocation checker. Linking //loop:rt_alloc_check into a
// binary replaces the global operator new/delete family with versions that
// abort, printing the size and a symbolized stack trace, when called on a
// thread inside a RealtimeScope (realtime.h). Opt-in per binary: nothing
// else changes for binaries that do not link it. Allocation outside a scope
// goes straight to malloc/free. Inside a util::FailurePathAllocationScope
// (util/failure_path.h) the verdict waits for the scope's outcome: the
// allocation is let through and noted (the first one's size and stack),
// forgiven if the code took its failure path, reported as here and aborted
// on if it did not.
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "absl/debugging/stacktrace.h"
#include "absl/debugging/symbolize.h"
#include "loop/realtime.h"
#include "util/failure_path.h"

namespace tether::loop {
namespace {

void WriteAll(const char* text) {
  size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<size_t>(n);
  }
}

constexpr int kMaxFrames = 48;

void WriteStack(void* const* frames, int depth) {
  char line[256];
  for (int i = 0; i < depth; ++i) {
    char symbol[512];
    if (!absl::Symbolize(frames[i], symbol, sizeof(symbol))) {
      std::strcpy(symbol, "(unknown)");
    }
    std::snprintf(line, sizeof(line), "  #%-2d %p %s\n", i, frames[i], symbol);
    WriteAll(line);
  }
  WriteAll("Move the allocation to setup, or wrap a deliberate one in "
           "tether::loop::AllowAllocationScope.\n");
}

// Async-signal-safe enough: no heap, only write(2) and the symbolizer,
// which is built for signal handlers.
[[noreturn]] void ReportAndAbort(const char* what, size_t bytes) {
  AllowAllocationScope allow;  // whatever happens now, do not recurse
  char line[256];
  std::snprintf(line, sizeof(line),
                "tether: heap allocation in a real-time scope: %s (%zu bytes) "
                "on a thread inside tether::loop::RealtimeScope. Stack:\n",
                what, bytes);
  WriteAll(line);
  void* frames[kMaxFrames];
  const int depth = absl::GetStackTrace(frames, kMaxFrames, /*skip_count=*/1);
  WriteStack(frames, depth);
  std::abort();
}

// The first allocation noted in a FailurePathAllocationScope and not
// forgiven yet: reported if the scope's code succeeds.
thread_local const char* t_noted_what = nullptr;
thread_local size_t t_noted_bytes = 0;
thread_local int t_noted_depth = 0;
thread_local void* t_noted_frames[kMaxFrames];

[[gnu::noinline]] void NoteForLater(const char* what, size_t bytes) {
  if (!util::internal::NoteFailurePathAllocation()) return;
  t_noted_what = what;
  t_noted_bytes = bytes;
  t_noted_depth =
      absl::GetStackTrace(t_noted_frames, kMaxFrames, /*skip_count=*/0);
}

// util::FailurePathAllocationScope's success path allocated.
[[noreturn]] void ReportNotedAndAbort() {
  AllowAllocationScope allow;
  char line[320];
  std::snprintf(line, sizeof(line),
                "tether: heap allocation in a real-time scope: %s (%zu bytes) "
                "on a thread inside tether::loop::RealtimeScope, on the "
                "success path of a FailurePathAllocationScope (only its "
                "failure path may allocate). Stack of the allocation:\n",
                t_noted_what != nullptr ? t_noted_what : "?", t_noted_bytes);
  WriteAll(line);
  WriteStack(t_noted_frames, t_noted_depth);
  std::abort();
}

// Set while Init's probe allocation runs; seen by our operator new only if
// it is the one in effect.
thread_local bool t_probing = false;
bool g_probe_seen = false;
void* volatile g_probe_sink = nullptr;

inline void CheckAllocation(const char* what, size_t bytes) {
  if (t_probing) [[unlikely]] g_probe_seen = true;
  if (AllocationForbidden()) [[unlikely]] {
    if (util::internal::InFailurePathScope()) {
      NoteForLater(what, bytes);
      return;
    }
    ReportAndAbort(what, bytes);
  }
}

void* Allocate(size_t bytes, const char* what) {
  CheckAllocation(what, bytes);
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* AllocateAligned(size_t bytes, std::align_val_t align, const char* what) {
  CheckAllocation(what, bytes);
  const size_t a = static_cast<size_t>(align);
  const size_t rounded = ((bytes == 0 ? 1 : bytes) + a - 1) / a * a;
  void* p = std::aligned_alloc(a, rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void Free(void* p, const char* what) {
  if (p == nullptr) return;
  CheckAllocation(what, 0);
  std::free(p);
}

// Runs at static initialisation: probes that our operator new is the one
// in effect, and loads the unwinder and symbolizer now (their first use may
// allocate).
struct Init {
  Init() {
    t_probing = true;
    g_probe_sink = ::operator new(1);
    t_probing = false;
    ::operator delete(g_probe_sink);
    if (g_probe_seen) internal::MarkAllocationCheckActive();
    util::internal::SetSuccessPathAllocationHandler(&ReportNotedAndAbort);
    void* frames[2];
    (void)absl::GetStackTrace(frames, 2, 0);
    char symbol[64];
    (void)absl::Symbolize(reinterpret_cast<void*>(&WriteAll), symbol,
                          sizeof(symbol));
  }
};
const Init g_init;

}  // namespace
}  // namespace tether::loop

using tether::loop::Allocate;
using tether::loop::AllocateAligned;
using tether::loop::Free;

void* operator new(size_t n) { return Allocate(n, "operator new"); }
void* operator new[](size_t n) { return Allocate(n, "operator new[]"); }
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  try {
    return Allocate(n, "operator new(nothrow)");
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  try {
    return Allocate(n, "operator new[](nothrow)");
  } catch (...) {
    return nullptr;
  }
}
void* operator new(size_t n, std::align_val_t a) {
  return AllocateAligned(n, a, "operator new(aligned)");
}
void* operator new[](size_t n, std::align_val_t a) {
  return AllocateAligned(n, a, "operator new[](aligned)");
}
void* operator new(size_t n, std::align_val_t a,
                   const std::nothrow_t&) noexcept {
  try {
    return AllocateAligned(n, a, "operator new(aligned, nothrow)");
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](size_t n, std::align_val_t a,
                     const std::nothrow_t&) noexcept {
  try {
    return AllocateAligned(n, a, "operator new[](aligned, nothrow)");
  } catch (...) {
    return nullptr;
  }
}

void operator delete(void* p) noexcept { Free(p, "operator delete"); }
void operator delete[](void* p) noexcept { Free(p, "operator delete[]"); }
void operator delete(void* p, size_t) noexcept { Free(p, "operator delete"); }
void operator delete[](void* p, size_t) noexcept {
  Free(p, "operator delete[]");
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  Free(p, "operator delete");
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  Free(p, "operator delete[]");
}
void operator delete(void* p, std::align_val_t) noexcept {
  Free(p, "operator delete(aligned)");
}
void operator delete[](void* p, std::align_val_t) noexcept {
  Free(p, "operator delete[](aligned)");
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  Free(p, "operator delete(aligned)");
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  Free(p, "operator delete[](aligned)");
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  Free(p, "operator delete(aligned)");
}
void operator delete[](void* p, std::align_val_t,
                       const std::nothrow_t&) noexcept {
  Free(p, "operator delete[](aligned)");
}
