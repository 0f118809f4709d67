#include "shm/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace tether::shm::internal {
namespace {

// One guarded mapping. `size` != 0 marks the entry in use; it is written
// last on register and first on unregister, so the handler sees a
// consistent (base, size) or an unused entry.
struct Guard {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
  std::atomic<bool> damaged{false};
  std::atomic<uint64_t> damage_offset{0};
};

Guard g_guards[kMaxGuardedMappings];
struct sigaction g_previous;
std::atomic<bool> g_installed{false};
std::once_flag g_install_once;

void ForwardToPrevious(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction != nullptr) {
      g_previous.sa_sigaction(sig, info, context);
      return;
    }
  } else if (g_previous.sa_handler != SIG_DFL &&
             g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // Default action: die of SIGBUS as the process would have.
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof(dfl));
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
  ::raise(SIGBUS);
}

void OnSigbus(int sig, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Guard& g : g_guards) {
    const size_t size = g.size.load(std::memory_order_acquire);
    if (size == 0) continue;
    const uintptr_t base = g.base.load(std::memory_order_relaxed);
    if (address < base || address >= base + size) continue;
    const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    const uintptr_t from = address & ~(page - 1);
    // Marked and counted before the repair: from the mmap on, other
    // threads read and write the zero pages without faulting, and a send
    // or read they finish then must already find the channel corrupt
    // (Channel::corrupt() skips the guards while the count is zero).
    bool expected = false;
    if (g.damaged.compare_exchange_strong(expected, true,
                                          std::memory_order_acq_rel)) {
      g.damage_offset.store(from - base, std::memory_order_release);
    }
    CountCorruptionEvent();
    // Zero pages from the fault to the end: the file has shrunk, so every
    // later page of the mapping would fault too.
    void* m = ::mmap(reinterpret_cast<void*>(from), base + size - from,
                     PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    if (m == MAP_FAILED) break;  // cannot repair: die as without us
    return;  // the faulting access now completes on the zero page
  }
  ForwardToPrevious(sig, info, context);
}

void Install() {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_sigaction = OnSigbus;
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (::sigaction(SIGBUS, &sa, &g_previous) == 0) {
    g_installed.store(true, std::memory_order_release);
  }
}

}  // namespace

int RegisterMapping(void* base, size_t size) {
  std::call_once(g_install_once, Install);
  if (!g_installed.load(std::memory_order_acquire) || size == 0) return -1;
  for (int i = 0; i < kMaxGuardedMappings; ++i) {
    Guard& g = g_guards[i];
    uintptr_t expected = 0;
    // Claim the entry through `base` (0 = free), publish with `size`.
    if (!g.base.compare_exchange_strong(expected,
                                        reinterpret_cast<uintptr_t>(base),
                                        std::memory_order_acq_rel)) {
      continue;
    }
    g.damaged.store(false, std::memory_order_relaxed);
    g.damage_offset.store(0, std::memory_order_relaxed);
    g.size.store(size, std::memory_order_release);
    return i;
  }
  return -1;
}

void UnregisterMapping(int index) {
  if (index < 0 || index >= kMaxGuardedMappings) return;
  Guard& g = g_guards[index];
  g.size.store(0, std::memory_order_release);
  g.base.store(0, std::memory_order_release);
}

bool MappingDamaged(int index) {
  if (index < 0 || index >= kMaxGuardedMappings) return false;
  return g_guards[index].damaged.load(std::memory_order_acquire);
}

uint64_t DamageOffset(int index) {
  if (index < 0 || index >= kMaxGuardedMappings) return 0;
  return g_guards[index].damage_offset.load(std::memory_order_acquire);
}

}  // namespace tether::shm::internal
