// One test suite, run against every kind of EventLoop: the simulated loop
// (virtual time) and the io_uring loop with each wake backend the kernel
// supports. Ordering, timers, phased loops, watchers vs fetchers, loss
// reports, context and exit must behave the same.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "loop/event_loop.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "tests/loop/conformance_harness.h"
#include "tests/transport/framing_test.capnp.h"

namespace tether::loop {
namespace {

using ::testing::ElementsAre;
using testing::ConformanceTest;
using testing::Kind;
using testing::KindName;
using testing::Ms;
using testing::SendScalar;

TEST_P(ConformanceTest, OnRunComesFirstAndOnce) {
  EventLoop* loop = harness_->MakeLoop("node");
  std::vector<std::string> events;
  loop->OnRun([&] {
    events.push_back("on-run");
    EXPECT_EQ(loop->context().type, EventContext::Type::kOnRun);
  });
  loop->AddTimer([&] { events.push_back("timer"); })
      ->Schedule(loop->monotonic_now());
  harness_->RunFor(Ms(20));
  EXPECT_THAT(events, ElementsAre("on-run", "timer"));
}

TEST_P(ConformanceTest, WatcherGetsEveryMessageInOrderWithContext) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  ASSERT_TRUE(sender.ok()) << sender.status();
  std::vector<int64_t> got;
  uint64_t last_index = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader m, const MessageContext& c) {
                        EXPECT_EQ(loop->context().type,
                                  EventContext::Type::kWatcher);
                        ASSERT_NE(loop->context().message, nullptr);
                        EXPECT_EQ(loop->context().message->queue_index,
                                  c.queue_index);
                        EXPECT_EQ(c.missed, 0u);
                        if (!got.empty()) EXPECT_EQ(c.queue_index, last_index + 1);
                        EXPECT_GE(c.monotonic_receive_ns, c.monotonic_send_ns);
                        last_index = c.queue_index;
                        got.push_back(m.getI64());
                        if (!simulated() && got.size() == 5) harness_->Exit();
                      })
                  .ok());
  int64_t next = 0;
  loop->AddTimer([&] { SendScalar(sender->get(), next++); })
      ->Schedule(loop->monotonic_now() + Ms(1), Ms(2));
  // A real loop on a loaded or emulated machine may run late and skip sends
  // (counted by the timer): it runs until five messages arrived, the span
  // bounding a hang only; order and completeness are what is checked.
  harness_->RunFor(simulated() ? Ms(41) : Ms(5000));
  ASSERT_GE(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], int64_t(i));
  if (simulated()) EXPECT_EQ(got.size(), 21u);  // at 1, 3, ..., 41 ms (inclusive)
  EXPECT_EQ(loop->watcher_stats(0).received, got.size());
}

TEST_P(ConformanceTest, WatchersAcrossChannelsSeeMessagesInSendOrder) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto a = loop->MakeSender<Scalars>("/test/a");
  auto b = loop->MakeSender<Scalars>("/test/b");
  std::vector<int64_t> got;
  for (const char* ch : {"/test/a", "/test/b"}) {
    ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                        ch, [&](Scalars::Reader m, const MessageContext&) {
                          got.push_back(m.getI64());
                          if (got.size() == 3) harness_->Exit();
                        })
                    .ok());
  }
  // Sends at distinct times, alternating channels, until three arrived (the
  // span only bounds a hang: a loaded or emulated machine may be slow).
  int64_t n = 0;
  loop->AddTimer([&] {
        SendScalar((n % 3 == 1 ? b : a)->get(), n);
        ++n;
      })
      ->Schedule(loop->monotonic_now() + Ms(1), Ms(1));
  harness_->RunFor(Ms(5000));
  ASSERT_GE(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], int64_t(i));
}

