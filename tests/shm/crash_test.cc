// Publishers and pinning readers SIGKILLed at random moments, hundreds of
// times (--kills=N), while a checker reader process verifies every message.
// Afterwards no process blocked, the accounting holds exactly, a sweep
// leaves every slot accounted for, and the channel works at full capacity.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/stress_workers.h"

namespace tether::shm {
namespace {

int g_kills = 300;

using testing::KillAndReap;
using testing::Spawn;

TEST(Crash, KilledPublishersAndReadersNeverBreakTheChannel) {
  testing::ScopedRoot root;
  const std::string name = "/crash";
  QueueParams params{.slot_size = 256, .queue_depth = 16, .max_publishers = 4,
                     .max_pinned = 4};
  auto channel = Channel::OpenOrCreate(root.options(), name, params);
  ASSERT_TRUE(channel.ok()) << channel.status();
  testing::SharedBoard* board = testing::SharedBoard::Create();
  ASSERT_NE(board, nullptr);
  const ChannelOptions& opts = root.options();

  // The checker is never killed: it sees the whole run.
  pid_t checker = Spawn([&] {
    return testing::ReaderMain(opts, name, 0, 0, /*sleepy=*/true,
                               /*slow=*/false, board, 1);
  });
  while (board->ready.load() < 1 && board->errors.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  uint32_t next_id = 0;
  auto spawn_publisher = [&] {
    uint32_t id = next_id++;
    return Spawn([&, id] {
      return testing::PublisherMain(opts, name, id, board, 100 + id);
    });
  };
  int next_victim_slot = 1;
  auto spawn_victim_reader = [&] {
    int slot = next_victim_slot++ % testing::kMaxWorkers;
    if (slot == 0) slot = 1;
    return Spawn([&, slot] {
      return testing::ReaderMain(opts, name, slot, -1, slot % 2 == 0,
                                 /*slow=*/true, board, 1000 + slot);
    });
  };
  // 3 publishers (of max 4) and 2 victim readers (+ checker = 3 of max 4
  // pins): a killed process's entry must be swept before its replacement
  // can always register.
  std::vector<pid_t> publishers = {spawn_publisher(), spawn_publisher(),
                                   spawn_publisher()};
  std::vector<pid_t> victims = {spawn_victim_reader(), spawn_victim_reader()};
  std::mt19937 rng(12345);
  for (int kill = 0; kill < g_kills && board->errors.load() == 0; ++kill) {
    std::this_thread::sleep_for(std::chrono::microseconds(200 + rng() % 3000));
    size_t pick = rng() % (publishers.size() + victims.size());
    if (pick < publishers.size()) {
      KillAndReap(publishers[pick]);
      publishers[pick] = spawn_publisher();
    } else {
      pick -= publishers.size();
      KillAndReap(victims[pick]);
      victims[pick] = spawn_victim_reader();
    }
  }
  board->stop = 1;
  for (pid_t p : publishers) KillAndReap(p);
  for (pid_t p : victims) KillAndReap(p);
  board->drain = 1;
  int status = 0;
  ASSERT_EQ(::waitpid(checker, &status, 0), checker);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(board->errors.load(), 0) << board->first_error;

  // Exact accounting by the checker: every committed index delivered or
  // counted missed; every message a publisher reported sent either
  // delivered or missed (a killed publisher's in-flight message was never
  // committed, so it is in neither count nor in `sent`).
  const testing::ReaderReport& rep = board->readers[0];
  const uint64_t total = (*channel)->Stats().next_queue_index;
  EXPECT_EQ(rep.end.load(), total);
  EXPECT_EQ(rep.received.load() + rep.missed.load(), total);
  uint64_t sent = 0, got = 0;
  for (uint32_t id = 0; id < next_id; ++id) {
    sent += board->sent[id].load();
    got += board->received_from[0][id].load();
    EXPECT_LE(board->received_from[0][id].load(),
              board->sent[id].load() + 1);
  }
  // `sent` is stored after Send returns, so a kill between commit and
  // store loses at most one count per killed publisher.
  EXPECT_LE(sent, total);
  EXPECT_GE(sent + static_cast<uint64_t>(g_kills), total);
  EXPECT_GT(total, static_cast<uint64_t>(g_kills));
  std::printf("%d kills, %u publisher incarnations, %llu messages, checker "
              "received %llu, missed %llu\n",
              g_kills, next_id, static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(rep.received.load()),
              static_cast<unsigned long long>(rep.missed.load()));

  // Recovery: one sweep reclaims everything the dead held.
  SweepReport sweep = (*channel)->Sweep();
  std::printf("final sweep: %d dead publishers, %d dead readers, %d slots "
              "freed, %d commits finished\n",
              sweep.dead_publishers, sweep.dead_readers, sweep.slots_freed,
              sweep.commits_finished);
  testing::AuditResult audit = testing::Audit(channel->get(), true);
  EXPECT_TRUE(audit.ok()) << audit.ToString();
  EXPECT_EQ((*channel)->Stats().publishers, 0);
  EXPECT_EQ((*channel)->Stats().pinning_readers, 0);

  // Full capacity again: every publisher and pin entry can be taken.
  std::vector<std::unique_ptr<Publisher>> pubs;
  for (uint32_t i = 0; i < params.max_publishers; ++i) {
    auto p = Publisher::Create(channel->get());
    ASSERT_TRUE(p.ok()) << p.status();
    pubs.push_back(std::move(*p));
  }
  std::vector<std::unique_ptr<Reader>> readers;
  for (uint32_t i = 0; i < params.max_pinned; ++i) {
    auto r = Reader::Create(channel->get());
    ASSERT_TRUE(r.ok()) << r.status();
    readers.push_back(std::move(*r));
  }
  for (uint64_t i = 0; i < 3 * params.pool_size(); ++i) {
    Publisher* p = pubs[i % pubs.size()].get();
    auto loan = p->Loan();
    ASSERT_FALSE(loan.empty());
    size_t n = testing::WritePattern(loan, 9999, i, 64);
    ASSERT_EQ(p->Send(n).status, SendStatus::kOk);
  }
  MessageView v;
  ASSERT_EQ(readers[0]->Latest(&v), ReadStatus::kOk);
  testing::PatternHeader h;
  ASSERT_TRUE(testing::CheckPattern(v.data, &h));
  EXPECT_EQ(h.sequence, 3 * params.pool_size() - 1);
  testing::SharedBoard::Destroy(board);
}

}  // namespace
}  // namespace tether::shm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--kills=", 8) == 0) {
      tether::shm::g_kills = std::atoi(argv[i] + 8);
    }
  }
  return RUN_ALL_TESTS();
}
