// A quick proof that a one-segment Cap'n Proto message is in bounds, for
// the reading hot path (framing.h, CheckWholeMessage).
//
// Every typed read of a message from outside the process first checks the
// whole message (so that a callback never meets Cap'n Proto's exception,
// which allocates). Cap'n Proto's own check (AnyPointer::targetSize) is
// generic: segment look-ups, far pointers, its read limiter, exceptions. A
// message as tether's publishers build it has one segment and no far or
// capability pointers, and for that case this walk decides in a few dozen
// instructions per pointer.
//
// The contract is one-sided: true means Cap'n Proto's checked reader finds
// every pointer reachable from the root in bounds within `nesting_limit`
// and within a traversal limit of the segment's words plus one
// (getRoot().targetSize() does not throw); false means "not shown here", and the caller
// asks Cap'n Proto, which gives the verdict and its reason. So this walk may
// decline anything it does not handle (far and capability pointers, deep
// nesting, pointers shared by several parents) but must never accept what
// Cap'n Proto refuses; tests/fuzz/slot_reader_fuzzer.cc checks exactly that
// against targetSize on every input it makes.
//
// Any thread; RT-safe: no allocation, no exceptions, no locks; recursion
// at most kMaxWireDepth deep (a few KiB of stack); work bounded by the
// segment's size. Reads only inside `segment`.
#ifndef TETHER_TRANSPORT_WIRE_BOUNDS_H_
#define TETHER_TRANSPORT_WIRE_BOUNDS_H_

#include <cstdint>
#include <span>

namespace tether::transport::internal {

// Nesting deeper than this is left to Cap'n Proto (its default limit is 64).
inline constexpr int kMaxWireDepth = 64;

// True when the root pointer (word 0 of `segment`) and every pointer it
// reaches lie in `segment` as Cap'n Proto's checked reader bounds them, at
// most min(nesting_limit, kMaxWireDepth) levels deep; false when not shown
// (see above). `segment` is the message's only segment, 8-byte aligned.
bool OneSegmentInBounds(std::span<const uint64_t> segment, int nesting_limit);

}  // namespace tether::transport::internal

#endif  // TETHER_TRANSPORT_WIRE_BOUNDS_H_
