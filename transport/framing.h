// transport: Cap'n Proto messages in shared-memory slots. A slot holds one
// message in standard stream framing (segment table + segments), built by
// the publisher without touching the heap and read in place, bounds-checked.
//
// Building (SlotMessageBuilder). The message's structs, lists and text are
// built in the publisher's own private memory (a BuildArena) and copied into
// the slot by Finish(); large Data fields ("blobs", e.g. an image) can be
// written by the producer directly in the slot, never zeroed or copied.
//  - Why private: a slot is shared memory that another process can write at
//    any time (a bug, a hostile process). Cap'n Proto's builder follows the
//    pointers it wrote earlier; building in place would let garbage written
//    under it send the builder out of bounds. Building privately, the
//    publisher never reads shared memory while it builds: bounds are its
//    own, and the copy (one memcpy of the non-blob part, usually a few
//    hundred bytes) is the price.
//  - Zeroing: Cap'n Proto builds into zeroed memory. The arena keeps a
//    private, trusted bound on its dirty words (the previous message's
//    size; the whole arena after an abandoned build), so a message costs
//    the zeroing of what the previous one used, not of the whole slot.
//  - Blobs (InitBlob): each is placed from the slot's end backwards, padded
//    to a word; Finish() copies the root part right before the lowest one,
//    so the message stays one segment, and points each field at its blob.
//    The producer fills the returned bytes in place; they are not zeroed
//    (BlobFill::kUninitialized: the producer promises to write them all)
//    unless asked (kZeroed). No field the builder did not set can show an
//    earlier message's bytes.
//  - Why one segment: Cap'n Proto's reader keeps every segment but the first
//    in a heap-allocated table, built afresh for each message it reads. A
//    one-segment message is read without touching the heap.
//
// Slot layout. The framed message starts at `offset` bytes into the slot
// (0 without blobs) so that table, root part and blobs are contiguous:
//   [offset]   segment table {0, size of the segment}
//              the root and everything but blobs
//              the blobs (bytes, padded to a word with zeros), the last one
//              made first, up to the slot's end
// The bytes from `offset` for `size` are what capnp::FlatArrayMessageReader,
// `capnp convert binary:...` and MCAP's `capnproto` encoding read. Readers
// accept several segments too (logs and bridges may carry them).
#ifndef TETHER_TRANSPORT_FRAMING_H_
#define TETHER_TRANSPORT_FRAMING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "capnp/any.h"
#include "capnp/schema.h"
#include "capnp/common.h"
#include "capnp/message.h"
#include "kj/common.h"
#include "kj/exception.h"
#include "util/failure_path.h"

namespace tether::transport {

enum class [[nodiscard]] FramingStatus : uint8_t{
    kOk = 0,
    // Building: the message does not fit in the slot.
    kOverflow,
    // Reading: the bytes do not start on an 8-byte boundary.
    kMisaligned,
    // Reading: fewer than 16 bytes, or not a whole number of words.
    kTruncated,
    // Reading: the segment table declares no segment or more than
    // kMaxSegments.
    kBadSegmentCount,
    // Reading: the segment size in the table disagrees with the byte count.
    kSizeMismatch,
    // Reading: the message's pointers are out of bounds, of the wrong kind, too
    // deep, or exceed the traversal limit.
    kMalformed,
    // Building: an InitBlob() call was not valid (not a Data field of a
    // struct of this message, too many blobs).
    kBadBlob,
    // Building: the message refers to bytes outside the slot (external
    // data adopted into it, Orphanage::referenceExternalData).
    kExternalData,
};

// The most segments a slot message may have. SlotMessageBuilder makes one;
// messages from elsewhere (logs, bridges, other writers) may have several,
// and a reader must still be able to reject too many.
inline constexpr uint32_t kMaxSegments = 16;

// "ok", "overflow", ... Any thread, RT-safe.
const char* FramingStatusName(FramingStatus status);

// What SlotMessageBuilder::Finish() and CopyMessageIntoSlot() return. Small
// and trivially copyable; making one never allocates.
struct [[nodiscard]] FinishResult {
  FramingStatus status = FramingStatus::kOk;
  // kOk: the framed size in bytes, what a publisher commits.
  // kOverflow: about how many bytes the message needed, for the error
  // message.
  uint64_t size = 0;
  // kOk: where in the slot the framed message starts (bytes, a multiple of
  // 8; 0 unless the message has blobs).
  uint64_t offset = 0;
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

// A publisher's private memory to build messages in (see the file comment):
// only this process writes it, so what it knows about its dirty words is
// trusted. Sized like the channel's slots; pages are mapped lazily (touched
// as messages use them; mlockall'd processes get them up front). Not
// copyable or movable; one builder at a time.
class BuildArena {
 public:
  // `bytes`: the slot size (rounded up to a word). Setup; maps memory
  // (aborts if the OS refuses an anonymous mapping: out of address space).
  explicit BuildArena(size_t bytes);
  ~BuildArena();
  BuildArena(const BuildArena&) = delete;
  BuildArena& operator=(const BuildArena&) = delete;

