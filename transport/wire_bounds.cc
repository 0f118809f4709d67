#include "transport/wire_bounds.h"

#include <algorithm>

#include "util/hot_path.h"

namespace tether::transport::internal {
namespace {

// A wire pointer (Cap'n Proto's encoding spec): the kind in bits 0-1, a
// signed 30-bit offset in bits 2-31 counted in words from the word after
// the pointer; a struct's data words in bits 32-47 and its pointers in
// 48-63; a list's element size in bits 32-34 and its element count in
// 35-63 (an inline composite list counts words there, and its first word,
// the tag, is a struct pointer whose offset field counts the elements).
constexpr uint64_t kStruct = 0, kList = 1;
enum ElementSize : uint64_t {
  kVoid = 0,
  kPointer = 6,
  kInlineComposite = 7,
};
// Bits per element of the element sizes 1-5 (bit, byte, 2, 4, 8 bytes).
constexpr uint64_t kDataBits[] = {0, 1, 8, 16, 32, 64};

class Walk {
 public:
  explicit Walk(std::span<const uint64_t> segment)
      : segment_(segment),
        words_(static_cast<int64_t>(segment.size())),
        pointers_left_(segment.size()),
        // The root's word is no object's: a message without shared objects
        // has at most the rest.
        words_left_(segment.size() - 1) {}

  // The pointer at word `at` (in the segment) and all it reaches, with
  // `depth_left` levels still allowed.
  TETHER_HOT_PATH bool Pointer(int64_t at, int depth_left) {
    const uint64_t p = segment_[static_cast<size_t>(at)];
    if (p == 0) return true;  // null
    // Each pointer is visited once and each object word charged once in a
    // message without shared objects; one that shares exceeds these and
    // is left to Cap'n Proto (its read limiter decides).
    if (depth_left <= 0 || pointers_left_ == 0) return false;
    --pointers_left_;
    const int64_t target =
        at + 1 + (static_cast<int32_t>(static_cast<uint32_t>(p)) >> 2);
    switch (p & 3) {
      case kStruct: {
        const int64_t data = static_cast<int64_t>((p >> 32) & 0xffff);
        const int64_t pointers = static_cast<int64_t>(p >> 48);
        if (!Object(target, data + pointers)) return false;
        return Pointers(target + data, pointers, depth_left - 1);
      }
      case kList:
        return List(target, p, depth_left - 1);
      default:
        return false;  // far (another segment, a landing pad) or capability
    }
  }

 private:
  TETHER_HOT_PATH bool List(int64_t target, uint64_t p, int depth_left) {
    const uint64_t size = (p >> 32) & 7;
    const int64_t count = static_cast<int64_t>(p >> 35);
    switch (size) {
      case kVoid:
        return true;  // no bytes: nothing to bound
      case kPointer:
        return Object(target, count) && Pointers(target, count, depth_left);
      case kInlineComposite: {
        // `count` is words here, after the tag word.
        if (!Object(target, count + 1)) return false;
        const uint64_t tag = segment_[static_cast<size_t>(target)];
        if ((tag & 3) != kStruct) return false;
        // The element count: the tag's whole offset field (Cap'n Proto may
        // read fewer bits of it; counting more only bounds more).
        const int64_t elements = static_cast<uint32_t>(tag) >> 2;
        const int64_t data = static_cast<int64_t>((tag >> 32) & 0xffff);
        const int64_t pointers = static_cast<int64_t>(tag >> 48);
        // Both at most 2^30 and 2^17: no overflow.
        if (elements * (data + pointers) > count) return false;
        if (pointers == 0) return true;
        for (int64_t i = 0; i < elements; ++i) {
          const int64_t element = target + 1 + i * (data + pointers);
          if (!Pointers(element + data, pointers, depth_left)) return false;
        }
        return true;
      }
      default: {
        const uint64_t bits = static_cast<uint64_t>(count) * kDataBits[size];
        return Object(target, static_cast<int64_t>((bits + 63) / 64));
      }
    }
  }

  // `count` pointers from word `first` (already bounded).
  bool Pointers(int64_t first, int64_t count, int depth_left) {
    for (int64_t i = 0; i < count; ++i) {
      if (!Pointer(first + i, depth_left)) return false;
    }
    return true;
  }

  // [start, start + words) lies in the segment; charged.
  bool Object(int64_t start, int64_t words) {
    if (start < 0 || start > words_ || words > words_ - start) return false;
    if (static_cast<uint64_t>(words) > words_left_) return false;
    words_left_ -= static_cast<uint64_t>(words);
    return true;
  }

  std::span<const uint64_t> segment_;
  int64_t words_;
  uint64_t pointers_left_;
  uint64_t words_left_;
};

}  // namespace

TETHER_HOT_PATH bool OneSegmentInBounds(std::span<const uint64_t> segment,
                                        int nesting_limit) {
  if (segment.empty()) return false;
  // Cap'n Proto's read limiter is then charged at most the segment's words
  // plus one by getRoot and targetSize (the objects charged here, the root
  // pointer's word, and one more): within the budget SlotMessageReader
  // gives it (the caller's limit plus the framed message's words, the
  // segment table's included).
  Walk walk(segment);
  return walk.Pointer(0, std::min(nesting_limit, kMaxWireDepth));
}

}  // namespace tether::transport::internal
