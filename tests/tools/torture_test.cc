// Torture: a demo-sized stack under load while its processes are SIGKILLed
// 10,000 times (--kills=N), and a second stack whose channels get random
// bytes written into their shared memory meanwhile.
//
// Stack A, started by the real `tether launch`: four source channels, each
// with two publisher processes, a pinned reader that is killed and
// replaced, and a checker reader that is never killed; three event-loop
// nodes of the launcher (this binary in --torture-node mode: a raw watcher
// on a source channel, a raw sender on its own channel) which the launcher
// restarts after each kill; a checker on each node's channel. Kills pick
// publishers, pinned readers and the launcher's nodes at random.
//
// Stack B, another instance: four channels, each with a publisher and a
// pinned checking reader that stop at the first error tether reports. A
// thread writes random bytes into the data files of three of them (the
// validated header fields, the tail, ring entries, slot states, publisher
// registrations: the words tether's protocol reads), the fourth is left
// alone.
//
// Afterwards: no process is stuck (each stops within a deadline), every
// stack-A channel and B's untouched channel audit clean (every slot
// accounted for, nothing loaned or pinned once swept, CheckConsistency OK),
// every checker's count adds up exactly (delivered + counted missed = every
// index committed since it started, order and payload intact), what the
// publishers counted as sent is what was committed (less at most one per
// killed publisher: killed between commit and count), and every corrupted
// channel whose readers saw anything wrong was reported by tether (a reader
// or publisher got kCorrupt/kNoLoan, or the channel fails its audit);
// damage nobody reported fails the test. Prints the figures.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/shm_test_util.h"
#include "tests/shm/stress_workers.h"
#include "tests/tools/launch_test_util.h"
#include "tests/tools/run_tether.h"
#include "tests/tools/torture_workers.h"