  size_t capacity_words() const { return words_; }

 private:
  friend class SlotMessageBuilder;
  capnp::word* base_ = nullptr;
  size_t words_ = 0;
  size_t mapped_bytes_ = 0;
  // Words from the start that may be non-zero.
  size_t dirty_words_ = 0;
};

// How InitBlob() leaves the bytes it returns.
enum class BlobFill {
  // As the slot last held them: the producer writes every byte (the
  // zero-copy path for images, point clouds: nothing is cleared or copied).
  kUninitialized,
  // Zeroed (costs a memset of the blob).
  kZeroed,
};

// Builds one message for a loaned slot. Construct it over the publisher's
// arena and the loaned slot, fill it with initRoot<T>() etc. (and InitBlob()
// for large Data fields), then Finish() and commit the returned offset and
// size. One builder per message; do not touch the message after Finish().
//
// RT-safe while the message fits: no heap allocation, no syscall, no lock;
// the cost is zeroing the previous message's words in the arena and one
// copy of the non-blob part into the slot. On overflow the extra space
// comes from a private anonymous mmap and Cap'n Proto's arena allocates its
// multi-segment bookkeeping on the heap (Finish() reports kOverflow): the
// overflow path is an error path and not RT-safe. Not thread-safe: one
// thread builds a message.
class SlotMessageBuilder final : public capnp::MessageBuilder {
 public:
  // At most this many blobs in one message.
  static constexpr int kMaxBlobs = 6;

  // `slot` must be 8-byte aligned, a multiple of 8 bytes, at least 16 bytes
  // and at most 4 GiB (Cap'n Proto's segment limit), and no larger than the
  // arena; it aborts otherwise (misuse). `arena`, `slot` and `channel`
  // (named in errors) must outlive the builder. Does not touch the slot
  // until InitBlob()/Finish().
  SlotMessageBuilder(BuildArena* arena, std::span<std::byte> slot,
                     std::string_view channel);
  ~SlotMessageBuilder() noexcept(false) override;

  SlotMessageBuilder(const SlotMessageBuilder&) = delete;
  SlotMessageBuilder& operator=(const SlotMessageBuilder&) = delete;

  // Called by Cap'n Proto. The first call returns the zeroed arena; any
  // later call means the message outgrew it: it sets the overflow flag and
  // returns zeroed spill space of at least `minimumSize` words (mmap).
  kj::ArrayPtr<capnp::word> allocateSegment(capnp::uint minimumSize) override;

  // A Data field resolved once for InitBlob(): its pointer's index in its
  // struct, or invalid (not a Data field, or one inside a union). Resolve
  // per field, not per message: the schema look-ups are not free.
  struct BlobField {
    uint32_t pointer_index = 0;
    bool valid = false;
  };
  static BlobField ResolveBlobField(capnp::StructSchema::Field field);

