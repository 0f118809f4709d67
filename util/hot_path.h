// util: TETHER_HOT_PATH, the mark of a function that runs for every message
// on the real-time path (send, receive, wake, the loop's dispatch of one
// message), so that the linker puts these functions side by side.
//
// Why: on one CPU every switch between a publisher and a subscriber process
// can flush the TLB (always on a CPU or guest without PCID), and then each
// distinct 4 KiB page the woken process touches costs a page walk (15-32 ns
// measured under nested paging; docs/performance-history.md).
// Spread through the binary by source file, tether's per-message code took
// 16 text pages of the ping-pong benchmark; side by side it takes 6, and
// the one-CPU 64 B round trip got 5% faster (both wake backends).
//
// How: [[gnu::hot]] makes GCC (and clang) emit the function into a
// `.text.hot.*` section (with -ffunction-sections, which Bazel's opt mode
// uses) or the `.text.hot` subsection, at -O2 and above. GNU ld's and
// gold's default layouts place those together, before the rest of .text
// (Bazel's toolchain links with gold here); lld groups them only with
// `-z keep-text-section-prefix`. GCC also optimises a hot function more
// eagerly. Put the mark on the definition, where a reader of the code sees
// it (a declaration's mark also reaches a definition that sees it). A
// lambda cannot carry it portably (clang rejects an attribute after a
// lambda's parameters): give its body to a marked [[gnu::noinline]]
// function, or the body is inlined into the type-erased caller, which is
// not marked (loop::EventLoop::DeliverTyped). For shm, transport and loop.
//
// Keep the set to what runs per message: error paths, set-up and rarely
// taken branches stay out (a large hot set would spread over pages again;
// a function's error tail can go to a [[gnu::cold]] helper).
#ifndef TETHER_UTIL_HOT_PATH_H_
#define TETHER_UTIL_HOT_PATH_H_

#if defined(__GNUC__) || defined(__clang__)
#define TETHER_HOT_PATH [[gnu::hot]]
#else
#define TETHER_HOT_PATH
#endif

#endif  // TETHER_UTIL_HOT_PATH_H_