namespace tether {
namespace {

namespace st = shm::testing;
using Clock = std::chrono::steady_clock;
using st::KillAndReap;
using st::Spawn;
using torture::Board;
using torture::ChannelBoard;
using torture::ChildrenOf;
using torture::Corrupt;
using torture::kNodeOutputs;
using torture::kNodes;
using torture::kSourceNames;
using torture::kSources;
using torture::PublisherLoop;
using torture::ReapBy;
using torture::StackConfig;
using torture::TolerantReader;

int g_kills = 10'000;

TEST(Torture, KilledProcessesAndCorruptedChannelsLeaveNothingSilent) {
  st::ScopedRoot root_a, root_b;
  root_a.options().instance = "torture";
  root_b.options().instance = "torture_b";
  Board* board = Board::Create();
  ASSERT_NE(board, nullptr);
  const std::string dir = tools::testing::MakeTempDir();
  tools::testing::WriteFile(dir + "/stack.json", StackConfig());

  // Stack A: the launcher creates the channels and runs the nodes.
  const pid_t launcher = Spawn([&] {
    const std::string tether = tools::test::TetherPath();
    const std::string out = dir + "/launcher.log";
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(tether.c_str(), tether.c_str(), "launch",
            (dir + "/stack.json").c_str(), "--root", root_a.root().c_str(),
            "--instance", "torture", static_cast<char*>(nullptr));
    return 127;
  });
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(tools::testing::WaitUntil(
      [&] { return ChildrenOf(launcher).size() == kNodes; },
      std::chrono::seconds(30)))
      << tools::testing::ReadFile(dir + "/launcher.log");
  const shm::ChannelOptions& a = root_a.options();

  // Checkers first (never killed): they account for everything after.
  st::SharedBoard* checks = st::SharedBoard::Create();
  ASSERT_NE(checks, nullptr);
  std::vector<pid_t> checkers;
  std::vector<std::string> checked;
  for (int i = 0; i < kSources; ++i) checked.push_back(kSourceNames[i]);
  for (int i = 0; i < kNodes; ++i) checked.push_back(kNodeOutputs[i]);
  for (size_t i = 0; i < checked.size(); ++i) {
    checkers.push_back(Spawn([&, i] {
      return st::ReaderMain(a, checked[i], static_cast<int>(i), -1,
                            /*sleepy=*/i % 2 == 0, /*slow=*/false, checks,
                            static_cast<uint32_t>(100 + i));
    }));
  }
  ASSERT_TRUE(tools::testing::WaitUntil(
      [&] { return checks->ready.load() == static_cast<int>(checked.size()) ||
                   checks->errors.load() != 0; },
      std::chrono::seconds(10)));
  ASSERT_EQ(checks->errors.load(), 0) << checks->first_error;

  // Killable workers on stack A: two publishers and one pinned reader per
  // source channel (killed readers report into slots 16+).
  std::vector<pid_t> publishers(2 * kSources), readers(kSources);
  auto start_publisher = [&](int k) {
    const int ch = k / 2;
    publishers[k] = Spawn([&, ch] {
      return PublisherLoop(a, kSourceNames[ch], board, &board->a[ch], false);
    });
  };
  auto start_reader = [&](int ch) {
    readers[ch] = Spawn([&, ch] {
      return st::ReaderMain(a, kSourceNames[ch], 16 + ch, -1, ch % 2 == 1,
                            /*slow=*/true, checks,
                            static_cast<uint32_t>(::getpid()));
    });
  };
  for (int k = 0; k < 2 * kSources; ++k) start_publisher(k);
  for (int ch = 0; ch < kSources; ++ch) start_reader(ch);

  // Stack B: per channel a publisher and a checking reader. A channel
  // found corrupt (a worker was told so, or its audit fails) is counted,
  // removed and made again with new workers; damage a checker saw that
  // tether did not report fails the test.
  const shm::ChannelOptions& b = root_b.options();
  const shm::QueueParams b_params{.slot_size = 256, .queue_depth = 16,
                                  .max_publishers = 2, .max_pinned = 2};
  std::vector<std::string> b_paths(kSources);
  std::vector<pid_t> b_reader(kSources), b_publisher(kSources);
  std::vector<int> pending(kSources, 0);  // corruptions since made
  // Detections: a worker's call said so (kCorrupt, kNoLoan, a failed
  // open), or only the audit (CheckConsistency, what tools run) found it.
  int corruptions = 0, detections = 0, told_by_call = 0, b_stuck = 0;
  std::map<std::string, int> hit;
  auto make_b = [&](int i) {
    auto c = shm::Channel::OpenOrCreate(b, kSourceNames[i], b_params);
    if (!c.ok()) return false;
    b_paths[i] = (*c)->path();
    ChannelBoard* cb = &board->b[i];
    cb->~ChannelBoard();
    new (cb) ChannelBoard();
    b_reader[i] = Spawn([&, i] {
      return TolerantReader(b, kSourceNames[i], board, &board->b[i]);
    });
    b_publisher[i] = Spawn([&, i] {
      return PublisherLoop(b, kSourceNames[i], board, &board->b[i], true);
    });
    pending[i] = 0;
    return true;
  };
  for (int i = 0; i < kSources; ++i) ASSERT_TRUE(make_b(i));
  // Whether tether has reported channel i's corruption.
  auto reported_b = [&](int i) {
    if (board->b[i].reported.load() != 0) return true;
    auto c = shm::Channel::Open(b, kSourceNames[i]);
    return !c.ok() || (*c)->corrupt() || !(*c)->CheckConsistency().ok();
  };
  std::mt19937_64 corrupt_rng(12345);
  auto corrupt_step = [&] {
    const int ch = static_cast<int>(corrupt_rng() % (kSources - 1));
    if (pending[ch] > 0 && reported_b(ch)) {
      ++detections;
      if (board->b[ch].reported.load() != 0) ++told_by_call;
      // Workers still running must still be making progress (not stuck
      // inside a tether call on the corrupt memory); then they go.
      ChannelBoard& cb = board->b[ch];
      const uint64_t r0 = cb.reader_beat.load(), p0 = cb.publisher_beat.load();
      const bool moving = tools::testing::WaitUntil(
          [&] {
            return (cb.reader_done.load() || cb.reader_beat.load() != r0) &&
                   (cb.publisher_done.load() || cb.publisher_beat.load() != p0);
          },
          std::chrono::seconds(5));
      if (!moving) {
        ++b_stuck;
        ADD_FAILURE() << kSourceNames[ch] << ": a stack-B worker is stuck";
      }
      KillAndReap(b_reader[ch]);
      KillAndReap(b_publisher[ch]);
      EXPECT_EQ(board->b[ch].damage.load(), 0)
          << "reported, but only after damage was seen: " << board->b[ch].what;
      (void)shm::Channel::Remove(b, kSourceNames[ch]);
      EXPECT_TRUE(make_b(ch));
      return;
    }
    EXPECT_EQ(board->b[ch].damage.load(), 0)
        << "damage tether did not report: " << board->b[ch].what;
    if (const char* what = Corrupt(b_paths[ch], corrupt_rng)) {
      ++hit[what];
      ++corruptions;
      ++pending[ch];
    }
  };

  // The kills.
  std::mt19937 rng(2026);
  int kills = 0, publisher_kills = 0, reader_kills = 0, node_kills = 0;
  const auto started = Clock::now();
  while (kills < g_kills && checks->errors.load() == 0) {
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 35) {
      const int k = static_cast<int>(rng() % publishers.size());
      KillAndReap(publishers[k]);
      board->a[k / 2].publisher_kills.fetch_add(1);
      start_publisher(k);
      ++publisher_kills;
    } else if (kind < 65) {
      const int ch = static_cast<int>(rng() % readers.size());
      KillAndReap(readers[ch]);
      start_reader(ch);
      ++reader_kills;
    } else {
      const std::vector<pid_t> nodes = ChildrenOf(launcher);
      if (nodes.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;  // all restarting
      }
      ::kill(nodes[rng() % nodes.size()], SIGKILL);  // the launcher reaps
      ++node_kills;
    }
    ++kills;
    if (kills % 3 == 0) corrupt_step();
    if (kills % 1000 == 0) {
      std::printf("torture: %d kills in %.1f s\n", kills,
                  std::chrono::duration<double>(Clock::now() - started).count());
      std::fflush(stdout);
    }
    timespec ts{0, static_cast<long>(rng() % 1'000'000)};
    ::nanosleep(&ts, nullptr);
  }
  const double kill_seconds =
      std::chrono::duration<double>(Clock::now() - started).count();

