#include "transport/framing.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "transport/wire_bounds.h"
#include "util/failure_path.h"
#include "util/hot_path.h"

namespace tether::transport {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the segment table is written with native stores");
static_assert(sizeof(capnp::word) == 8);

// Cap'n Proto's segment size limit (SegmentWordCount is 29 bits).
constexpr size_t kMaxSegmentWords = (size_t{1} << 29) - 1;
// First spill mapping; later ones double.
constexpr size_t kMinSpillWords = 8192;

uint32_t LoadU32(const void* p, size_t index) {
  uint32_t v;
  std::memcpy(&v, static_cast<const char*>(p) + 4 * index, sizeof(v));
  return v;
}

void StoreU32(void* p, size_t index, uint32_t v) {
  std::memcpy(static_cast<char*>(p) + 4 * index, &v, sizeof(v));
}

[[noreturn]] void Die(const char* what, size_t value) {
  std::fprintf(stderr, "tether::transport framing: %s (%zu)\n", what, value);
  std::abort();
}

// Aborts unless `slot` can hold framed messages (misuse).
TETHER_HOT_PATH size_t CheckSlot(std::span<const std::byte> slot) {
  const auto address = reinterpret_cast<uintptr_t>(slot.data());
  if (address % 8 != 0) Die("slot is not 8-byte aligned; address", address);
  if (slot.size() % 8 != 0)
    Die("slot size is not a multiple of 8", slot.size());
  if (slot.size() < 16) Die("slot is smaller than 16 bytes", slot.size());
  if (slot.size() / 8 - 1 > kMaxSegmentWords) {
    Die("slot is larger than a Cap'n Proto segment (4 GiB)", slot.size());
  }
  return slot.size() / 8;
}

// Words of a segment table for `count` segments.
size_t TableWords(uint32_t count) { return (1 + count + 1) / 2; }

struct Framing {
  FramingStatus status = FramingStatus::kOk;
  uint32_t count = 0;
  // Offset (words from the start) and size of each segment: the first
  // `count` are set, the rest never read (not zeroed: a hot-path read pays
  // for the segments it has, not for kMaxSegments).
  size_t start[kMaxSegments];
  size_t words[kMaxSegments];
};

// Parses the segment table. Never reads outside `bytes`.
TETHER_HOT_PATH Framing CheckFraming(std::span<const std::byte> bytes,
                                     bool need_alignment) {
  Framing f;
  if (need_alignment && reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    f.status = FramingStatus::kMisaligned;
    return f;
  }
  if (bytes.size() < 16 || bytes.size() % 8 != 0) {
    f.status = FramingStatus::kTruncated;
    return f;
  }
  const uint32_t count_minus_one = LoadU32(bytes.data(), 0);
  if (count_minus_one >= kMaxSegments) {
    f.status = FramingStatus::kBadSegmentCount;
    return f;
  }
  f.count = count_minus_one + 1;
  const size_t table = TableWords(f.count);
  const size_t total = bytes.size() / 8;
  if (table >= total) {
    f.status = FramingStatus::kTruncated;
    return f;
  }
  size_t at = table;
  for (uint32_t i = 0; i < f.count; ++i) {
    const uint32_t w = LoadU32(bytes.data(), 1 + i);
    if ((i == 0 && w == 0) || w > total - at) {
      f.status = FramingStatus::kSizeMismatch;
      return f;
    }
    f.start[i] = at;
    f.words[i] = w;
    at += w;
  }
  if (at != total) f.status = FramingStatus::kSizeMismatch;
  return f;
}

// True when the `words` words of a built segment are its root pointer and
// the root struct right after it, nothing else, and every pointer of that
// struct is null: a struct pointer (kind 0) with offset 0, whose data and
// pointer sections fill the rest (a null root is one word). Null pointers
// only, because a pointer that owns no words here still carries state a
// zeroed struct would not undo: a capability (an index into Cap'n Proto's
// capability table, which lives in the builder) or a far pointer to
// another segment. Reads only the arena (private memory).
bool RootAlone(const capnp::word* segment, size_t words) {
  uint64_t root;
  std::memcpy(&root, segment, sizeof(root));
  const uint64_t data = (root >> 32) & 0xffff;
  const uint64_t pointers = root >> 48;
  if ((root & 0xffffffff) != 0 || 1 + data + pointers != words) return false;
  for (uint64_t i = 0; i < pointers; ++i) {
    uint64_t p;
    std::memcpy(&p, segment + 1 + data + i, sizeof(p));
    if (p != 0) return false;
  }
  return true;
}

// Cap'n Proto wire pointers (encoding spec: kind in bits 0-1).
uint64_t ListPointerToBytes(int64_t offset_words, uint64_t count) {
  constexpr uint64_t kList = 1, kByte = 2;
  return kList | (static_cast<uint64_t>(offset_words & 0x3fffffff) << 2) |
         (kByte << 32) | (count << 35);
}

capnp::ReaderOptions MakeReaderOptions(std::span<const std::byte> bytes,
                                       const ReadOptions& options) {
  // Budget the eager walk (about one pass over the message) on top of the
  // caller's limit.
  const uint64_t words = bytes.size() / 8;
  capnp::ReaderOptions result;
  const uint64_t limit = options.traversal_limit_words;
  result.traversalLimitInWords =
      limit > std::numeric_limits<uint64_t>::max() - words
          ? std::numeric_limits<uint64_t>::max()
          : limit + words;
  result.nestingLimit = options.nesting_limit;
  return result;
}

}  // namespace

