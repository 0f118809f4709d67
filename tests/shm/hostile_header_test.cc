// A channel header zeroed under live processes (the tester's `dd` over its
// first 256 bytes, its magic's line, its tail's line): every reader, pinned
// or not, in this process or another, reports the overwritten header, and
// the publisher stops -- while a tail one behind a reader's cursor (a
// publisher that died mid-send) and healthy traffic never look like one.
#include <fcntl.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/hostile_memory_fixture.h"
#include "tests/util/child_process.h"

namespace tether::shm {
namespace {

using ::tether::testing::ChildProcess;

using ::testing::HasSubstr;
using testing::HostileMemoryTest;
using testing::kParams;
namespace in = internal;

// Writes `n` zero bytes at `offset` of `path` through the file, as
// `dd if=/dev/zero of=<path> bs=n count=1 seek=.. conv=notrunc` does.
void ZeroBytes(const std::string& path, uint64_t offset, size_t n) {
  const std::string zeros(n, '\0');
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  ASSERT_EQ(::pwrite(fd, zeros.data(), n, static_cast<off_t>(offset)),
            static_cast<ssize_t>(n));
  ::close(fd);
}

// Parts of the header `dd` may zero: all of it (what the tester did, the
// first 256 bytes), its first line only (the magic: the tail intact), the
// tail's line only (the magic intact).
struct HeaderDamage {
  const char* name;
  uint64_t offset;
  size_t size;
};
constexpr HeaderDamage kHeaderDamage[] = {
    {"the first 256 bytes", 0, 256},
    {"the magic's line", 0, 64},
    {"the tail's line", offsetof(in::ChannelHeader, tail), 64},
};

TEST_F(HostileMemoryTest, AZeroedHeaderIsReportedByReadersNotOnlyPublishers) {
  for (const HeaderDamage& damage : kHeaderDamage) {
    SCOPED_TRACE(damage.name);
    (void)Channel::Remove(root_.options(), "/robot/imu");
    // Each party on its own handle, as in its own process.
    auto pub_channel = Open();
    auto pub = Publisher::Create(pub_channel.get());
    ASSERT_TRUE(pub.ok());
    std::unique_ptr<Channel> handles[3];
    for (auto& h : handles) {
      auto c = Channel::Open(root_.options(), "/robot/imu");
      ASSERT_TRUE(c.ok()) << c.status();
      h = std::move(*c);
    }
    auto pinned = Reader::Create(handles[0].get(), {.pin = true});
    auto unpinned = Reader::Create(handles[1].get(), {.pin = false});
    auto fetcher = Reader::Create(handles[2].get(), {.pin = true});
    ASSERT_TRUE(pinned.ok() && unpinned.ok() && fetcher.ok());
    // Past the ring's depth, so that the ring has wrapped; read as sent.
    const int sent = 2 * static_cast<int>(kParams.queue_depth) + 3;
    MessageView v;
    for (int i = 0; i < sent; ++i) {
      SendSome(pub->get(), 1);
      for (Reader* r : {pinned->get(), unpinned->get()}) {
        ASSERT_EQ(r->Next(&v), ReadStatus::kOk);
      }
    }
    for (Reader* r : {pinned->get(), unpinned->get()}) {
      ASSERT_EQ(r->Next(&v), ReadStatus::kNothingNew);
      ASSERT_FALSE(r->HasNext());
      ASSERT_EQ(r->total_missed(), 0u);
    }
    ASSERT_EQ((*fetcher)->Latest(&v), ReadStatus::kOk);
    ASSERT_EQ((*fetcher)->Latest(&v), ReadStatus::kNothingNew);

    ZeroBytes(pub_channel->path(), damage.offset, damage.size);

    // A waiting loop looks (HasNext) and its next read says what happened.
    for (Reader* r : {pinned->get(), unpinned->get()}) {
      EXPECT_TRUE(r->HasNext());
      EXPECT_EQ(r->Next(&v), ReadStatus::kCorrupt);
      EXPECT_EQ(r->total_missed(), 0u);  // corruption, not loss
      EXPECT_EQ(r->Next(&v), ReadStatus::kCorrupt);  // and it stays so
    }
    EXPECT_EQ((*fetcher)->Latest(&v), ReadStatus::kCorrupt);
    for (const auto& h : handles) {
      EXPECT_TRUE(h->corrupt());
      EXPECT_THAT(std::string(h->corruption()),
                  HasSubstr("header was overwritten"));
    }
    EXPECT_THAT(std::string(handles[0]->corruption()),
                HasSubstr(damage.offset == 0 ? "magic" : "tail is behind"));
    // The publisher stops too (the ring no longer fits its tail, or the
    // magic is gone), and counts the send it refused; the data file no
    // longer opens when its magic is gone.
    const SendStatus st = (*pub)->Send(8).status;
    EXPECT_EQ(st, SendStatus::kCorrupt);
    EXPECT_TRUE(pub_channel->corrupt());
    auto again = Channel::Open(root_.options(), "/robot/imu");
    EXPECT_TRUE(!again.ok() || (*again)->corrupt());
  }
}

TEST_F(HostileMemoryTest, AReaderInAnotherProcessReportsAZeroedHeader) {
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  ASSERT_TRUE(pub.ok());
  const int sent = 5;
  SendSome(pub->get(), sent);
  ChildProcess child([&](const ChildProcess::Voice& voice) {
    // A node's watcher: reads what comes, then polls as a loop does
    // (HasNext before Next). Exit codes say which step failed.
    auto mine = Channel::Open(root_.options(), "/robot/imu");
    if (!mine.ok()) return 10;
    auto r = Reader::Create(
        mine->get(), {.pin = true, .start = ReaderOptions::Start::kOldest});
    if (!r.ok()) return 11;
    MessageView v;
    for (int i = 0; i < sent; ++i) {
      if ((*r)->Next(&v) != ReadStatus::kOk) return 12;
    }
    if (!voice.Say()) return 13;
    for (int polls = 0; polls < 10000; ++polls) {
      if ((*r)->HasNext()) {
        const ReadStatus st = (*r)->Next(&v);
        if (st == ReadStatus::kOk) return 14;  // nothing was sent
        if (st == ReadStatus::kCorrupt) {
          const std::string what((*mine)->corruption());
          return what.find("header was overwritten") != std::string::npos
                     ? 0
                     : 15;
        }
      }
      ::usleep(500);
    }
    return 16;  // never told
  });
  ASSERT_TRUE(child.Heard().has_value())
      << "the reader failed at step " << child.ExitCode();
  ZeroBytes(c->path(), 0, 256);  // the tester's dd
  EXPECT_EQ(child.ExitCode(), 0) << "the reader failed at step "
                                 << child.ExitCode();
}

TEST_F(HostileMemoryTest, ATailOneBehindTheCursorIsNotAnOverwrittenHeader) {
  // A publisher that died between placing message q in the ring and bumping
  // the tail leaves tail == q with q readable: a reader past it has its
  // cursor one ahead of the tail, legitimately.
  auto c = Open();
  auto pub = Publisher::Create(c.get());
  auto reader = Reader::Create(c.get(), {.pin = true});
  auto fetcher = Reader::Create(c.get(), {.pin = false});
  ASSERT_TRUE(pub.ok() && reader.ok() && fetcher.ok());
  MessageView v;
  for (int i = 0; i < 20; ++i) {
    SendSome(pub->get(), 1);
    if (i < 19) {
      ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
    }
  }
  // Message 19 back to the state of step 3 (layout.h, "Send").
  const uint64_t q = 19;
  const uint64_t slot =
      in::EntrySlot(in::ChannelAccess::ring_entry(*c, q)->load());
  in::ChannelAccess::slot_header(*c, slot)->state.store(in::Pending(0, q));
  in::ChannelAccess::header(*c)->tail.store(q);
  ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, q);
  EXPECT_EQ((*fetcher)->Latest(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, q);
  (*reader)->Release();
  for (Reader* r : {reader->get(), fetcher->get()}) {
    EXPECT_EQ(r->next_index(), q + 1);
    EXPECT_FALSE(r->HasNext());
    EXPECT_EQ(r->Next(&v), ReadStatus::kNothingNew);
    EXPECT_EQ(r->Latest(&v), ReadStatus::kNothingNew);
  }
  EXPECT_FALSE(c->corrupt()) << c->corruption();
  // The next send helps the tail on; everyone carries on.
  in::ChannelAccess::slot_header(*c, slot)->state.store(q);
  SendSome(pub->get(), 1);
  ASSERT_EQ((*reader)->Next(&v), ReadStatus::kOk);
  EXPECT_EQ(v.queue_index, q + 1);
  EXPECT_FALSE(c->corrupt()) << c->corruption();
}

TEST_F(HostileMemoryTest, HealthyTrafficNeverLooksLikeAnOverwrittenHeader) {
  // Readers polling the idle path (HasNext, Next, Latest) as hard as they
  // can while a publisher wraps a small ring many times; readers made
  // before any message, from the oldest and from now, each on its own
  // handle (as in its own process).
  constexpr QueueParams kSmall{.slot_size = 64, .queue_depth = 4,
                               .max_publishers = 1, .max_pinned = 4};
  auto c = Channel::OpenOrCreate(root_.options(), "/robot/small", kSmall);
  ASSERT_TRUE(c.ok()) << c.status();
  auto pub = Publisher::Create(c->get());
  ASSERT_TRUE(pub.ok());
  constexpr uint64_t kMessages = 200000;
  std::atomic<bool> done{false};
  std::atomic<int> started{0};
  struct Result {
    uint64_t start = 0, received = 0, missed = 0, corrupt = 0;
    std::string what;
  };
  Result results[4];
  auto poll = [&](int k, ReaderOptions options, bool latest) {
    auto mine = Channel::Open(root_.options(), "/robot/small");
    if (!mine.ok()) {
      results[k].what = std::string(mine.status().message());
      ++results[k].corrupt;
      started.fetch_add(1);
      return;
    }
    auto r = Reader::Create(mine->get(), options);
    if (!r.ok()) {
      results[k].what = std::string(r.status().message());
      ++results[k].corrupt;
      started.fetch_add(1);
      return;
    }
    results[k].start = (*r)->next_index();
    started.fetch_add(1);
    MessageView v;
    for (;;) {
      const bool finished = done.load();
      bool idle = false;
      while (!idle) {
        // As a loop polls: HasNext (its idle path makes the same header
        // check; a false finding there would show in the read after it).
        (void)(*r)->HasNext();
        const ReadStatus st = latest ? (*r)->Latest(&v) : (*r)->Next(&v);
        if (st == ReadStatus::kCorrupt) {
          ++results[k].corrupt;
          results[k].what = std::string((*mine)->corruption());
          return;
        }
        idle = st == ReadStatus::kNothingNew;
        if (st == ReadStatus::kOk) ++results[k].received;
      }
      if (finished) break;
    }
    if (!latest) results[k].missed = (*r)->total_missed();
  };
  std::vector<std::thread> readers;
  readers.emplace_back(poll, 0, ReaderOptions{.pin = true}, false);
  readers.emplace_back(poll, 1, ReaderOptions{.pin = false}, false);
  while (started.load() < 2) std::this_thread::yield();
  SendSome(pub->get(), 3);
  readers.emplace_back(
      poll, 2,
      ReaderOptions{.pin = true, .start = ReaderOptions::Start::kOldest},
      false);
  readers.emplace_back(poll, 3, ReaderOptions{.pin = false}, true);
  while (started.load() < 4) std::this_thread::yield();
  uint64_t failed_sends = 0;
  for (uint64_t i = 3; i < kMessages; ++i) {
    std::span<std::byte> loan = (*pub)->Loan();
    if (!loan.empty()) std::memset(loan.data(), static_cast<int>(i), 8);
    failed_sends += (*pub)->Send(8).status != SendStatus::kOk;
  }
  done.store(true);
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(failed_sends, 0u);
  for (int k = 0; k < 4; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(results[k].corrupt, 0u) << results[k].what;
    if (k < 3) {
      // Next: every message after the start received or counted missed.
      EXPECT_EQ(results[k].start + results[k].received + results[k].missed,
                kMessages);
    }
    EXPECT_GT(results[k].received, 0u);
  }
  EXPECT_FALSE((*c)->corrupt()) << (*c)->corruption();
}

}  // namespace
}  // namespace tether::shm
