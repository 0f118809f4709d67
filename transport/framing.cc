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

namespace tether::transport {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the segment table is written with native stores");
static_assert(sizeof(capnp::word) == 8);

// Cap'n Proto's segment size limit (SegmentWordCount is 29 bits).
constexpr size_t kMaxSegmentWords = (size_t{1} << 29) - 1;
// First spill mapping; later ones double.
constexpr size_t kMinSpillWords = 8192;

struct Table {
  uint32_t count_minus_one;
  uint32_t words;
};

Table LoadTable(const void* p) {
  uint32_t v[2];
  std::memcpy(v, p, sizeof(v));
  return {v[0], v[1]};
}

void StoreTable(void* p, uint32_t words) {
  const uint32_t v[2] = {0, words};
  std::memcpy(p, v, sizeof(v));
}

[[noreturn]] void Die(const char* what, size_t value) {
  std::fprintf(stderr, "tether::transport framing: %s (%zu)\n", what, value);
  std::abort();
}

// Aborts unless `slot` can hold framed messages (misuse).
size_t CheckSlot(std::span<const std::byte> slot) {
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

// How many words after the table may be non-zero (see the invariant in
// framing.h); the whole segment area if word 0 is not a one-segment table
// that fits.
size_t DirtyWords(const capnp::word* slot, size_t segment_words) {
  const Table table = LoadTable(slot);
  if (table.count_minus_one != 0 || table.words > segment_words) {
    return segment_words;
  }
  return table.words;
}

struct Framing {
  FramingStatus status;
  size_t words;
};

Framing CheckFraming(std::span<const std::byte> bytes, bool need_alignment) {
  if (need_alignment && reinterpret_cast<uintptr_t>(bytes.data()) % 8 != 0) {
    return {FramingStatus::kMisaligned, 0};
  }
  if (bytes.size() < 16 || bytes.size() % 8 != 0) {
    return {FramingStatus::kTruncated, 0};
  }
  const Table table = LoadTable(bytes.data());
  if (table.count_minus_one != 0) return {FramingStatus::kBadSegmentCount, 0};
  if (table.words == 0 || table.words != bytes.size() / 8 - 1) {
    return {FramingStatus::kSizeMismatch, 0};
  }
  return {FramingStatus::kOk, table.words};
}

capnp::ReaderOptions MakeReaderOptions(std::span<const std::byte> bytes,
                                       const ReadOptions& options) {
  const Framing framing = CheckFraming(bytes, /*need_alignment=*/true);
  capnp::ReaderOptions result;
  // Budget the eager walk (about one pass over the segment) on top of the
  // caller's limit.
  const uint64_t limit = options.traversal_limit_words;
  result.traversalLimitInWords =
      limit > std::numeric_limits<uint64_t>::max() - framing.words
          ? std::numeric_limits<uint64_t>::max()
          : limit + framing.words;
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
    default:
      return absl::StrCat("message for channel ", channel,
                          " is not valid framing: ", FramingStatusName(status));
  }
}

// ---------------------------------------------------------------------------

SlotMessageBuilder::SlotMessageBuilder(std::span<std::byte> slot,
                                       std::string_view channel,
                                       SlotContents contents)
    : slot_(reinterpret_cast<capnp::word*>(slot.data())),
      slot_words_(CheckSlot(slot)),
      channel_(channel),
      contents_(contents) {}

SlotMessageBuilder::~SlotMessageBuilder() noexcept(false) {
  // Cap'n Proto's arena, destroyed after this, does not read its segments.
  for (int i = 0; i < spill_count_; ++i) {
    munmap(spills_[i].address, spills_[i].bytes);
  }
}

kj::ArrayPtr<capnp::word> SlotMessageBuilder::allocateSegment(
    capnp::uint minimum_size) {
  const size_t segment_words = slot_words_ - 1;
  if (!slot_handed_out_) {
    slot_handed_out_ = true;
    const size_t dirty = contents_ == SlotContents::kUnknown
                             ? segment_words
                             : DirtyWords(slot_, segment_words);
    // Until Finish() the whole slot counts as dirty: a build that is
    // abandoned, overflows or dies half way leaves the next one zeroing all.
    StoreTable(slot_, static_cast<uint32_t>(segment_words));
    std::memset(static_cast<void*>(slot_ + 1), 0, dirty * sizeof(capnp::word));
    if (minimum_size <= segment_words) {
      return kj::arrayPtr(slot_ + 1, segment_words);
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

FinishResult SlotMessageBuilder::Finish() {
  if (!slot_handed_out_) {
    // No root yet: allocate the (null) root pointer.
    (void)getRoot<capnp::AnyPointer>();
  }
  const auto segments = getSegmentsForOutput();
  if (overflowed()) {
    uint64_t words = 0;
    for (const auto& segment : segments) words += segment.size();
    return {FramingStatus::kOverflow, (1 + words) * sizeof(capnp::word),
            capacity(), channel_};
  }
  const size_t words = segments[0].size();
  StoreTable(slot_, static_cast<uint32_t>(words));
  return {FramingStatus::kOk, (1 + words) * sizeof(capnp::word), capacity(),
          channel_};
}

FinishResult CopyMessageIntoSlot(std::span<const std::byte> framed,
                                 std::span<std::byte> slot,
                                 std::string_view channel) {
  const size_t slot_words = CheckSlot(slot);
  const uint64_t capacity = slot.size();
  const Framing framing = CheckFraming(framed, /*need_alignment=*/false);
  if (framing.status != FramingStatus::kOk) {
    return {framing.status, 0, capacity, channel};
  }
  if (framed.size() > slot.size()) {
    return {FramingStatus::kOverflow, framed.size(), capacity, channel};
  }
  auto* words = reinterpret_cast<capnp::word*>(slot.data());
  const size_t segment_words = slot_words - 1;
  const size_t dirty = DirtyWords(words, segment_words);
  StoreTable(words, static_cast<uint32_t>(segment_words));
  if (dirty > framing.words) {
    std::memset(static_cast<void*>(words + 1 + framing.words), 0,
                (dirty - framing.words) * sizeof(capnp::word));
  }
  std::memcpy(static_cast<void*>(words + 1), framed.data() + 8,
              framing.words * sizeof(capnp::word));
  StoreTable(words, static_cast<uint32_t>(framing.words));
  return {FramingStatus::kOk, framed.size(), capacity, channel};
}

// ---------------------------------------------------------------------------

SlotMessageReader::SlotMessageReader(std::span<const std::byte> bytes,
                                     const ReadOptions& options)
    : capnp::MessageReader(MakeReaderOptions(bytes, options)) {
  const Framing framing = CheckFraming(bytes, /*need_alignment=*/true);
  status_ = framing.status;
  if (status_ == FramingStatus::kOk) {
    segment_ = kj::arrayPtr(
        reinterpret_cast<const capnp::word*>(bytes.data()) + 1, framing.words);
  }
}

SlotMessageReader::~SlotMessageReader() noexcept(false) = default;

kj::ArrayPtr<const capnp::word> SlotMessageReader::getSegment(capnp::uint id) {
  if (id == 0) return segment_;
  return nullptr;
}

namespace internal {

void Describe(const kj::Exception& e, std::string* why) {
  if (why != nullptr) *why = e.getDescription().cStr();
}

FramingStatus CheckWholeMessage(SlotMessageReader& reader, std::string* why) {
  if (!reader.ok()) {
    if (why != nullptr) *why = FramingStatusName(reader.status());
    return reader.status();
  }
  try {
    (void)reader.getRoot<capnp::AnyPointer>().targetSize();
  } catch (const kj::Exception& e) {
    Describe(e, why);
    return FramingStatus::kMalformed;
  }
  return FramingStatus::kOk;
}

}  // namespace internal
}  // namespace tether::transport
