// transport: Cap'n Proto messages in shared-memory slots. A slot holds one
// message in standard stream framing (segment table word + one segment),
// built in place without touching the heap and read in place, bounds-checked.
//
// Slot layout (all little-endian, 8-byte aligned):
//   word 0      segment table {segment count - 1 = 0, segment size n in words}
//   words 1..n  the segment (root pointer first)
// so the first 8 + 8n bytes are what capnp::FlatArrayMessageReader,
// `capnp convert binary:...` and MCAP's `capnproto` encoding read.
//
// Zeroing (Cap'n Proto builds into zeroed memory). A slot is reused for every
// message, and zeroing all of it per message would cost a big-slot channel
// (say maxSize 8 MiB, messages of 4 KiB) a full memset per send. So writers
// keep one invariant instead:
//   word 0 of a slot bounds its dirty words: every word after 1 + n (n from
//   word 0) is zero; a word 0 that is not a one-segment table marks the whole
//   slot dirty.
// SlotMessageBuilder zeroes only words 1..n before building, marks the whole
// slot dirty while it builds (so an abandoned build or a writer that dies
// mid-build leaves "all dirty"), and Finish() writes the final n.
// CopyMessageIntoSlot() keeps the invariant for raw (already framed) bytes.
// A fresh shared-memory file is all zero, which satisfies it. Memory that
// does not (a reused buffer of unknown content) is built with
// SlotContents::kUnknown, which zeroes the whole slot once.
#ifndef TETHER_TRANSPORT_FRAMING_H_
#define TETHER_TRANSPORT_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "capnp/any.h"
#include "capnp/common.h"
#include "capnp/message.h"
#include "kj/common.h"
#include "kj/exception.h"

namespace tether::transport {

enum class [[nodiscard]] FramingStatus : uint8_t{
    kOk = 0,
    // Building: the message does not fit in the slot.
    kOverflow,
    // Reading: the bytes do not start on an 8-byte boundary.
    kMisaligned,
    // Reading: fewer than 16 bytes, or not a whole number of words.
    kTruncated,
    // Reading: the segment table does not declare exactly one segment.
    kBadSegmentCount,
    // Reading: the segment size in the table disagrees with the byte count.
    kSizeMismatch,
    // Reading: the message's pointers are out of bounds, of the wrong kind, too
    // deep, or exceed the traversal limit.
    kMalformed,
};

// "ok", "overflow", ... Any thread, RT-safe.
const char* FramingStatusName(FramingStatus status);

// What SlotMessageBuilder::Finish() and CopyMessageIntoSlot() return. Small
// and trivially copyable; making one never allocates.
struct [[nodiscard]] FinishResult {
  FramingStatus status = FramingStatus::kOk;
  // kOk: the framed size in bytes (8 + 8n), what a publisher commits.
  // kOverflow: about how many bytes the message needed (its words if it had
  // been one segment), for the error message.
  uint64_t size = 0;
  // Bytes in the slot (the channel's maxSize rounded up to 8).
  uint64_t capacity = 0;
  // The channel named in errors; points at the string the builder was given.
  std::string_view channel;

  bool ok() const { return status == FramingStatus::kOk; }
  // For logs and Status messages, e.g. "message on channel /robot/camera needs
  // at least 9000 bytes but the channel's slots hold 4096 bytes; raise the
  // channel's maxSize in the stack config". Allocates; not RT-safe.
  std::string ErrorMessage() const;
};

// Builds one message in place in a slot. Construct it over a loaned slot,
// fill it with initRoot<T>() etc., then Finish() and commit the returned
// size. One builder per message; do not touch the message after Finish().
//
// RT-safe while the message fits: no heap allocation, no syscall, no lock;
// the cost is zeroing the previous message's words. On overflow the extra
// space comes from a private anonymous mmap (the slot's bytes are then
// garbage and Finish() reports kOverflow) and Cap'n Proto's arena allocates
// its multi-segment bookkeeping on the heap: the overflow path is an error
// path and not RT-safe. Not thread-safe: one thread builds a message.
class SlotMessageBuilder final : public capnp::MessageBuilder {
 public:
  enum class SlotContents {
    // The slot holds zeros or what a tether writer left (see the invariant
    // above): zero only the words the previous message used.
    kPreviousMessage,
    // Unknown bytes: zero the whole slot.
    kUnknown,
  };

  // `slot` must be 8-byte aligned, a multiple of 8 bytes, at least 16 bytes
  // and at most 4 GiB (Cap'n Proto's segment limit); it aborts otherwise
  // (misuse). `slot` and `channel` (named in errors) must outlive the
  // builder. Does not touch the slot yet.
  SlotMessageBuilder(std::span<std::byte> slot, std::string_view channel,
                     SlotContents contents = SlotContents::kPreviousMessage);
  ~SlotMessageBuilder() noexcept(false) override;

  SlotMessageBuilder(const SlotMessageBuilder&) = delete;
  SlotMessageBuilder& operator=(const SlotMessageBuilder&) = delete;

  // Called by Cap'n Proto. The first call returns the zeroed slot after the
  // segment table; any later call means the message outgrew the slot: it
  // sets the overflow flag and returns zeroed spill space of at least
  // `minimumSize` words (mmap; never fails short of the OS refusing memory,
  // which aborts).
  kj::ArrayPtr<capnp::word> allocateSegment(capnp::uint minimumSize) override;