const char* FramingStatusName(FramingStatus status) {
  switch (status) {
    case FramingStatus::kOk:
      return "ok";
    case FramingStatus::kOverflow:
      return "overflow";
    case FramingStatus::kMisaligned:
      return "misaligned";
    case FramingStatus::kTruncated:
      return "truncated";
    case FramingStatus::kBadSegmentCount:
      return "bad segment count";
    case FramingStatus::kSizeMismatch:
      return "segment size mismatch";
    case FramingStatus::kMalformed:
      return "malformed";
    case FramingStatus::kBadBlob:
      return "bad blob";
    case FramingStatus::kExternalData:
      return "external data";
  }
  return "unknown";
}

std::string FinishResult::ErrorMessage() const {
  const absl::string_view channel(this->channel.data(), this->channel.size());
  switch (status) {
    case FramingStatus::kOk:
      return "ok";
    case FramingStatus::kOverflow:
      return absl::StrCat("message on channel ", channel, " needs at least ",
                          size, " bytes but the channel's slots hold ",
                          capacity,
                          " bytes; raise the channel's maxSize in the stack "
                          "config");
    case FramingStatus::kExternalData:
      return absl::StrCat("message on channel ", channel,
                          " refers to bytes outside its slot (Cap'n Proto "
                          "external data, Orphanage::referenceExternalData): "
                          "copy them in (set the field, or InitBlob() for "
                          "large data)");
    case FramingStatus::kBadBlob:
      return absl::StrCat("message on channel ", channel,
                          ": InitBlob() was given a field that is not a Data "
                          "field of a struct of this message (outside a "
                          "union), a field that has a blob already, or more "
                          "than ",
                          SlotMessageBuilder::kMaxBlobs, " blobs");
    default:
      return absl::StrCat("message for channel ", channel,
                          " is not valid framing: ", FramingStatusName(status));
  }
}

// ---------------------------------------------------------------------------

BuildArena::BuildArena(size_t bytes) {
  words_ = (bytes + 7) / 8;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  mapped_bytes_ = std::max(page, (words_ * 8 + page - 1) / page * page);
  void* m = mmap(nullptr, mapped_bytes_, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) Die("cannot map a build arena; bytes", mapped_bytes_);
  base_ = static_cast<capnp::word*>(m);
  dirty_words_ = 0;  // fresh anonymous memory is zero
}

BuildArena::~BuildArena() {
  if (base_ != nullptr) munmap(base_, mapped_bytes_);
}

TETHER_HOT_PATH SlotMessageBuilder::SlotMessageBuilder(
    BuildArena* arena, std::span<std::byte> slot, std::string_view channel)
    : arena_(arena),
      slot_(reinterpret_cast<capnp::word*>(slot.data())),
      slot_words_(CheckSlot(slot)),
      channel_(channel),
      message_{.blob_floor_words = slot_words_} {
  if (slot_words_ > arena->words_) {
    Die("slot is larger than the publisher's build arena; words", slot_words_);
  }
}

