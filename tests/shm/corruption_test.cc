// Shared memory is untrusted input: random and adversarial bytes written over
// every part of a live channel (header, registries, ring, slot headers,
// payloads). Publishers, readers, sweeps and fresh opens must return errors
// or carry on; never crash, hang, or hand out a view outside the mapping.
// Run under --config=asan as well.
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

namespace in = internal;

constexpr QueueParams kParams{.slot_size = 96, .queue_depth = 8,
                              .max_publishers = 3, .max_pinned = 3};

// Parts of the data file, and the whole reader-state file.
enum class Region { kHeader, kPublishers, kReaderState, kRing, kSlotHeaders,
                    kPayloads };

struct Span {
  uint64_t begin, end;
};

Span RegionSpan(Region r) {
  in::Layout l = in::Layout::For(kParams, 0);
  switch (r) {
    case Region::kHeader: return {0, l.metadata};
    case Region::kPublishers: return {l.publishers, l.ring};
    case Region::kReaderState: return {0, in::StateLayout::For(kParams).total};
    case Region::kRing: return {l.ring, l.slot_headers};
    case Region::kSlotHeaders: return {l.slot_headers, l.payloads};
    case Region::kPayloads: return {l.payloads, l.total};
  }
  return {0, 0};
}

// Values that stress bounds checks more than uniform noise does.
uint64_t Adversarial(std::mt19937_64& rng) {
  switch (rng() % 10) {
    case 0: return 0;
    case 1: return ~uint64_t{0};
    case 2: return ~uint64_t{0} - 1;
    case 3: return in::MakeEntry(rng(), static_cast<uint32_t>(rng() % (1u << 24)));
    case 4: return rng() % 64;                       // small indices
    case 5: return kParams.pool_size() + rng() % 8;  // just out of range
    case 6: return in::Pending(rng() % 8, rng());
    case 7: return in::Owned(rng() % 8);
    case 8: return uint64_t{1} << (rng() % 64);
    default: return rng();
  }
}

void Corrupt(Channel* c, Region region, std::mt19937_64& rng) {
  auto* base =
      region == Region::kReaderState
          ? reinterpret_cast<std::byte*>(internal::ChannelAccess::state_header(*c))
          : reinterpret_cast<std::byte*>(internal::ChannelAccess::header(*c));
  Span s = RegionSpan(region);
  if (s.end <= s.begin) return;
  int writes = 1 + rng() % 6;
  for (int i = 0; i < writes; ++i) {
    uint64_t off = s.begin + (rng() % (s.end - s.begin));
    if (rng() % 2) {
      off &= ~uint64_t{7};  // an aligned word: index, size, state, tag
      if (off + 8 > s.end) continue;
      uint64_t v = Adversarial(rng);
      std::memcpy(base + off, &v, 8);
    } else {
      base[off] = static_cast<std::byte>(rng());
    }
  }
}

bool InMapping(Channel* c, const MessageView& v) {
  auto* base = reinterpret_cast<const std::byte*>(internal::ChannelAccess::header(*c));
  const std::byte* end = base + in::Layout::For(kParams, 0).total;
  return v.data.data() >= base && v.data.data() + v.data.size() <= end;
}

void Exercise(Channel* c, Publisher* pub, Reader* pinned, Reader* unpinned,
              std::mt19937_64& rng) {
  for (int i = 0; i < 12; ++i) {
    auto loan = pub->Loan();
    if (!loan.empty()) {
      ASSERT_EQ(loan.size(), kParams.slot_size);
      size_t n = testing::WritePattern(loan, 1, i, 16 + rng() % 80);
      (void)pub->Send(n);
    } else {
      (void)pub->Send(8);
    }
    for (Reader* r : {pinned, unpinned}) {
      MessageView v;
      if (r->Next(&v) == ReadStatus::kOk) {
        ASSERT_TRUE(InMapping(c, v));
        ASSERT_LE(v.data.size(), kParams.slot_size);
        (void)r->StillValid(v);
      }
      if (r->Latest(&v) == ReadStatus::kOk) ASSERT_TRUE(InMapping(c, v));
    }
  }
  pinned->Release();
  (void)c->Sweep();
  (void)c->Stats();
  {
    Sleeper sleeper = c->RegisterSleeper();
    sleeper.BeginSleep();
    sleeper.EndSleep();
  }
}

std::string RegionName(const ::testing::TestParamInfo<Region>& info) {
  static const char* const kNames[] = {"Header",      "Publishers", "ReaderState",
                                       "Ring",        "SlotHeaders",
                                       "Payloads"};
  return kNames[static_cast<int>(info.param)];
}

class CorruptionTest : public ::testing::TestWithParam<Region> {};

