// Stress-test helpers: a checker that every reader runs over the messages it
// gets, proving nothing is duplicated, reordered, torn or lost silently, and
// that each message's origin is its own.
#ifndef TETHER_TESTS_SHM_STRESS_UTIL_H_
#define TETHER_TESTS_SHM_STRESS_UTIL_H_

#include <cstdint>
#include <string>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm::testing {

// The origin a stress publisher gives message `sequence` of publisher
// `publisher` (shm SendTimes::origin): different for every message, so a
// reader that got one message's origin with another's payload (an origin
// stored after the commit, or read outside the reader's validity check)
// is caught. Never 0.
inline uint64_t StressOrigin(uint32_t publisher, uint64_t sequence) {
  return ((uint64_t{publisher} << 48) ^ (sequence * 0x9e3779b97f4a7c15ull)) | 1;
}

// Sends `n` bytes of the loan with StressOrigin(publisher, sequence).
inline SendResult SendWithStressOrigin(Publisher& p, size_t n,
                                       uint32_t publisher, uint64_t sequence) {
  SendTimes t;
  t.origin = StressOrigin(publisher, sequence);
  return p.Send(n, &t);
}

class StreamChecker {
 public:
  // `first_index`: the queue index the reader's cursor started at.
  explicit StreamChecker(uint64_t first_index) : expected_(first_index) {}

  // Checks one message from Reader::Next(). `check_data` verifies the
  // pattern (callers of unpinned reads check StillValid first). Returns
  // false with *error set on the first violation.
  bool Observe(const MessageView& v, bool check_data, std::string* error) {
    // Exact loss accounting: every index is either delivered or counted.
    if (v.queue_index != expected_ + v.missed) {
      *error = absl::StrCat("index ", v.queue_index, " after expecting ",
                            expected_, " with missed=", v.missed);
      return false;
    }
    expected_ = v.queue_index + 1;
    ++received_;
    missed_ += v.missed;
    if (!check_data) return true;
    PatternHeader h;
    if (!CheckPattern(v.data, &h)) {
      *error = absl::StrCat("torn or corrupt payload at index ", v.queue_index);
      return false;
    }
    if (h.sequence != v.publisher_sequence) {
      *error = absl::StrCat("payload sequence ", h.sequence,
                            " != header sequence ", v.publisher_sequence);
      return false;
    }
    if (v.origin != StressOrigin(h.publisher, h.sequence)) {
      *error = absl::StrCat("origin ", v.origin, " at index ", v.queue_index,
                            " is not that of publisher ", h.publisher,
                            " message ", h.sequence);
      return false;
    }
    auto [it, inserted] = last_seq_.try_emplace(h.publisher, h.sequence);
    if (!inserted) {
      if (h.sequence <= it->second) {
        *error = absl::StrCat("publisher ", h.publisher, " sequence ",
                              h.sequence, " after ", it->second,
                              " (duplicate or reordered)");
        return false;
      }
      gaps_ += h.sequence - it->second - 1;
      it->second = h.sequence;
    } else {
      gaps_ += h.sequence;  // messages before the first one we saw
    }
    ++received_per_publisher_[h.publisher];
    return true;
  }

  uint64_t next_expected() const { return expected_; }
  uint64_t received() const { return received_; }
  uint64_t missed() const { return missed_; }
  // Sum over publishers of sequence numbers skipped between deliveries.
  uint64_t gaps() const { return gaps_; }
  const std::unordered_map<uint32_t, uint64_t>& received_per_publisher() const {
    return received_per_publisher_;
  }

 private:
  uint64_t expected_;
  uint64_t received_ = 0;
  uint64_t missed_ = 0;
  uint64_t gaps_ = 0;
  std::unordered_map<uint32_t, uint64_t> last_seq_;
  std::unordered_map<uint32_t, uint64_t> received_per_publisher_;
};

}  // namespace tether::shm::testing

#endif  // TETHER_TESTS_SHM_STRESS_UTIL_H_