  // Makes Data field `field` of struct `s` (a struct of this message) a
  // blob of `size` bytes in the slot and returns them, writable in place
  // until Finish(). The field reads as null while building (do not get or
  // init it through Cap'n Proto afterwards); Finish() points it at the
  // blob. Empty span (and Finish() reports why: kBadBlob) if `field` is
  // invalid (not a Data field of `s` outside a union), it has a blob in
  // this message already, there are kMaxBlobs already, or (kOverflow) the
  // slot has no room. The caller writes every byte of a kUninitialized
  // blob, and keeps `s` in the message (a struct replaced after InitBlob,
  // e.g. by a second init of it, leaves its blob unreferenced: the bytes
  // are still framed, and what an earlier message left there would reach
  // a log that records framed bytes).
  // RT-safe (with kZeroed: a memset of `size`).
  std::span<std::byte> InitBlob(capnp::AnyStruct::Builder s, BlobField field,
                                size_t size,
                                BlobFill fill = BlobFill::kUninitialized);
  // The same for a generated struct builder (S::Builder), and for a field
  // not resolved yet.
  template <typename StructBuilder>
  std::span<std::byte> InitBlob(StructBuilder s, BlobField field, size_t size,
                                BlobFill fill = BlobFill::kUninitialized) {
    return InitBlob(capnp::AnyStruct::Builder(kj::mv(s)), field, size, fill);
  }
  template <typename StructBuilder>
  std::span<std::byte> InitBlob(StructBuilder s,
                                capnp::StructSchema::Field field, size_t size,
                                BlobFill fill = BlobFill::kUninitialized) {
    return InitBlob(capnp::AnyStruct::Builder(kj::mv(s)),
                    ResolveBlobField(field), size, fill);
  }

  // Writes the segment table, copies segment 0 into the slot, points blob
  // fields at their blobs and returns where the framed message starts and
  // how big it is; or kOverflow (it did not fit), kBadBlob (an InitBlob()
  // misuse) or kExternalData (bytes outside the slot, which a reader could
  // not reach). A builder with no root yet finishes as a
  // message with a null root (16 bytes). RT-safe unless the message
  // overflowed.
  FinishResult Finish();

  // Makes this builder build the next message, for loaned slot `slot` (the
  // same size as the last one), with the same root: after a Finish() that
  // returned kOk for a message that was its root struct alone in the arena
  // (scalars, blobs; every pointer of the root null, one segment: Cap'n
  // Proto allocated nothing else), it zeroes the root struct's words and
  // forgets the blobs, so the next message starts as a new builder's would
  // (every field its default) without the builder's set-up. Go on through
  // the root builder initRoot() returned (it stays valid); do not call
  // initRoot() again (that allocates a second root). False (nothing
  // changed: make a new builder) after any other message, a failed or
  // missing Finish(), or a slot of another size. One thing it cannot see:
  // a capability set and cleared again stays in Cap'n Proto's capability
  // table, so a later one would get the next index (capabilities mean
  // nothing in shared memory; no tether reader resolves them).
  // RT-safe: O(the root struct's words), no allocation.
  bool Reuse(std::span<std::byte> slot);

  bool overflowed() const {
    return spill_count_ > 0 || message_.blob_overflow;
  }
  // Slot size in bytes.
  uint64_t capacity() const { return slot_words_ * sizeof(capnp::word); }

 private:
  static constexpr int kMaxSpills = 40;

