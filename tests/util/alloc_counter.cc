// Allocation counting for a whole test binary (link //tests/util:alloc_counter
// into it). Under ASan/TSan the sanitizer's allocator reports every
// malloc/calloc/realloc/new through its hook; otherwise malloc, calloc,
// realloc and operator new are replaced here (forwarding to glibc).
#include "tests/util/alloc_counter.h"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <new>

namespace tether::testing_util {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};
}  // namespace tether::testing_util

namespace {
using tether::testing_util::g_allocations;
using tether::testing_util::g_counting;
void Count() {
  if (g_counting.load(std::memory_order_relaxed)) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
  }
}
}  // namespace

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
// From <sanitizer/allocator_interface.h> (not shipped with Debian's g++).
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t),
    void (*free_hook)(const volatile void*));
namespace {
void MallocHook(const volatile void*, size_t) { Count(); }
void FreeHook(const volatile void*) {}
[[maybe_unused]] const int kHooksInstalled =
    __sanitizer_install_malloc_and_free_hooks(MallocHook, FreeHook);
}  // namespace
#else
// operator delete below frees what operator new got from malloc.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
extern "C" {
void* __libc_malloc(size_t size);
void* __libc_calloc(size_t count, size_t size);
void* __libc_realloc(void* p, size_t size);
void* malloc(size_t size) {
  Count();
  return __libc_malloc(size);
}
void* calloc(size_t count, size_t size) {
  Count();
  return __libc_calloc(count, size);
}
void* realloc(void* p, size_t size) {
  Count();
  return __libc_realloc(p, size);
}
}

void* operator new(size_t size) {
  if (void* p = malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) {
  if (void* p = malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t size, const std::nothrow_t&) noexcept {
  return malloc(size == 0 ? 1 : size);
}
void* operator new[](size_t size, const std::nothrow_t&) noexcept {
  return malloc(size == 0 ? 1 : size);
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
#endif