TEST_P(ConformanceTest, OneShotAndPeriodicTimers) {
  EventLoop* loop = harness_->MakeLoop("node");
  const MonotonicTime start = loop->monotonic_now();
  int one_shot = 0, periodic = 0;
  MonotonicTime one_shot_due;
  loop->AddTimer([&] {
        ++one_shot;
        one_shot_due = loop->context().monotonic_event_time;
        EXPECT_EQ(loop->context().type, EventContext::Type::kTimer);
        EXPECT_GE(loop->monotonic_now(), one_shot_due);
      })
      ->Schedule(start + Ms(5));
  MonotonicTime last_due = start;
  TimerHandle* p = loop->AddTimer([&] {
    ++periodic;
    last_due = loop->context().monotonic_event_time;
  });
  p->Schedule(start + Ms(2), Ms(4));
  TimerHandle* disabled = loop->AddTimer([&] { ADD_FAILURE(); });
  disabled->Schedule(start + Ms(3));
  disabled->Disable();
  harness_->RunFor(Ms(40));
  EXPECT_EQ(one_shot, 1);
  EXPECT_EQ(one_shot_due, start + Ms(5));
  // Due at 2, 6, 10, ... ms: every due time up to the last one run was run
  // or counted missed (a late real loop skips, and counts). 10 of them in
  // 40 ms, or more when a loaded machine ran the loop past its end.
  const auto dues = (last_due - (start + Ms(2))) / Ms(4) + 1;
  EXPECT_EQ(((last_due - (start + Ms(2))) % Ms(4)).count(), 0);
  EXPECT_EQ(periodic + static_cast<int64_t>(p->stats().missed), dues);
  EXPECT_GE(dues, 10);
  // A real loop stalled by a loaded machine runs a late timer once for
  // several due times (counted missed above).
  EXPECT_GE(periodic, simulated() ? 10 : 1);
}

TEST_P(ConformanceTest, PhasedLoopRunsOnItsPhase) {
  EventLoop* loop = harness_->MakeLoop("node");
  std::vector<MonotonicTime> due;
  int cycles_total = 0;
  PhasedLoopHandle* h = loop->AddPhasedLoop(
      [&](int cycles) {
        EXPECT_EQ(loop->context().type, EventContext::Type::kPhasedLoop);
        due.push_back(loop->context().monotonic_event_time);
        cycles_total += cycles;
      },
      Ms(5), Ms(2));
  harness_->RunFor(Ms(52));
  ASSERT_GE(due.size(), simulated() ? 3u : 1u);
  for (MonotonicTime t : due) {
    EXPECT_EQ((t.time_since_epoch() % Ms(5)), Ms(2));
  }
  // Every phase point is either run or counted as missed.
  EXPECT_EQ(static_cast<uint64_t>(cycles_total),
            h->stats().runs + h->stats().missed);
  if (simulated()) EXPECT_EQ(due.size(), 11u);  // at 2, 7, ..., 52 ms
}

// A watcher's handle says where it starts: messages sent before it was
// made are not its own, and the first one it delivers has that index.
TEST_P(ConformanceTest, AWatcherStartsAtTheIndexItsHandleGives) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  ASSERT_TRUE(sender.ok()) << sender.status();
  for (int i = 0; i < 3; ++i) SendScalar(sender->get(), i);
  std::vector<uint64_t> indexes;
  std::vector<int64_t> got;
  auto watcher = loop->MakeWatcher<Scalars>(
      "/test/a", [&](Scalars::Reader m, const MessageContext& c) {
        indexes.push_back(c.queue_index);
        got.push_back(m.getI64());
        if (!simulated() && got.size() == 2) harness_->Exit();
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  EXPECT_EQ((*watcher)->start_index(), 3u);
  loop->AddTimer([&] {
        SendScalar(sender->get(), 3);
        SendScalar(sender->get(), 4);
      })
      ->Schedule(loop->monotonic_now() + Ms(1));
  harness_->RunFor(simulated() ? Ms(10) : Ms(5000));
  EXPECT_THAT(got, ElementsAre(3, 4));
  EXPECT_THAT(indexes, ElementsAre(3, 4));
}

TEST_P(ConformanceTest, LostMessagesAreReportedExactly) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  std::vector<int64_t> got;
  uint64_t missed = 0;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader m, const MessageContext& c) {
                        got.push_back(m.getI64());
                        missed += c.missed;
                        if (!simulated() && got.size() == 8) harness_->Exit();
                      })
                  .ok());
  // 24 sends in one callback into a depth-8 channel: the watcher runs after
  // it and finds the newest 8; the 16 before are lost, and said so. (A real
  // loop ends when it has them: an end timer could come due with the send
  // timer on a loaded machine and end the run before the watcher ran.)
  loop->AddTimer([&] {
        for (int i = 0; i < 24; ++i) SendScalar(sender->get(), i);
      })
      ->Schedule(loop->monotonic_now() + Ms(1));
  harness_->RunFor(simulated() ? Ms(10) : Ms(5000));
  EXPECT_THAT(got, ElementsAre(16, 17, 18, 19, 20, 21, 22, 23));
  EXPECT_EQ(missed, 16u);
  EXPECT_EQ(loop->watcher_stats(0).missed, 16u);
}

