// Every wake port backend (forced), against real channels written by another
// process: no lost and no duplicate wakeups under random gaps (the
// publisher often waits for the loop to acknowledge its last message, so a
// lost wakeup shows as a hang, caught by timeouts), several channels in one
// port, and Wake() from this thread and from others.
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loop/clock.h"
#include "loop/wake_port.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/loop/loop_test_util.h"
#include "tests/loop/port_configs.h"

namespace tether::loop {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;
using testing::ChannelSleepHooks;
using testing::MakeShared;
using testing::ScopedRoot;
using testing::Subscription;
using testing::WakePortTest;

// --- publisher process ---------------------------------------------------------

constexpr int kMaxChannels = 4;

struct Board {
  std::atomic<int> go{0};
  std::atomic<uint64_t> acked{0};  // messages the loop has received, all channels
  std::atomic<int> error{0};
  char error_text[256] = {};
};

struct Payload {
  uint64_t sequence;  // over all channels
  uint32_t channel;
  uint32_t per_channel;  // n-th message on this channel
};

void Fail(Board* board, const char* text) {
  if (board->error.exchange(1) == 0) {
    std::snprintf(board->error_text, sizeof(board->error_text), "%s", text);
  }
}

void SleepNs(int64_t ns) {
  if (ns <= 0) return;
  if (ns < 30'000) {  // short gaps: spin, so the loop is caught mid-protocol
    const MonotonicTime end = MonotonicNow() + Duration(ns);
    while (MonotonicNow() < end) {
    }
    return;
  }
  timespec ts = {0, static_cast<long>(ns)};
  ::nanosleep(&ts, nullptr);
}

// Sends `count` messages spread at random over `channels`, with random gaps
// of 0..200 us; after about 40% of them waits until the loop acknowledged
// everything so far (5 s, else a lost wakeup). Runs in a forked child.
int PublisherMain(const shm::ChannelOptions& options, int channels,
                  uint64_t count, Board* board, uint32_t seed) {
  std::vector<std::unique_ptr<shm::Channel>> opened;
  std::vector<std::unique_ptr<shm::Publisher>> publishers;
  for (int c = 0; c < channels; ++c) {
    auto channel = shm::Channel::Open(options, "wake" + std::to_string(c));
    if (!channel.ok()) {
      Fail(board, "child: Channel::Open failed");
      return 1;
    }
    auto publisher = shm::Publisher::Create(channel->get());
    if (!publisher.ok()) {
      Fail(board, "child: Publisher::Create failed");
      return 1;
    }
    opened.push_back(std::move(*channel));
    publishers.push_back(std::move(*publisher));
  }
  while (board->go.load() == 0) ::usleep(100);
  std::mt19937 rng(seed);
  std::vector<uint32_t> per_channel(channels, 0);
  for (uint64_t i = 0; i < count; ++i) {
    const uint32_t c = static_cast<uint32_t>(rng() % channels);
    Payload payload{i, c, per_channel[c]++};
    std::span<std::byte> loan = publishers[c]->Loan();
    if (loan.size() < sizeof(payload)) {
      Fail(board, "child: no loan");
      return 1;
    }
    std::memcpy(loan.data(), &payload, sizeof(payload));
    if (publishers[c]->Send(sizeof(payload)).status != shm::SendStatus::kOk) {
      Fail(board, "child: send failed");
      return 1;
    }
    if (rng() % 100 < 40) {
      const MonotonicTime give_up = MonotonicNow() + seconds(5);
      while (board->acked.load(std::memory_order_acquire) < i + 1) {
        if (MonotonicNow() > give_up) {
          char text[128];
          std::snprintf(text, sizeof(text),
                        "lost wakeup: message %llu not received within 5 s",
                        static_cast<unsigned long long>(i));
          Fail(board, text);
          return 1;
        }
        SleepNs(rng() % 3 == 0 ? 0 : 20'000);
      }
    }
    SleepNs(static_cast<int64_t>(rng() % 200'000));
  }
  return 0;
}

}  // namespace

// Runs a loop on `channels` channels (one port, one watch each) until
// `count` messages arrived; checks order, no duplicates, no loss, and that
// no 2 s wait timed out over a message sent long before (a lost wakeup).
void testing::WakePortTest::RunProcessTest(int channels, uint64_t count) {
  ScopedRoot root;
  const shm::QueueParams params{.slot_size = 64, .queue_depth = 4096,
                                .max_publishers = 2, .max_pinned = 2};
  std::vector<std::unique_ptr<shm::Channel>> chans;
  std::vector<std::unique_ptr<shm::Reader>> readers;
  std::vector<std::unique_ptr<Subscription>> subs;
  ChannelSleepHooks hooks;
  for (int c = 0; c < channels; ++c) {
    auto channel = shm::Channel::OpenOrCreate(root.options(),
                                              "wake" + std::to_string(c), params);
    ASSERT_TRUE(channel.ok()) << channel.status();
    auto reader = shm::Reader::Create(channel->get());
    ASSERT_TRUE(reader.ok()) << reader.status();
    subs.push_back(std::make_unique<Subscription>(channel->get(), reader->get()));
    hooks.Add(subs.back().get());
    chans.push_back(std::move(*channel));
    readers.push_back(std::move(*reader));
  }
  Board* board = MakeShared<Board>();
  ASSERT_NE(board, nullptr);

  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::_exit(PublisherMain(root.options(), channels, count, board,
                          static_cast<uint32_t>(::getpid())));
  }
  // The port (and a futex_waitv helper) only after fork: the child stays a
  // single-threaded copy.
  std::unique_ptr<WakePort> port = MakePort();
  if (port == nullptr) {
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return;
  }
  for (int c = 0; c < channels; ++c) {
    ASSERT_TRUE(port->Watch(chans[c]->wake_word(), 100 + c).ok());
  }
  board->go.store(1);

  std::vector<uint32_t> expected_per_channel(channels, 0);
  uint64_t received = 0;
  int lost = 0;
  int blocked_wakes = 0;
  std::string failure;
  bool child_done = false;
  int child_status = 0;
  const MonotonicTime give_up = MonotonicNow() + seconds(90);
  std::vector<bool> reported(channels, false);
  while (received < count && failure.empty() && board->error.load() == 0 &&
         MonotonicNow() < give_up) {
    std::fill(reported.begin(), reported.end(), false);
    const WaitResult r = port->Wait(
        MonotonicNow() + seconds(2), hooks, [&](uint64_t cookie) {
          if (cookie < 100 || cookie >= 100u + channels) {
            failure = "on_ready reported an unknown cookie";
            return;
          }
          if (reported[cookie - 100]) failure = "a cookie reported twice";
          reported[cookie - 100] = true;
        });
    if (r.ready > 0 && !r.spun && !r.pending_work) ++blocked_wakes;
    for (int c = 0; c < channels; ++c) {
      Subscription& sub = *subs[c];
      if (!reported[c] && !sub.has_pending()) continue;
      shm::MessageView view;
      while (sub.Next(&view) == shm::ReadStatus::kOk) {
        Payload p;
        std::memcpy(&p, view.data.data(), sizeof(p));
        if (p.channel != static_cast<uint32_t>(c) ||
            p.per_channel != expected_per_channel[c] || view.missed != 0) {
          failure = "message out of order, duplicated or lost on channel " +
                    std::to_string(c) + ": got #" +
                    std::to_string(p.per_channel) + ", expected #" +
                    std::to_string(expected_per_channel[c]);
          break;
        }
        ++expected_per_channel[c];
        if (r.timed_out &&
            MonotonicNow() - FromMonotonicNs(view.monotonic_send_ns) >
                seconds(1)) {
          ++lost;  // it waited through a whole timeout: nobody woke us
        }
        ++received;
        board->acked.store(received, std::memory_order_release);
      }
      if (sub.corrupt()) failure = "corrupt channel";
    }
    if (r.timed_out && !child_done) {
      child_done = ::waitpid(child, &child_status, WNOHANG) == child;
      if (child_done && received < count) failure = "the publisher died";
    }
  }
  if (!child_done) {
    ASSERT_EQ(::waitpid(child, &child_status, 0), child);
  }
  EXPECT_EQ(failure, "");
  EXPECT_EQ(board->error.load(), 0) << board->error_text;
  EXPECT_TRUE(WIFEXITED(child_status) && WEXITSTATUS(child_status) == 0)
      << "publisher status " << child_status;
  EXPECT_EQ(received, count);
  EXPECT_EQ(lost, 0) << "waits that timed out although a message waited";
  // The loop really slept and was woken many times (the test is not vacuous).
  EXPECT_GT(blocked_wakes, static_cast<int>(count / 20));
  for (int c = 0; c < channels; ++c) port->Unwatch(100 + c);
}

namespace {

TEST_P(WakePortTest, NoLostOrDuplicateWakeupsFromAPublisherProcess) {
  SKIP_UNLESS_SUPPORTED();
  RunProcessTest(/*channels=*/1, /*count=*/3000);
}

TEST_P(WakePortTest, SeveralChannelsInOnePortReportTheRightCookies) {
  SKIP_UNLESS_SUPPORTED();
  RunProcessTest(/*channels=*/3, /*count=*/3000);
}

// --- Wake() ---------------------------------------------------------------------

TEST_P(WakePortTest, WakeBeforeWaitMakesTheNextWaitReturnAtOnce) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  NoSleepHooks hooks;
  port->Wake();
  const MonotonicTime start = MonotonicNow();
  const WaitResult r =
      port->Wait(start + seconds(5), hooks, [](uint64_t) {});
  EXPECT_TRUE(r.woken);
  EXPECT_FALSE(r.timed_out);
  EXPECT_LT(MonotonicNow() - start, seconds(1));
  // Consumed: the next wait times out (a lost-wake check may end it first).
  const MonotonicTime deadline = MonotonicNow() + milliseconds(20);
  WaitResult again;
  do {
    again = port->Wait(deadline, hooks, [](uint64_t) {});
    EXPECT_FALSE(again.woken);
  } while (again.checked && !again.timed_out);
  EXPECT_TRUE(again.timed_out);
}

TEST_P(WakePortTest, WakeFromAnotherThreadIsNeverLost) {
  SKIP_UNLESS_SUPPORTED();
  std::unique_ptr<WakePort> port = MakePort();
  ASSERT_NE(port, nullptr);
  constexpr int kRounds = 2000;
  std::atomic<int> requested{0};
  std::atomic<int> seen{0};
  std::atomic<bool> waker_failed{false};
  std::thread waker([&] {
    std::mt19937 rng(7);
    for (int i = 1; i <= kRounds; ++i) {
      requested.store(i);
      if (rng() % 2 == 0) SleepNs(rng() % 50'000);
      port->Wake();
      // A wake that takes a whole second was lost and found by a timeout.
      const MonotonicTime give_up = MonotonicNow() + seconds(1);
      while (seen.load() < i) {
        if (MonotonicNow() > give_up) {
          waker_failed.store(true);
          return;
        }
        std::this_thread::yield();
      }
    }
  });
  NoSleepHooks hooks;
  int timeouts = 0;
  while (seen.load() < kRounds && !waker_failed.load() && timeouts < 3) {
    const WaitResult r =
        port->Wait(MonotonicNow() + seconds(2), hooks, [](uint64_t) {});
    if (r.woken) seen.store(requested.load());
    if (r.timed_out && !r.woken) ++timeouts;
  }
  waker.join();
  EXPECT_FALSE(waker_failed.load()) << "a Wake() was lost";
  EXPECT_EQ(seen.load(), kRounds);
  EXPECT_EQ(timeouts, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, WakePortTest,
                         ::testing::ValuesIn(testing::kPortConfigs),
                         testing::PortConfigName);

}  // namespace
}  // namespace tether::loop