TEST_P(CorruptionTest, RandomAndAdversarialBytesNeverCrashOrEscape) {
  testing::ScopedRoot root;
  std::mt19937_64 rng(static_cast<int>(GetParam()) * 7777 + 1);
  int corrupt_reports = 0;
  for (int round = 0; round < 150; ++round) {
    (void)Channel::Remove(root.options(), "c");
    auto c = Channel::OpenOrCreate(root.options(), "c", kParams);
    ASSERT_TRUE(c.ok()) << c.status();
    auto pub = Publisher::Create(c->get());
    auto pinned = Reader::Create(c->get(), {.pin = true});
    auto unpinned = Reader::Create(c->get(), {.pin = false});
    ASSERT_TRUE(pub.ok() && pinned.ok() && unpinned.ok());
    for (int i = 0; i < 5; ++i) {
      size_t n = testing::WritePattern((*pub)->Loan(), 1, i, 40);
      ASSERT_EQ((*pub)->Send(n).status, SendStatus::kOk);
    }
    MessageView v;
    ASSERT_EQ((*pinned)->Next(&v), ReadStatus::kOk);  // holding a pin
    Corrupt(c->get(), GetParam(), rng);
    Exercise(c->get(), pub->get(), pinned->get(), unpinned->get(), rng);
    // Corrupt again while everything is in flight, then use fresh handles.
    Corrupt(c->get(), GetParam(), rng);
    auto again = Channel::Open(root.options(), "c");
    if (again.ok()) {
      auto p2 = Publisher::Create(again->get());
      auto r2 = Reader::Create(again->get(), {.pin = true});
      auto u2 = Reader::Create(again->get(), {.pin = false});
      if (p2.ok() && r2.ok() && u2.ok()) {
        Exercise(again->get(), p2->get(), r2->get(), u2->get(), rng);
      }
    } else {
      ++corrupt_reports;
      EXPECT_FALSE(again.status().message().empty());
    }
    // A publisher or reader on a corrupt channel reports, not crashes.
    for (int i = 0; i < 4; ++i) {
      SendResult r = (*pub)->Send(8);
      if (r.status == SendStatus::kCorrupt) ++corrupt_reports;
      if ((*pinned)->Next(&v) == ReadStatus::kCorrupt) ++corrupt_reports;
    }
  }
  if (GetParam() == Region::kRing || GetParam() == Region::kHeader) {
    EXPECT_GT(corrupt_reports, 0) << "corruption was never detected";
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryRegion, CorruptionTest,
    ::testing::Values(Region::kHeader, Region::kPublishers, Region::kReaderState,
                      Region::kRing, Region::kSlotHeaders, Region::kPayloads),
    RegionName);

TEST(Corruption, ACorruptHeaderFailsOpenWithDataLoss) {
  testing::ScopedRoot root;
  std::mt19937_64 rng(99);
  int refused = 0;
  for (int round = 0; round < 200; ++round) {
    (void)Channel::Remove(root.options(), "c");
    auto c = Channel::OpenOrCreate(root.options(), "c", kParams);
    ASSERT_TRUE(c.ok());
    // Only the immutable first line (magic .. creation time).
    auto* base = reinterpret_cast<std::byte*>(internal::ChannelAccess::header(**c));
    uint64_t off = rng() % 48;
    base[off] = static_cast<std::byte>(static_cast<uint8_t>(base[off]) ^
                                       (1u << (rng() % 8)));
    auto again = Channel::Open(root.options(), "c");
    if (!again.ok()) {
      ++refused;
      EXPECT_TRUE(again.status().code() == absl::StatusCode::kDataLoss ||
                  again.status().code() ==
                      absl::StatusCode::kFailedPrecondition)
          << again.status();
    }
  }
  // A flipped bit in magic, version, sizes, params or hash is refused (the
  // pid/time fields at 40..47 are informational).
  EXPECT_GT(refused, 150);
}

// What the adversarial tester did to the live demo: garbage over a
// channel's ring (dd), then kill -9 of its only publisher, whose launcher
// restarts it. The registration of the dead cannot be swept from a corrupt
// channel; the restarted publisher must learn that the channel is corrupt,
// where, and how to recover -- not to raise maxPublishers.
constexpr QueueParams kOnePublisher{.slot_size = 96, .queue_depth = 8,
                                    .max_publishers = 1, .max_pinned = 1};

// A child process opens channel "c", registers a publisher (and, with
// `pin`, a pinning reader), sends one message and dies without
// deregistering, as kill -9 would leave it. Returns its pid.
pid_t RegisterAndDie(const ChannelOptions& options, bool pin) {
  const pid_t child = ::fork();
  if (child == 0) {
    auto c = Channel::Open(options, "c");
    if (!c.ok()) ::_exit(1);
    auto pub = Publisher::Create(c->get());
    if (!pub.ok()) ::_exit(2);
    absl::StatusOr<std::unique_ptr<Reader>> reader =
        Reader::Create(c->get(), {.pin = pin});
    if (!reader.ok()) ::_exit(3);
    const size_t n = testing::WritePattern((*pub)->Loan(), 1, 0, 40);
    ::_exit((*pub)->Send(n).status == SendStatus::kOk ? 0 : 4);
  }
  int status = -1;
  EXPECT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  return child;
}

// `dd if=/dev/urandom ... conv=notrunc` over the whole ring.
void GarbageOverTheRing(const Channel& c) {
  std::mt19937_64 rng(2000);
  for (uint32_t pos = 0; pos < c.params().queue_depth; ++pos) {
    in::ChannelAccess::ring_entry(c, pos)->store(rng());
  }
}

TEST(CorruptChannel, ARestartedPublisherIsToldTheChannelIsCorruptAndHowToRecover) {
  testing::ScopedRoot root;
  auto created = Channel::OpenOrCreate(root.options(), "c", kOnePublisher);
  ASSERT_TRUE(created.ok()) << created.status();
  RegisterAndDie(root.options(), /*pin=*/false);
  GarbageOverTheRing(**created);
  created->reset();

  auto reopened = Channel::Open(root.options(), "c");  // the restart
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  ASSERT_TRUE((*reopened)->corrupt());
  absl::StatusOr<std::unique_ptr<Publisher>> pub =
      Publisher::Create(reopened->get());
  ASSERT_FALSE(pub.ok());
  EXPECT_EQ(pub.status().code(), absl::StatusCode::kDataLoss);
  const std::string message(pub.status().message());
  using ::testing::HasSubstr;
  EXPECT_THAT(message, HasSubstr("channel c is corrupt: ring position "));
  EXPECT_THAT(message, HasSubstr("(" + Channel::PathFor(root.options(), "c") +
                                 ")"));
  EXPECT_THAT(message, HasSubstr("stop the stack"));
  EXPECT_THAT(message, HasSubstr("run `tether clean --root " + root.root() +
                                 " --instance test`"));
  EXPECT_THAT(message, ::testing::Not(HasSubstr("maxPublishers")));
}

TEST(CorruptChannel, APublisherIsRefusedAnEntryOnACorruptChannelEvenWhenOneIsFree) {
  testing::ScopedRoot root;
  auto c = Channel::OpenOrCreate(root.options(), "c", kParams);
  ASSERT_TRUE(c.ok()) << c.status();
  GarbageOverTheRing(**c);
  auto reopened = Channel::Open(root.options(), "c");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  auto pub = Publisher::Create(reopened->get());
  ASSERT_FALSE(pub.ok());
  EXPECT_EQ(pub.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(pub.status().message()),
              ::testing::HasSubstr("channel c is corrupt"));
  // Nothing was registered that no sweep could reclaim.
  EXPECT_EQ((*reopened)->Stats().publishers, 0);
}

TEST(CorruptChannel, ARestartedPinningReaderReportsTheCorruptionAtItsFirstRead) {
  testing::ScopedRoot root;
  auto created = Channel::OpenOrCreate(root.options(), "c", kOnePublisher);
  ASSERT_TRUE(created.ok()) << created.status();
  const pid_t dead = RegisterAndDie(root.options(), /*pin=*/true);
  GarbageOverTheRing(**created);
  created->reset();

  auto reopened = Channel::Open(root.options(), "c");
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  // Its only pin entry is the dead reader's: not "raise maxPinnedReaders".
  auto reader = Reader::Create(reopened->get(), {.pin = true});
  ASSERT_TRUE(reader.ok()) << reader.status();
  MessageView v;
  EXPECT_EQ((*reader)->Next(&v), ReadStatus::kCorrupt);
  EXPECT_EQ((*reader)->Latest(&v), ReadStatus::kCorrupt);
  EXPECT_FALSE((*reopened)->corruption().empty());
  EXPECT_EQ((*reopened)->Stats().pinning_readers, 1);  // the dead one only
  // Who is registered, by liveness: the dead child, nobody alive.
  const RegisteredProcesses who = (*reopened)->Registered();
  EXPECT_TRUE(who.alive.empty());
  EXPECT_EQ(who.dead, std::vector<pid_t>{dead});
}

TEST(CorruptChannel, RegisteredTellsLiveProcessesFromDeadOnes) {
  testing::ScopedRoot root;
  auto c = Channel::OpenOrCreate(root.options(), "c", kParams);
  ASSERT_TRUE(c.ok()) << c.status();
  const pid_t dead = RegisterAndDie(root.options(), /*pin=*/true);
  // The child's entries stay until a sweep: open() sweeps, so look at the
  // handle made before the child ran.
  auto pub = Publisher::Create(c->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  const RegisteredProcesses who = (*c)->Registered();
  EXPECT_EQ(who.alive, std::vector<pid_t>{::getpid()});
  EXPECT_EQ(who.dead, std::vector<pid_t>{dead});
}

}  // namespace
}  // namespace tether::shm