TEST_P(ConformanceTest, ACallbackThatOutlivesTheQueueReadsItsMessageIntact) {
  // The callback's message is pinned: while it runs, 24 sends into the
  // depth-8 channel evict it from the ring, and its slot must neither be
  // reused nor be counted as overwritten (which the loop reports as another
  // process clearing pins).
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  ASSERT_TRUE(sender.ok()) << sender.status();
  std::vector<int64_t> got;
  auto watcher = loop->MakeWatcher<Scalars>(
      "/test/a", [&](Scalars::Reader m, const MessageContext&) {
        const int64_t before = m.getI64();
        if (before == 0) {
          for (int i = 1; i <= 24; ++i) SendScalar(sender->get(), i);
        }
        EXPECT_EQ(m.getI64(), before);
        got.push_back(before);
        if (!simulated() && before == 24) harness_->Exit();
      });
  ASSERT_TRUE(watcher.ok()) << watcher.status();
  loop->AddTimer([&] { SendScalar(sender->get(), 0); })
      ->Schedule(loop->monotonic_now() + Ms(1));
  harness_->RunFor(simulated() ? Ms(20) : Ms(5000));
  ASSERT_FALSE(got.empty());
  EXPECT_EQ(got.front(), 0);
  EXPECT_EQ(got.back(), 24);
  EXPECT_EQ((*watcher)->stats().overwritten_while_read, 0u);
  EXPECT_EQ((*watcher)->stats().missed, 16u);
  EXPECT_FALSE((*watcher)->stats().corrupt);
}

TEST_P(ConformanceTest, FetcherPullsLatestAndNext) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  auto latest = loop->MakeFetcher<Scalars>("/test/a");
  auto next = loop->MakeFetcher<Scalars>("/test/a");
  ASSERT_TRUE(sender.ok() && latest.ok() && next.ok());
  std::vector<int64_t> latest_seen, next_seen;
  const MonotonicTime start = loop->monotonic_now();
  int64_t v = 0;
  loop->AddTimer([&] {
        SendScalar(sender->get(), v++);
        SendScalar(sender->get(), v++);
      })
      ->Schedule(start + Ms(1), Ms(4));
  loop->AddTimer([&] {
        transport::Message<Scalars> m;
        if ((*latest)->Latest(&m) == transport::ReceiveStatus::kOk) {
          latest_seen.push_back(m.root.getI64());
        }
        while ((*next)->Next(&m) == transport::ReceiveStatus::kOk) {
          next_seen.push_back(m.root.getI64());
        }
      })
      ->Schedule(start + Ms(3), Ms(4));
  harness_->RunFor(Ms(18));
  ASSERT_GE(latest_seen.size(), 1u);
  // Latest skips to the newest (odd values); Next sees everything in order.
  for (int64_t v : latest_seen) EXPECT_EQ(v % 2, 1);
  for (size_t i = 0; i < next_seen.size(); ++i) EXPECT_EQ(next_seen[i], int64_t(i));
  EXPECT_GE(next_seen.size(), 2 * latest_seen.size() - 1);
}

TEST_P(ConformanceTest, WrongTypeAndUnknownChannelFailAtSetup) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto wrong = loop->MakeWatcher<Sample>(
      "/test/a", [](Sample::Reader, const MessageContext&) {});
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(wrong.status().message()),
              ::testing::HasSubstr("Scalars"));
  auto missing = loop->MakeSender<Scalars>("/nope");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              ::testing::HasSubstr("/test/a"));
}