  // Writes the segment table and returns the framed size, or kOverflow.
  // A builder with no root yet finishes as a message with a null root (16
  // bytes). RT-safe unless the message overflowed.
  FinishResult Finish();

  bool overflowed() const { return spill_count_ > 0; }
  // Slot size in bytes.
  uint64_t capacity() const { return slot_words_ * sizeof(capnp::word); }

 private:
  static constexpr int kMaxSpills = 40;

  capnp::word* slot_;
  size_t slot_words_;
  std::string_view channel_;
  SlotContents contents_;
  bool slot_handed_out_ = false;
  int spill_count_ = 0;
  struct Spill {
    void* address;
    size_t bytes;
  };
  Spill spills_[kMaxSpills] = {};
};

// Copies already framed bytes (e.g. from a log or a bridge, checked like
// ReadSlotMessage() does) into a slot, keeping the zeroing invariant above.
// kOverflow if they do not fit, or the framing error. RT-safe, no
// allocation; O(size of this and the previous message).
FinishResult CopyMessageIntoSlot(std::span<const std::byte> framed,
                                 std::span<std::byte> slot,
                                 std::string_view channel);

struct ReadOptions {
  // Words the caller's own reads may traverse (Cap'n Proto's amplification
  // guard, capnp::ReaderOptions::traversalLimitInWords). CheckedRoot()'s
  // eager walk is budgeted on top, so it does not eat into this.
  uint64_t traversal_limit_words = 8 * 1024 * 1024;
  // Maximum struct/list nesting depth.
  int nesting_limit = 64;
};

// Reads a message in place. The constructor only checks the framing
// (alignment, table, sizes: never reads out of `bytes`); check status()
// before use. Contents are validated lazily by Cap'n Proto, which throws
// kj::Exception on malformed data: read through CheckedRoot() or
// VisitRoot(), not getRoot() directly, when the bytes come from outside
// this process (shared memory, a log, the network).
//
// `bytes` are the framed message (8 + 8n bytes, as committed) and must
// outlive the reader. Construction and reads are RT-safe and allocation-free
// for valid messages (Cap'n Proto's exceptions for malformed ones allocate).
// Not movable; a reader is used by one thread.
class SlotMessageReader final : public capnp::MessageReader {
 public:
  explicit SlotMessageReader(std::span<const std::byte> bytes,
                             const ReadOptions& options = {});
  ~SlotMessageReader() noexcept(false) override;

  FramingStatus status() const { return status_; }
  bool ok() const { return status_ == FramingStatus::kOk; }

  // Called by Cap'n Proto: segment 0, or empty.
  kj::ArrayPtr<const capnp::word> getSegment(capnp::uint id) override;

 private:
  FramingStatus status_;
  kj::ArrayPtr<const capnp::word> segment_;
};

// The same as constructing a SlotMessageReader (returned in place).
inline SlotMessageReader ReadSlotMessage(std::span<const std::byte> bytes,
                                         const ReadOptions& options = {}) {
  return SlotMessageReader(bytes, options);
}

// A typed root that passed the eager check, or why not.
template <typename T>
struct [[nodiscard]] RootResult {
  FramingStatus status = FramingStatus::kMalformed;
  typename T::Reader root;  // default (empty) unless ok()
  bool ok() const { return status == FramingStatus::kOk; }
};

namespace internal {
// Walks the whole message once (every pointer bounds-checked, nesting and
// traversal limits applied) and catches Cap'n Proto's exception. `why`, if
// given, receives its description (allocates only then).
FramingStatus CheckWholeMessage(SlotMessageReader& reader, std::string* why);
void Describe(const kj::Exception& e, std::string* why);
}  // namespace internal

// The root as T after checking the whole message, so that reading its fields
// cannot go out of bounds. One thing the walk cannot see: a pointer of the
// wrong kind (e.g. a struct where T has Text) only fails when that field is
// read; use VisitRoot() to turn such a throw into an error too. RT-safe and
// allocation-free for valid messages; O(message size).
template <typename T>
RootResult<T> CheckedRoot(SlotMessageReader& reader,
                          std::string* why = nullptr) {
  RootResult<T> result;
  result.status = internal::CheckWholeMessage(reader, why);
  if (!result.ok()) return result;
  try {
    result.root = reader.getRoot<T>();
  } catch (const kj::Exception& e) {
    internal::Describe(e, why);
    result.status = FramingStatus::kMalformed;
  }
  return result;
}

// Runs fn(T::Reader) on the checked root; a kj::Exception thrown while fn
// reads the message becomes kMalformed (fn's own side effects up to the
// throw remain). Exceptions of other types propagate. Same cost as
// CheckedRoot() plus fn.
template <typename T, typename Fn>
FramingStatus VisitRoot(SlotMessageReader& reader, Fn&& fn,
                        std::string* why = nullptr) {
  RootResult<T> checked = CheckedRoot<T>(reader, why);
  if (!checked.ok()) return checked.status;
  try {
    fn(checked.root);
  } catch (const kj::Exception& e) {
    internal::Describe(e, why);
    return FramingStatus::kMalformed;
  }
  return FramingStatus::kOk;
}

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_FRAMING_H_
