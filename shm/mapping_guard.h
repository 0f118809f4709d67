// shm: keeps a channel file that is truncated (or otherwise shrinks) under a
// live process from killing it with SIGBUS. Touching a page of a MAP_SHARED
// file mapping beyond the file's end raises SIGBUS; another process (a
// buggy tool, `truncate -s 0`, a hostile user with write access) can do that
// to every process that has the channel mapped.
//
// How: channel mappings are registered in a fixed table, and a SIGBUS
// handler that finds the faulting address inside a registered mapping maps
// fresh anonymous zero pages (MAP_FIXED, private) over the rest of that
// mapping, marks it damaged and returns, so the faulting load or store
// completes on the zero page. The Channel checks Damaged() on every
// operation and from then on reports the channel corrupt ("the file was
// truncated under this process"). A SIGBUS at any other address goes to the
// handler that was installed before (or the default action: the process
// dies, as it would have without us).
//
// Chosen over the alternatives: file seals work only on memfds (channels are
// named files so that unrelated processes open them), and leases neither
// apply to files open for writing nor prevent the truncation (they delay
// it). The cost is one sigaction per process and nothing on the hot path.
//
// Process-wide by nature (a signal disposition is): one table, installed on
// first use. All functions: any thread. Register/Unregister are setup calls
// (not RT-safe: the first one installs the handler); Damaged() is RT-safe
// (one atomic load); the handler is async-signal-safe (atomics and mmap).
#ifndef TETHER_SHM_MAPPING_GUARD_H_
#define TETHER_SHM_MAPPING_GUARD_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace tether::shm::internal {

// The most mappings guarded at once; more are mapped unguarded (Register
// returns -1, and the channel says so in its corruption text if it ever
// needed the guard).
inline constexpr int kMaxGuardedMappings = 1024;

// Guards [base, base + size) (page aligned, as mmap returns it). Returns
// the guard's index, or -1 when the table is full or the handler could not
// be installed.
int RegisterMapping(void* base, size_t size);
// Stops guarding (before munmap). Index from RegisterMapping (>= 0).
void UnregisterMapping(int index);
// True once a SIGBUS hit the mapping; its offset then says where.
bool MappingDamaged(int index);
// Byte offset in the mapping of the first SIGBUS (valid once damaged).
uint64_t DamageOffset(int index);

// Process-wide count of corruption events: SIGBUS repairs of guarded
// mappings (the handler counts them) and findings that made a channel
// handle corrupt (Channel::ReportCorruption counts them). Code that scans
// channels for corruption looks again only when it moved. RT-safe and
// async-signal-safe (one atomic). Process-wide, against the project's rule
// of no globals, for the reason the guard table is: the SIGBUS handler,
// which has no object to reach, must be able to move it.
// Inline, because Channel::corrupt() reads it on every send and receive: a
// process in which nothing was ever damaged pays one load for the guard.
constinit inline std::atomic<uint64_t> g_corruption_events{0};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
inline uint64_t CorruptionEvents() {
  return g_corruption_events.load(std::memory_order_acquire);
}
// The SIGBUS handler calls this after it marked the mapping damaged, so a
// reader that sees the count still at zero may skip MappingDamaged().
inline void CountCorruptionEvent() {
  g_corruption_events.fetch_add(1, std::memory_order_acq_rel);
}

}  // namespace tether::shm::internal

#endif  // TETHER_SHM_MAPPING_GUARD_H_