TEST_P(ConformanceTest, ExitFromACallbackStopsTheLoop) {
  EventLoop* loop = harness_->MakeLoop("node");
  int ticks = 0;
  const MonotonicTime start = harness_->Now();
  loop->AddTimer([&] { ++ticks; })
      ->Schedule(loop->monotonic_now() + Ms(1), Ms(1));
  loop->AddTimer([&] { harness_->Exit(); })
      ->Schedule(loop->monotonic_now() + Ms(5));
  harness_->RunFor(Ms(5000));
  EXPECT_LT(harness_->Now() - start, Ms(2000));
  EXPECT_LE(ticks, 5);
  EXPECT_GE(ticks, 1);
}

TEST_P(ConformanceTest, SendTimesFollowTheLoopClock) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  MonotonicTime sent_at;
  int64_t send_ns = -1;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a", [&](Scalars::Reader, const MessageContext& c) {
                        send_ns = c.monotonic_send_ns;
                        EXPECT_GT(c.realtime_send_ns, 0);
                        harness_->Exit();
                      })
                  .ok());
  loop->AddTimer([&] {
        sent_at = loop->monotonic_now();
        SendScalar(sender->get(), 1);
      })
      ->Schedule(loop->monotonic_now() + Ms(3));
  // Ends when the message arrives; the bound only matters if it never does.
  harness_->RunFor(Ms(5000));
  ASSERT_GE(send_ns, 0);
  const int64_t at = static_cast<int64_t>(ToMonotonicNs(sent_at));
  if (simulated()) {
    EXPECT_EQ(send_ns, at);  // virtual time, exactly
  } else {
    // The same clock, stamped just after the loop read it: a thread
    // preempted in between (an emulated guest, a loaded host) may add
    // milliseconds, another clock would be off by far more.
    EXPECT_GE(send_ns, at);
    EXPECT_LT(Duration(send_ns - at), Ms(100));
  }
}

// A bridge's send gives an origin and no times (ros_bridge's tag): the
// times still come from the loop's clock, and the origin arrives.
TEST_P(ConformanceTest, ASendWithOnlyAnOriginIsStampedByTheLoopClock) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto raw = loop->MakeRawSender("/test/a");
  ASSERT_TRUE(raw.ok()) << raw.status();
  capnp::MallocMessageBuilder m;
  m.initRoot<Scalars>().setI64(5);
  const kj::Array<capnp::word> flat = capnp::messageToFlatArray(m);
  const std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(flat.begin()),
      flat.size() * sizeof(capnp::word));
  MonotonicTime sent_at;
  MessageContext got;
  bool arrived = false;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a", [&](Scalars::Reader r, const MessageContext& c) {
                        EXPECT_EQ(r.getI64(), 5);
                        got = c;
                        arrived = true;
                        harness_->Exit();
                      })
                  .ok());
  loop->AddTimer([&] {
        sent_at = loop->monotonic_now();
        transport::SendTimes tag;
        tag.origin = 0x5eed;
        EXPECT_EQ((*raw)->Publish(framed, &tag).status,
                  transport::PublishStatus::kOk);
      })
      ->Schedule(loop->monotonic_now() + Ms(3));
  harness_->RunFor(Ms(5000));
  ASSERT_TRUE(arrived);
  EXPECT_EQ(got.origin, 0x5eedu);
  const int64_t at = static_cast<int64_t>(ToMonotonicNs(sent_at));
  if (simulated()) {
    EXPECT_EQ(got.monotonic_send_ns, at);  // virtual time, not the real clock
  } else {
    EXPECT_GE(got.monotonic_send_ns, at);
    EXPECT_LT(Duration(got.monotonic_send_ns - at), Ms(100));
  }
  EXPECT_GT(got.realtime_send_ns, 0);
}

