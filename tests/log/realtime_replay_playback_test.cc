// Real-time replay into shared memory, its playback: a range, looping with
// increasing send times and each round as long as its range; pause and step;
// rates outside the range refused and controls clamped; a long pause at the
// slowest rate waits instead of wrapping.
#include "log/realtime_replay.h"

#include <time.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/logger.h"
#include "tests/log/log_test_util.h"
#include "tests/log/replay_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

// Runs `replay` for `span` of wall time (or to its end).
absl::Status RunFor(RealtimeReplay& replay, std::chrono::nanoseconds span) {
  const auto until = std::chrono::steady_clock::now() + span;
  return replay.Run([&] { return std::chrono::steady_clock::now() > until; });
}

TEST_F(RealtimeReplayTest, PlaysARangeAndLoopsWithIncreasingTimes) {
  RealtimeReplayOptions o = Options();
  o.select = {"/a"};
  o.start_s = 0.02;
  o.end_s = 0.06;
  o.loop = true;
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_TRUE(replay.ok());
  ASSERT_TRUE((*replay)
                  ->Run([&] { return (*replay)->progress().round >= 2; })
                  .ok());
  const std::vector<Sent> got = Drain(root_.options(), "/a");
  // What the range holds depends on how the recording was scheduled (1 ms
  // sleeps on a loaded machine): take it from the log, not from the clock.
  const int64_t start = (*sent_)[0].context.monotonic_send_ns;
  std::vector<int64_t> in_range;
  for (const Sent& s : *sent_) {
    const int64_t t = s.context.monotonic_send_ns - start;
    if (t >= 20'000'000 && t <= 60'000'000) {
      in_range.push_back(s.context.monotonic_send_ns);
    }
  }
  ASSERT_FALSE(in_range.empty());
  // At least two whole rounds of the range.
  ASSERT_GE(got.size(), 2 * in_range.size());
  int64_t previous = 0;
  for (const Sent& s : got) {
    EXPECT_GT(s.context.monotonic_send_ns, previous);
    previous = s.context.monotonic_send_ns;
  }
  // The first round is the range, with the logged times.
  for (size_t i = 0; i < in_range.size(); ++i) {
    EXPECT_EQ(got[i].context.monotonic_send_ns, in_range[i]) << i;
  }
}

TEST_F(RealtimeReplayTest, PausedItPublishesOnlyWhatIsStepped) {
  RealtimeReplayOptions o = Options();
  o.select = {"/a"};
  o.start_paused = true;
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_TRUE(replay.ok());
  std::atomic<bool> stop{false};
  std::thread t([&] { (void)(*replay)->Run([&] { return stop.load(); }); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ((*replay)->progress().messages, 0u);
  for (int i = 0; i < 3; ++i) {
    (*replay)->Step();
    ASSERT_TRUE(WaitFor([&] { return (*replay)->progress().messages == uint64_t(i + 1); }));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ((*replay)->progress().messages, 3u);
  EXPECT_TRUE((*replay)->progress().paused);
  (*replay)->SetPaused(false);
  ASSERT_TRUE(WaitFor([&] { return (*replay)->progress().done; }));
  EXPECT_EQ((*replay)->progress().messages, 100u);
  stop = true;
  t.join();
}

TEST_F(RealtimeReplayTest, RatesOutsideTheRangeAreRefusedAndControlsClamp) {
  for (double rate : {1e-20, 1e-7, 0.0, -1.0, 2e6, 1e300}) {
    RealtimeReplayOptions o = Options();
    o.rate = rate;
    auto replay = RealtimeReplay::Create(*path_, o);
    ASSERT_FALSE(replay.ok()) << rate;
    EXPECT_THAT(std::string(replay.status().message()),
                HasSubstr("is out of range: it must be from 1e-06 to 1e+06"));
  }
  RealtimeReplayOptions o = Options();
  o.rate = kMinReplayRate;
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  (*replay)->SetRate(1e-30);
  EXPECT_EQ((*replay)->progress().rate, kMinReplayRate);
  (*replay)->SetRate(1e30);
  EXPECT_EQ((*replay)->progress().rate, kMaxReplayRate);
}

// At the slowest rate, a pause of 10^4 s in the log puts the next message
// 10^19 ns away: more than int64 holds. The delay saturates (the message
// waits) instead of wrapping into the past (which published it at once).
TEST(RealtimeReplaySlow, ALongPauseAtTheSlowestRateWaitsInsteadOfWrapping) {
  const std::string path = TempFile("replay-long-pause.mcap");
  {
    shm::testing::ScopedRoot root;
    transport::SchemaRegistry schemas;
    RegisterTestTypes(schemas);
    auto a = MakeChannel(root.options(), schemas, "/a", kScalarsType,
                         {.max_size = 128, .depth = 8});
    LoggerOptions o = LogTo(root.options(), path);
    o.from_oldest = true;
    auto logger = Logger::Start(o);
    ASSERT_TRUE(logger.ok()) << logger.status();
    auto pub = transport::RawPublisher::Create(a.get());
    // From now (the reader maps send times onto receive times), then 10^4 s
    // later.
    timespec mono, real;
    ::clock_gettime(CLOCK_MONOTONIC, &mono);
    ::clock_gettime(CLOCK_REALTIME, &real);
    for (int i = 0; i < 2; ++i) {
      const uint64_t pause = static_cast<uint64_t>(i) * 10'000'000'000'000;
      transport::SendTimes times;
      times.monotonic_ns =
          mono.tv_sec * 1'000'000'000ull + mono.tv_nsec + pause;
      times.realtime_ns = real.tv_sec * 1'000'000'000ull + real.tv_nsec + pause;
      PublishBytes(**pub, ScalarsMessage(i), &times);
    }
    ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 2; }));
    ASSERT_TRUE((*logger)->Stop().ok());
  }
  shm::testing::ScopedRoot into;
  RealtimeReplayOptions o;
  o.channels = into.options();
  o.rate = kMinReplayRate;
  auto replay = RealtimeReplay::Create(path, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_TRUE(RunFor(**replay, std::chrono::seconds(1)).ok());
  EXPECT_EQ((*replay)->progress().messages, 1u)
      << "the second message is due in 10^19 ns, not now";
}

// --loop lays rounds end to end on the wall clock, each as long as the
// range: /a's three messages come in the first 3 us of a 200 ms log (/b is
// at its end), so half a second holds about three rounds of /a, not
// thousands back to back with send times running ahead of the clock; and a
// range holding none of the selected messages waits out each round
// instead of spinning through them.
TEST(RealtimeReplayLoop, EachRoundLastsItsRange) {
  const std::string path = TempFile("loop-pace.mcap");
  WriteABLog(path, {1000, 2000, 3000, 200'001'000});
  for (const bool empty_range : {false, true}) {
    shm::testing::ScopedRoot into;
    RealtimeReplayOptions o;
    o.channels = into.options();
    o.select = {"/a"};
    o.loop = true;
    if (empty_range) o.start_s = 0.1;  // 100..200 ms: no /a message
    auto replay = RealtimeReplay::Create(path, o);
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_TRUE(RunFor(**replay, std::chrono::milliseconds(500)).ok());
    const ReplayProgress p = (*replay)->progress();
    EXPECT_LE(p.round, 8) << "empty range: " << empty_range;
    if (empty_range) {
      EXPECT_EQ(p.messages, 0u);
      EXPECT_GE(p.round, 1);
    } else {
      EXPECT_GE(p.messages, 6u);   // at least two rounds
      EXPECT_LE(p.messages, 24u);  // not more than eight
    }
  }
}

}  // namespace
}  // namespace tether::log