TETHER_HOT_PATH SlotMessageBuilder::~SlotMessageBuilder() noexcept(false) {
  // Cap'n Proto's arena, destroyed after this, does not read its segments.
  for (int i = 0; i < spill_count_; ++i) {
    munmap(spills_[i].address, spills_[i].bytes);
  }
}

TETHER_HOT_PATH kj::ArrayPtr<capnp::word> SlotMessageBuilder::allocateSegment(
    capnp::uint minimum_size) {
  // Segment 0 may use the whole slot but its table word.
  const size_t segment_words = slot_words_ - 1;
  if (!arena_handed_out_) {
    arena_handed_out_ = true;
    // Only what the previous message used can be dirty (trusted: the arena
    // is private). Until Finish() the whole segment counts as dirty: a
    // build that is abandoned or overflows leaves the next one zeroing all.
    const size_t dirty = std::min(arena_->dirty_words_, segment_words);
    std::memset(static_cast<void*>(arena_->base_), 0,
                dirty * sizeof(capnp::word));
    arena_->dirty_words_ = std::max(arena_->dirty_words_, segment_words);
    if (minimum_size <= segment_words) {
      return kj::arrayPtr(arena_->base_, segment_words);
    }
    // Not even the first object fits: spill right away.
  }

  // Overflow. Cap'n Proto requires at least minimum_size zeroed words and
  // gives us no way to refuse, so hand out fresh anonymous memory (zero,
  // committed only as written) and let Finish() report the error.
  if (spill_count_ == kMaxSpills) Die("too many spill segments", spill_count_);
  const size_t words =
      std::min(kMaxSegmentWords,
               std::max<size_t>(minimum_size, kMinSpillWords << spill_count_));
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = (words * sizeof(capnp::word) + page - 1) / page * page;
  void* address = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (address == MAP_FAILED) Die("cannot map spill segment; bytes", bytes);
  spills_[spill_count_++] = {address, bytes};
  return kj::arrayPtr(static_cast<capnp::word*>(address), words);
}

SlotMessageBuilder::BlobField SlotMessageBuilder::ResolveBlobField(
    capnp::StructSchema::Field field) {
  const auto proto = field.getProto();
  // A Data field of a union would need its tag set too: not a blob.
  if (!proto.isSlot() || !field.getType().isData() ||
      proto.getDiscriminantValue() != capnp::schema::Field::NO_DISCRIMINANT) {
    return {};
  }
  return {proto.getSlot().getOffset(), true};
}

TETHER_HOT_PATH std::span<std::byte> SlotMessageBuilder::InitBlob(
    capnp::AnyStruct::Builder s, BlobField field, size_t size, BlobFill fill) {
  if (!field.valid || message_.blob_count == kMaxBlobs ||
      size > (size_t{1} << 29) - 1) {
    message_.blob_misuse = true;
    return {};
  }
  const uint32_t index = field.pointer_index;
  if (index >= s.getPointerSection().size()) {
    message_.blob_misuse = true;
    return {};
  }
  // The pointer section follows the data section (Cap'n Proto's struct
  // layout); the struct must lie in segment 0, i.e. the arena.
  const kj::ArrayPtr<kj::byte> data = s.getDataSection();
  const auto* pointer =
      reinterpret_cast<const capnp::word*>(data.end()) + index;
  if (pointer < arena_->base_ || pointer >= arena_->base_ + slot_words_) {
    message_.blob_misuse = true;
    return {};
  }
  const size_t pointer_word = static_cast<size_t>(pointer - arena_->base_);
  // A second blob for one field would leave the first one's bytes in the
  // message with nothing pointing at them: whatever an earlier message
  // left there would reach a log that records the framed bytes.
  for (int k = 0; k < message_.blob_count; ++k) {
    if (blobs_[k].pointer_word == pointer_word) {
      message_.blob_misuse = true;
      return {};
    }
  }
  const size_t words = (size + 7) / 8;
  // Blobs go from the slot's end backwards; the table and the root need at
  // least two words before them.
  if (words + 2 > message_.blob_floor_words) {
    message_.blob_overflow = true;
    message_.overflow_blob_words += words;  // for the size Finish() reports
    return {};
  }
  message_.blob_floor_words -= words;
  Blob& b = blobs_[message_.blob_count++];
  b.pointer_word = pointer_word;
  b.first_word = message_.blob_floor_words;
  b.words = words;
  b.bytes = size;
  std::byte* bytes = reinterpret_cast<std::byte*>(slot_ + b.first_word);
  // The padding of the last word must not show an earlier message's bytes.
  // (memset: capnp::word is not assignable; g++ 12 accepts the assignment,
  // clang 14 rightly refuses it.)
  if (size % 8 != 0) {
    std::memset(&slot_[b.first_word + words - 1], 0, sizeof(capnp::word));
  }
  if (fill == BlobFill::kZeroed) std::memset(bytes, 0, size);
  return {bytes, size};
}

