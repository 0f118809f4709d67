// util: TETHER_HOT_PATH, the mark of a function that runs for every message
// on the real-time path (send, receive, wake, the loop's dispatch of one
// message), so that the linker puts these functions side by side.
//
// Why: on one CPU every switch between a publisher and a subscriber process
// can flush the TLB (always on a CPU or guest without PCID), and then each
// distinct 4 KiB page the woken process touches costs a page walk (15-36 ns
// measured under nested paging; see the README's "What the numbers say").
// Spread through the binary by source file, tether's per-message code took
// 16 text pages of the ping-pong benchmark; side by side it takes 5, and
// the one-CPU 64 B round trip got 5% faster (both wake backends).
//
// How: [[gnu::hot]] makes GCC (and clang) emit the function into a
// `.text.hot.*` section (with -ffunction-sections, which Bazel's opt mode
// uses) or the `.text.hot` subsection, and GNU ld, gold and lld's default
// layouts place those before the rest of .text, together. GCC also
// optimises a hot function more eagerly. Mark definitions (in the .cc),
// not only declarations: the attribute must be seen where the code is
// emitted. Depends on nothing; any layer may use it.
//
// Keep the set to what runs per message: error paths, set-up and rarely
// taken branches stay out (a large hot set would spread over pages again).
#ifndef TETHER_UTIL_HOT_PATH_H_
#define TETHER_UTIL_HOT_PATH_H_

#if defined(__GNUC__) || defined(__clang__)
#define TETHER_HOT_PATH [[gnu::hot]]
// For a lambda, after its parameters (and `mutable`): the GNU spelling, which
// applies to the call operator (a [[...]] there would apply to its type).
#define TETHER_HOT_LAMBDA __attribute__((hot))
#else
#define TETHER_HOT_PATH
#define TETHER_HOT_LAMBDA
#endif

#endif  // TETHER_UTIL_HOT_PATH_H_