// One driver for both kinds: at an instant where a timer is due and a
// message has arrived, the timer runs first (step 1), then the message (step
// 2) -- by construction, not by each kind taking care.
TEST_P(ConformanceTest, TimerDueWithAMessageRunsBeforeIt) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto sender = loop->MakeSender<Scalars>("/test/a");
  std::string trace;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader m, const MessageContext&) {
                        trace += "M" + std::to_string(m.getI64()) + " ";
                        harness_->Exit();
                      })
                  .ok());
  TimerHandle* second = loop->AddTimer([&] { trace += "B "; });
  loop->AddTimer([&] {
        trace += "A ";
        SendScalar(sender->get(), 1);
        // Due at this very instant (already past on a real clock), like the
        // message just sent.
        second->Schedule(loop->context().monotonic_event_time);
      })
      ->Schedule(loop->monotonic_now() + Ms(2));
  harness_->RunFor(Ms(5000));
  EXPECT_EQ(trace, "A B M1 ");
}

// A watched channel whose ring turns corrupt stops its watcher (reported in
// its stats); the loop neither spins on it nor stops: other watchers and
// timers run on and Exit() still ends the run.
TEST_P(ConformanceTest, CorruptChannelStopsOnlyItsWatcher) {
  EventLoop* loop = harness_->MakeLoop("node");
  auto to_a = loop->MakeSender<Scalars>("/test/a");
  auto to_b = loop->MakeSender<Scalars>("/test/b");
  int on_a = 0;
  std::vector<int64_t> on_b;
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/a",
                      [&](Scalars::Reader, const MessageContext&) { ++on_a; })
                  .ok());
  ASSERT_TRUE(loop->MakeWatcher<Scalars>(
                      "/test/b",
                      [&](Scalars::Reader m, const MessageContext&) {
                        on_b.push_back(m.getI64());
                        if (on_b.size() == 5) harness_->Exit();
                      })
                  .ok());
  // Another handle on /test/a's file, to write garbage into its ring: the
  // entry the watcher reads next gets a tag that fits no queue index there.
  auto raw = shm::Channel::Open(harness_->channel_options(), "/test/a");
  ASSERT_TRUE(raw.ok()) << raw.status();
  const uint64_t next = (*raw)->Stats().next_queue_index;
  shm::internal::ChannelAccess::ring_entry(**raw, next)
      ->store(shm::internal::MakeEntry(next + 1, 0));
  int64_t n = 0;
  loop->AddTimer([&] {
        SendScalar(to_b->get(), n++);
      })
      ->Schedule(loop->monotonic_now() + Ms(1), Ms(1));
  harness_->RunFor(Ms(5000));
  EXPECT_EQ(on_a, 0);
  EXPECT_TRUE(loop->watcher_stats(0).corrupt);
  EXPECT_FALSE(loop->watcher_stats(1).corrupt);
  EXPECT_THAT(on_b, ElementsAre(0, 1, 2, 3, 4));
  (void)to_a;
}

TEST_P(ConformanceTest, TwoNodesTalkThroughAChannel) {
  EventLoop* talker = harness_->MakeLoop("talker");
  EventLoop* listener = harness_->MakeLoop("listener");
  auto sender = talker->MakeSender<Scalars>("/test/b");
  std::vector<int64_t> got;
  ASSERT_TRUE(listener->MakeWatcher<Scalars>(
                          "/test/b", [&](Scalars::Reader m, const MessageContext&) {
                            got.push_back(m.getI64());
                            if (got.size() == 3) harness_->Exit();
                          })
                  .ok());
  int64_t n = 0;
  talker->AddTimer([&] { SendScalar(sender->get(), n++); })
      ->Schedule(talker->monotonic_now() + Ms(2), Ms(2));
  // Until the third message arrives (a loaded or emulated machine may take
  // far longer than the 6 ms it needs); the span only bounds a hang.
  harness_->RunFor(Ms(5000));
  ASSERT_GE(got.size(), 3u);
  for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], int64_t(i));
}

INSTANTIATE_TEST_SUITE_P(AllKinds, ConformanceTest,
                         ::testing::Values(Kind::kSimulated, Kind::kUringFutex,
                                           Kind::kFutexWaitv),
                         KindName);

}  // namespace
}  // namespace tether::loop