TETHER_HOT_PATH FinishResult SlotMessageBuilder::Finish() {
  message_.reusable_words = 0;
  if (!arena_handed_out_) {
    // No root yet: allocate the (null) root pointer.
    (void)getRoot<capnp::AnyPointer>();
  }
  const auto segments = getSegmentsForOutput();
  // The blobs that did not fit count too.
  uint64_t blob_words = message_.overflow_blob_words;
  for (int i = 0; i < message_.blob_count; ++i) blob_words += blobs_[i].words;
  if (message_.blob_misuse) {
    return {FramingStatus::kBadBlob, 0, 0, capacity(), channel_};
  }
  if (overflowed()) {
    uint64_t words = 0;
    for (const auto& segment : segments) words += segment.size();
    return {FramingStatus::kOverflow,
            (TableWords(1) + words + blob_words) *
                sizeof(capnp::word),
            0, capacity(), channel_};
  }
  if (segments.size() != 1) {
    // Not a spill (overflowed() above): a segment Cap'n Proto made around
    // bytes outside the arena (Orphanage::referenceExternalData). Those
    // bytes are not in the slot; committing segment 0 alone would send a
    // far pointer to nothing.
    return {FramingStatus::kExternalData, 0, 0, capacity(), channel_};
  }
  const size_t n0 = segments[0].size();
  const size_t table = TableWords(1);
  // One segment: [start] table, the root part, then the blobs up to the
  // slot's end, so that a reader never needs a second segment (Cap'n
  // Proto's reader allocates bookkeeping for every segment but the first,
  // on every message).
  if (table + n0 > message_.blob_floor_words) {
    return {FramingStatus::kOverflow,
            (table + n0 + blob_words) * sizeof(capnp::word), 0, capacity(),
            channel_};
  }
  const size_t start =
      message_.blob_count == 0 ? 0 : message_.blob_floor_words - n0 - table;
  const size_t root = start + table;  // slot word where the root part lands
  capnp::word* out = slot_ + start;
  // The table's last half word is padding: zero it with the table.
  std::memset(static_cast<void*>(out), 0, table * sizeof(capnp::word));
  StoreU32(out, 0, 0);
  StoreU32(out, 1, static_cast<uint32_t>(n0 + blob_words));
  std::memcpy(static_cast<void*>(slot_ + root), arena_->base_,
              n0 * sizeof(capnp::word));
  for (int k = 0; k < message_.blob_count; ++k) {
    const Blob& b = blobs_[k];
    // A list pointer's target is the word after the pointer plus offset.
    const size_t at = root + b.pointer_word;
    const uint64_t list = ListPointerToBytes(
        static_cast<int64_t>(b.first_word) - static_cast<int64_t>(at) - 1,
        b.bytes);
    std::memcpy(static_cast<void*>(slot_ + at), &list, 8);
  }
  arena_->dirty_words_ = n0;
  message_.reusable_words = RootAlone(arena_->base_, n0) ? n0 : 0;
  const size_t words =
      message_.blob_count == 0 ? table + n0 : slot_words_ - start;
  return {FramingStatus::kOk, words * sizeof(capnp::word),
          start * sizeof(capnp::word), capacity(), channel_};
}