  // Stop everything; whatever does not stop in time is stuck.
  int stuck = 0, status = 0;
  board->stop = 1;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (pid_t p : publishers) {
    if (!ReapBy(p, deadline, &status)) ++stuck;
    else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ::kill(launcher, SIGTERM);
  if (!ReapBy(launcher, deadline, &status)) ++stuck;
  else EXPECT_TRUE(WIFEXITED(status)) << status;
  for (pid_t p : readers) KillAndReap(p);
  board->drain = 1;
  checks->drain = 1;
  for (pid_t p : checkers) {
    if (!ReapBy(p, deadline, &status)) ++stuck;
    else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  for (int i = 0; i < kSources; ++i) {
    for (pid_t p : {b_reader[i], b_publisher[i]}) {
      if (!ReapBy(p, deadline, &status)) ++stuck;
      else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
  }
  stuck += b_stuck;
  EXPECT_EQ(stuck, 0) << "processes that did not stop within 20 s";
  EXPECT_EQ(checks->errors.load(), 0) << checks->first_error;
  EXPECT_GE(kills, g_kills);

  // Stack A: every channel audits clean and every count adds up.
  uint64_t messages = 0;
  for (size_t i = 0; i < checked.size(); ++i) {
    SCOPED_TRACE(checked[i]);
    auto c = shm::Channel::Open(a, checked[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    (void)(*c)->Sweep();
    const st::AuditResult audit = st::Audit(c->get(), /*expect_idle=*/true);
    EXPECT_TRUE(audit.ok()) << audit.ToString();
    EXPECT_TRUE((*c)->CheckConsistency().ok()) << (*c)->CheckConsistency();
    const uint64_t total = (*c)->Stats().next_queue_index;
    const st::ReaderReport& rep = checks->readers[i];
    EXPECT_EQ(rep.done.load(), 1);
    EXPECT_EQ(rep.end.load(), total);
    EXPECT_EQ(rep.start.load() + rep.received.load() + rep.missed.load(),
              total);
    if (i < kSources) {
      const ChannelBoard& cb = board->a[i];
      EXPECT_LE(cb.sent.load(), total);
      EXPECT_LE(total, cb.sent.load() + cb.publisher_kills.load());
      EXPECT_GT(total, 0u);
    }
    messages += total;
    std::printf("torture: %-16s %8llu messages, checker got %llu, missed %llu\n",
                checked[i].c_str(), static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(rep.received.load()),
                static_cast<unsigned long long>(rep.missed.load()));
  }

  // Stack B: each channel as it was left is reported or intact (every
  // count adds up, audit clean); the untouched one is intact.
  int reported_at_end = 0, intact_at_end = 0;
  for (int i = 0; i < kSources; ++i) {
    SCOPED_TRACE(kSourceNames[i]);
    const ChannelBoard& cb = board->b[i];
    if (reported_b(i)) {
      EXPECT_GT(pending[i], 0) << "an untouched channel reported";
      EXPECT_EQ(cb.damage.load(), 0) << cb.what;
      ++reported_at_end;
      continue;
    }
    EXPECT_EQ(cb.damage.load(), 0) << "damage tether did not report: " << cb.what;
    EXPECT_EQ(cb.reader_done.load(), 1);
    auto c = shm::Channel::Open(b, kSourceNames[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    (void)(*c)->Sweep();
    EXPECT_EQ(cb.end.load(), (*c)->Stats().next_queue_index);
    EXPECT_EQ(cb.start.load() + cb.received.load() + cb.missed.load(),
              cb.end.load());
    const st::AuditResult audit = st::Audit(c->get(), /*expect_idle=*/true);
    EXPECT_TRUE(audit.ok()) << audit.ToString();
    ++intact_at_end;
  }
  std::printf(
      "torture: %d kills (%d publishers, %d pinned readers, %d launcher "
      "nodes) in %.1f s; %llu messages on stack A's %zu channels; %d "
      "stuck\n",
      kills, publisher_kills, reader_kills, node_kills, kill_seconds,
      static_cast<unsigned long long>(messages), checked.size(), stuck);
  std::printf("torture: %d corruptions written into stack B (", corruptions);
  for (const auto& [what, n] : hit) std::printf(" %s %d", what.c_str(), n);
  std::printf(" ); tether reported a corrupt channel %d times (%d to a "
              "worker's call, %d by its audit; re-created each time); at the "
              "end %d reported, %d intact\n",
              detections, told_by_call, detections - told_by_call,
              reported_at_end, intact_at_end);
  EXPECT_GT(detections, 0);
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--torture-node") == 0) {
    return tether::torture::TortureNode(argv[2], argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--kills=", 8) == 0) {
      tether::g_kills = std::atoi(argv[i] + 8);
    }
  }
  return RUN_ALL_TESTS();
}