  BuildArena* const arena_;
  capnp::word* slot_;
  size_t slot_words_;
  std::string_view channel_;
  bool arena_handed_out_ = false;
  int spill_count_ = 0;
  struct Spill {
    void* address;
    size_t bytes;
  };
  // spills_[0, spill_count_) and blobs_[0, message_.blob_count) are set; the
  // rest is left unset (a builder is made per message: no zeroing of them).
  Spill spills_[kMaxSpills];
  struct Blob {
    size_t pointer_word;  // the field's pointer: word index in the arena
    size_t first_word;    // its first byte: word index in the slot
    size_t words;         // bytes, padded to a word
    uint64_t bytes;
  };
  Blob blobs_[kMaxBlobs];
  // What one message's building has used of the slot: a new builder starts
  // from PerMessage{.blob_floor_words = slot words}, and Reuse() starts the
  // next message from the same.
  struct PerMessage {
    int blob_count = 0;
    size_t blob_floor_words = 0;  // blobs occupy [blob_floor, slot end)
    bool blob_overflow = false;
    size_t overflow_blob_words = 0;  // words of blobs refused for want of room
    bool blob_misuse = false;
    // After a kOk Finish() of a message that was its root alone: the words
    // it used (the root pointer and the root struct); 0 otherwise (Reuse()).
    size_t reusable_words = 0;
  };
  PerMessage message_;
};

// Copies already framed bytes (e.g. from a log or a bridge, checked like
// ReadSlotMessage() does) to the start of a slot. kOverflow if they do not
// fit, or the framing error. RT-safe, no allocation; O(size).
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

// Reads a message in place: one segment or several (other writers may
// make several), up to kMaxSegments. The constructor only checks the
// framing (alignment, table, sizes: never reads out of `bytes`); check
// status() before use. Contents are validated lazily by Cap'n Proto, which
// throws kj::Exception on malformed data: read through CheckedRoot() or
// VisitRoot(), not getRoot() directly, when the bytes come from outside
// this process (shared memory, a log, the network).
//
// `bytes` are the framed message (as committed) and must outlive the
// reader. Construction and reads are RT-safe and allocation-free for valid
// one-segment messages, which is what SlotMessageBuilder makes (Cap'n
// Proto's exceptions for malformed ones allocate, and so does its table of
// further segments when a message from elsewhere has several). The checks
// below (CheckedRoot, VisitRoot) contain the first: see "Failure path".
// Not movable; a reader is used by one thread.
class SlotMessageReader final : public capnp::MessageReader {
 public:
  explicit SlotMessageReader(std::span<const std::byte> bytes,
                             const ReadOptions& options = {});
  ~SlotMessageReader() noexcept(false) override;

  FramingStatus status() const { return status_; }
  bool ok() const { return status_ == FramingStatus::kOk; }

  // Called by Cap'n Proto: segment `id`, or empty.
  kj::ArrayPtr<const capnp::word> getSegment(capnp::uint id) override;

  // The segments as framed (none unless ok()); segment `id` as words.
  uint32_t segment_count() const { return segment_count_; }
  std::span<const uint64_t> segment_words(uint32_t id) const {
    if (id >= segment_count_) return {};
    return {reinterpret_cast<const uint64_t*>(segments_[id].begin),
            segments_[id].words};
  }