TETHER_HOT_PATH bool SlotMessageBuilder::Reuse(std::span<std::byte> slot) {
  if (message_.reusable_words == 0 || CheckSlot(slot) != slot_words_) {
    return false;
  }
  // The root struct back to zeros (the root pointer, word 0, stays); every
  // word after it is zero already (Finish() left the arena's dirty bound
  // at message_.reusable_words). Until Finish(), all may become dirty, as in
  // allocateSegment().
  std::memset(static_cast<void*>(arena_->base_ + 1), 0,
              (message_.reusable_words - 1) * sizeof(capnp::word));
  arena_->dirty_words_ = std::max(arena_->dirty_words_, slot_words_ - 1);
  slot_ = reinterpret_cast<capnp::word*>(slot.data());
  message_ = PerMessage{.blob_floor_words = slot_words_};
  return true;
}

FinishResult CopyMessageIntoSlot(std::span<const std::byte> framed,
                                 std::span<std::byte> slot,
                                 std::string_view channel) {
  (void)CheckSlot(slot);
  const uint64_t capacity = slot.size();
  const Framing framing = CheckFraming(framed, /*need_alignment=*/false);
  if (framing.status != FramingStatus::kOk) {
    return {framing.status, 0, 0, capacity, channel};
  }
  if (framed.size() > slot.size()) {
    return {FramingStatus::kOverflow, framed.size(), 0, capacity, channel};
  }
  std::memcpy(slot.data(), framed.data(), framed.size());
  return {FramingStatus::kOk, framed.size(), 0, capacity, channel};
}

// ---------------------------------------------------------------------------

TETHER_HOT_PATH SlotMessageReader::SlotMessageReader(
    std::span<const std::byte> bytes, const ReadOptions& options)
    : capnp::MessageReader(MakeReaderOptions(bytes, options)) {
  const Framing framing = CheckFraming(bytes, /*need_alignment=*/true);
  status_ = framing.status;
  if (status_ == FramingStatus::kOk) {
    const auto* words = reinterpret_cast<const capnp::word*>(bytes.data());
    segment_count_ = framing.count;
    for (uint32_t i = 0; i < framing.count; ++i) {
      segments_[i] = {words + framing.start[i], framing.words[i]};
    }
  }
}

TETHER_HOT_PATH SlotMessageReader::~SlotMessageReader() noexcept(false) =
    default;

TETHER_HOT_PATH kj::ArrayPtr<const capnp::word> SlotMessageReader::getSegment(
    capnp::uint id) {
  if (id < segment_count_) {
    return kj::arrayPtr(segments_[id].begin, segments_[id].words);
  }
  return nullptr;
}

namespace internal {

void Describe(const kj::Exception& e, std::string* why) {
  if (why != nullptr) *why = e.getDescription().cStr();
}

TETHER_HOT_PATH FramingStatus
CheckWholeMessage(SlotMessageReader& reader, std::string* why,
                  capnp::AnyPointer::Reader* root) {
  // Only a failure may allocate (the exception, `why`); the scope ends
  // after the exception is freed.
  util::FailurePathAllocationScope failure_path;
  if (!reader.ok()) {
    failure_path.Failed();
    if (why != nullptr) *why = FramingStatusName(reader.status());
    return reader.status();
  }
  // A message of one segment (what tether's publishers make) is bounded by
  // a quick walk (wire_bounds.h); where that walk does not decide, and for
  // every other message, Cap'n Proto walks it and gives the verdict.
  const bool bounded =
      reader.segment_count() == 1 &&
      OneSegmentInBounds(reader.segment_words(0),
                         static_cast<int>(reader.getOptions().nestingLimit));
  try {
    const capnp::AnyPointer::Reader r = reader.getRoot<capnp::AnyPointer>();
    if (!bounded) (void)r.targetSize();
    if (root != nullptr) *root = r;
  } catch (const kj::Exception& e) {
    failure_path.Failed();
    Describe(e, why);
    return FramingStatus::kMalformed;
  }
  return FramingStatus::kOk;
}

}  // namespace internal
}  // namespace tether::transport
