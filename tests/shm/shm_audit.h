// Test-only audit of a channel's internal state (uses shm's internal
// layout): after crashes and sweeps, every slot must be accounted for.
#ifndef TETHER_TESTS_SHM_SHM_AUDIT_H_
#define TETHER_TESTS_SHM_SHM_AUDIT_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/layout.h"

namespace tether::shm::testing {

struct AuditResult {
  std::vector<std::string> problems;
  int in_ring = 0;
  int free = 0;
  int loaned = 0;  // Owned or Pending
  int pinned = 0;
  bool ok() const { return problems.empty(); }
  std::string ToString() const {
    std::string s = absl::StrCat("ring=", in_ring, " free=", free,
                                 " loaned=", loaned, " pinned=", pinned);
    for (const auto& p : problems) absl::StrAppend(&s, "\n  ", p);
    return s;
  }
};

// Checks, on a quiescent channel (no send or read in progress), that every
// ring entry names a distinct slot holding that message, every other slot
// is free or loaned to a registered publisher, and pins belong to
// registered readers. With `expect_idle`, also that nothing is loaned or
// pinned (all processes gone and swept).
inline AuditResult Audit(Channel* c, bool expect_idle) {
  namespace in = internal;
  AuditResult r;
  const QueueParams& p = c->params();
  const uint64_t pool = p.pool_size();
  std::set<uint64_t> ring_slots;
  for (uint64_t i = 0; i < p.queue_depth; ++i) {
    uint64_t e = in::ChannelAccess::ring_entry(*c, i)->load();
    uint64_t s = in::EntrySlot(e);
    if (s >= pool) {
      r.problems.push_back(absl::StrCat("ring entry ", i, " names slot ", s));
      continue;
    }
    if (!ring_slots.insert(s).second) {
      r.problems.push_back(absl::StrCat("slot ", s, " is in the ring twice"));
    }
    uint64_t state = in::ChannelAccess::slot_header(*c, s)->state.load();
    bool initial = state == in::kEmpty && s == i &&
                   in::EntryTag(e) == in::Tag(i - p.queue_depth);
    bool holds = in::IsMessage(state) && in::Tag(state) == in::EntryTag(e) &&
                 (state & (p.queue_depth - 1)) == i;
    if (!initial && !holds) {
      r.problems.push_back(absl::StrCat("ring position ", i, " names slot ", s,
                                        " whose state is ", state));
    }
  }
  for (uint64_t s = 0; s < pool; ++s) {
    auto* sh = in::ChannelAccess::slot_header(*c, s);
    uint64_t state = sh->state.load();
    uint64_t pins = in::ChannelAccess::pin_word(*c, s)->load();
    if (pins != 0) ++r.pinned;
    for (uint32_t k = 0; k < 64; ++k) {
      if ((pins >> k) & 1) {
        if (k >= p.max_pinned || in::ChannelAccess::reader_entry(*c, k)->owner.load() == kNoOwner) {
          r.problems.push_back(
              absl::StrCat("slot ", s, " pinned by unregistered reader ", k));
        }
      }
    }
    bool in_ring = ring_slots.count(s) > 0;
    if (in_ring) {
      ++r.in_ring;
      if (!in::IsMessage(state) && state != in::kEmpty) {
        r.problems.push_back(
            absl::StrCat("slot ", s, " in the ring has state ", state));
      }
    } else if (state == in::kFree) {
      ++r.free;
    } else if (in::IsOwnedOrPending(state)) {
      ++r.loaned;
      uint32_t owner = in::StateOwner(state);
      if (owner >= p.max_publishers ||
          in::ChannelAccess::publisher_entry(*c, owner)->owner.load() == kNoOwner) {
        r.problems.push_back(absl::StrCat("slot ", s, " loaned to publisher ",
                                          owner, " that is not registered"));
      }
    } else {
      r.problems.push_back(absl::StrCat("slot ", s, " leaked: state ", state,
                                        " but not in the ring"));
    }
  }
  if (expect_idle && (r.loaned != 0 || r.pinned != 0)) {
    r.problems.push_back("loans or pins left although every process is gone");
  }
  if (r.in_ring != static_cast<int>(p.queue_depth)) {
    r.problems.push_back(absl::StrCat("ring names ", r.in_ring, " slots"));
  }
  return r;
}

}  // namespace tether::shm::testing

#endif  // TETHER_TESTS_SHM_SHM_AUDIT_H_