 private:
  FramingStatus status_;
  uint32_t segment_count_ = 0;
  // The first segment_count_ are set; the rest are never read (left
  // uninitialized: a read on the hot path does not pay for 16 entries).
  struct Segment {
    const capnp::word* begin;
    size_t words;
  };
  Segment segments_[kMaxSegments];
};

// Destroys `reader` after a check of it failed, inside the failure path's
// scope: a malformed message of several segments leaves Cap'n Proto's table
// of extra segments on the heap, and this frees it. RT-safe callers hold
// their reader in an optional for this. Failure path only.
inline void DiscardAfterFailure(std::optional<SlotMessageReader>& reader) {
  util::FailurePathAllocationScope failure_path;
  failure_path.Failed();
  reader.reset();
}

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

// Failure path. Cap'n Proto reports a bad pointer by throwing a
// kj::Exception, and building one allocates (its description). The checks
// below run where outside bytes enter, also in real-time callbacks (typed
// watchers and fetchers) under the allocation checker, so each runs inside
// a util::FailurePathAllocationScope: when the check fails it may allocate
// and free on the heap (the exception, `why`) and nothing else (no lock, no
// syscall, no I/O), and the checker lets that through; when it passes it
// must not allocate, and the checker still aborts if it does (a valid
// message of several segments does: Cap'n Proto's table of extra segments).
// So a malformed message costs a few mallocs and frees, never a crash. A
// caller in a real-time scope passes no `why` (its string would be freed
// outside the scope) or keeps it alive there, as the typed endpoints do.

namespace internal {
// Walks the whole message once (every pointer bounds-checked, nesting and
// traversal limits applied) and catches Cap'n Proto's exception. A message
// of one segment is walked by wire_bounds.h's quick walk, which charges
// none of the traversal limit; the rest, and what that walk declines, by
// Cap'n Proto (AnyPointer::targetSize). `why`, if
// given, receives its description (allocates only then, on the failure
// path).
// `root`, if given, receives the checked root (valid while `reader` lives),
// so that a caller reads it without a second root look-up.
FramingStatus CheckWholeMessage(SlotMessageReader& reader, std::string* why,
                                capnp::AnyPointer::Reader* root = nullptr);
void Describe(const kj::Exception& e, std::string* why);
}  // namespace internal

// The root as T after checking the whole message, so that reading its fields
// cannot go out of bounds. One thing the walk cannot see: a pointer of the
// wrong kind (e.g. a struct where T has Text) only fails when that field is
// read; use VisitRoot() to turn such a throw into an error too. RT-safe and
// allocation-free for valid messages; O(message size).
// The failure path may allocate ("Failure path" above).
template <typename T>
RootResult<T> CheckedRoot(SlotMessageReader& reader,
                          std::string* why = nullptr) {
  RootResult<T> result;
  capnp::AnyPointer::Reader root;
  result.status = internal::CheckWholeMessage(reader, why, &root);
  if (!result.ok()) return result;
  util::FailurePathAllocationScope failure_path;
  try {
    result.root = root.getAs<T>();
  } catch (const kj::Exception& e) {
    failure_path.Failed();
    internal::Describe(e, why);
    result.status = FramingStatus::kMalformed;
  }
  return result;
}

// Runs fn(root) on a root that passed CheckedRoot(); a kj::Exception thrown
// while fn reads the message (a pointer of the wrong kind for the field
// read) becomes kMalformed, its description in `why` (fn's own side
// effects up to the throw remain). Exceptions of other types propagate.
// fn runs in a failure-path scope: in a real-time scope an allocation of
// fn is let through until fn returns, forgiven if fn threw a
// kj::Exception, aborted on if it returned. `on_failure` runs inside that
// failed scope (to free what the failure made, such as the reader).
template <typename Reader, typename Fn, typename OnFailure>
FramingStatus ReadChecked(Reader root, Fn&& fn, std::string* why,
                          OnFailure&& on_failure) {
  util::FailurePathAllocationScope failure_path;
  try {
    fn(root);
  } catch (const kj::Exception& e) {
    failure_path.Failed();
    internal::Describe(e, why);
    on_failure();
    return FramingStatus::kMalformed;
  }
  return FramingStatus::kOk;
}

// CheckedRoot() and then ReadChecked(): fn(T::Reader) on the checked root,
// any failure as kMalformed. Same cost as CheckedRoot() plus fn.
template <typename T, typename Fn>
FramingStatus VisitRoot(SlotMessageReader& reader, Fn&& fn,
                        std::string* why = nullptr) {
  RootResult<T> checked = CheckedRoot<T>(reader, why);
  if (!checked.ok()) return checked.status;
  return ReadChecked(checked.root, std::forward<Fn>(fn), why, [] {});
}

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_FRAMING_H_
