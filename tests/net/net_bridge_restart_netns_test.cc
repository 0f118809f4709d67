// The sending bridge's down time, between two hosts (tests/net/two_hosts.h,
// fixture: tests/net/net_bridge_fixture.h): host a's bridge killed and
// started again, stopped until its channel overflowed, its cursor file
// removed under it or impossible to keep. What was sent while it was not
// running never crosses and is counted exactly once, from its cursor, or
// it says that it cannot count it.
// Tagged no-sandbox: namespaces and veths need real root. Skipped when not
// root. Every wait is bounded; nothing asserts on timing.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/bridge_status.capnp.h"
#include "net/forward_cursor.h"
#include "shm/channel.h"
#include "tests/net/net_bridge_fixture.h"
#include "tests/net/two_hosts.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::net {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::Collector;
using testing::kLong;
using testing::NetBridgeTest;
using testing::ReadFile;
using testing::TmpDir;
using testing::WaitFor;

// The sending bridge is killed (SIGKILL: no chance to say anything) and
// started again, as a launcher restarts a crashed node: what was sent while
// it was down never crosses, and it says exactly how many, from where its
// last run stopped; the receiving side hears of them with the first frame
// it can get. Killed after it forwarded some messages, or in its first run
// before it forwarded any (its watcher's start is then the position).
class NetBridgeRestartTest : public NetBridgeTest,
                             public ::testing::WithParamInterface<bool> {};

TEST_P(NetBridgeRestartTest, MessagesSentWhileTheSendingBridgeWasDownAreCounted) {
  const bool forward_first = GetParam();
  std::unique_ptr<transport::ChannelHandle> a;
  std::unique_ptr<transport::ChannelHandle> b =
      ForwardScan(&a, {"/robot/scan", "out", "reliable"});
  ASSERT_NE(b, nullptr);
  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;
  uint64_t next = 0;
  if (forward_first) {
    ASSERT_TRUE(PublishUntilMoreThan(**pub, &next, sent, got, 0));
    // Everything sent so far crossed (else the kill would catch one in
    // flight, and that one would rightly be counted too).
    ASSERT_TRUE(WaitFor([&] { return got.Has(next - 1); }, kLong));
  }

  ASSERT_TRUE(KillBridge(0));
  constexpr uint64_t kWhileDown = 7;
  const uint64_t down_from = next;
  Publish(**pub, next, next + kWhileDown, sent);
  next += kWhileDown;

  // The new run's log says "forwarding" once its out watcher exists: from
  // then on every message is its to forward. The 7 sent before are not.
  const std::string log =
      absl::StrCat(TmpDir(), "/bridge-a-", ::getpid(), ".log");
  std::filesystem::remove(log);
  StartBridge(0, {{"/robot/scan", "out", "reliable"}});
  ASSERT_TRUE(WaitFor(
      [&] { return ReadFile(log).find("forwarding") != std::string::npos; },
      kLong));
  if (forward_first) {
    // A burst at once: the new run writes frames before b's reader has
    // matched its writer (DDS volatile data: they reach nobody), and b
    // must count them from the stream they continue.
    Publish(**pub, next, next + 100, sent, std::chrono::microseconds(200));
    next += 100;
  }
  // Counted as soon as the new run opened its cursor, before any new
  // message (it waited for the next one).
  EXPECT_TRUE(WaitFor(
      [&] {
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return out && out->lost_at_sender == kWhileDown;
      },
      kLong))
      << "the gap was not counted before the next message";
  ASSERT_TRUE(PublishUntilMoreThan(**pub, &next, sent, got, got.count()))
      << "nothing crossed after the restart";
  ASSERT_TRUE(WaitFor(
      [&] {
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return out && out->lost_at_sender == kWhileDown;
      },
      kLong));
  auto out = Status(0, "/robot/scan", status::Direction::OUT);
  ASSERT_TRUE(out);
  EXPECT_THAT(out->detail,
              HasSubstr("7 messages were sent on /robot/scan while this "
                        "bridge was not running"));
  for (uint64_t i = down_from; i < down_from + kWhileDown; ++i) {
    EXPECT_FALSE(got.Has(i)) << i << " was sent while no bridge ran";
  }
  EXPECT_EQ(got.missed(), 0u);
  if (!forward_first) {
    // b never had a frame of the first run: the new run's first frame it
    // gets starts the stream for it (a late joiner), told the gap when
    // written once b's reader matched; one lost in the instant after
    // matching takes the count with it, never adds to it.
    (void)WaitFor(
        [&] {
          auto in = Status(1, "/robot/scan", status::Direction::IN);
          return in && in->lost_at_sender == kWhileDown;
        },
        milliseconds(3000));
    auto in = Status(1, "/robot/scan", status::Direction::IN);
    ASSERT_TRUE(in);
    EXPECT_LE(in->lost_at_sender, kWhileDown);
    return;
  }
  // b saw the first run's frames: the new run goes on with their stream
  // (its cursor keeps it), so every message sent is accounted for at b
  // exactly, also when the new run's first frames (and the gap they
  // carried) were written before b's reader matched and never arrived.
  const auto accounted = [&] {
    auto in = Status(1, "/robot/scan", status::Direction::IN);
    return in ? in->messages + in->lost_network + in->lost_at_sender +
                    in->dropped
              : 0;
  };
  EXPECT_TRUE(WaitFor([&] { return accounted() >= next; }, kLong))
      << accounted() << " of " << next << " accounted for at b";
  // Settled (statuses come every 100 ms): not one more, not one less.
  std::this_thread::sleep_for(milliseconds(500));
  EXPECT_EQ(accounted(), next) << "accounted for at b";
  auto in = Status(1, "/robot/scan", status::Direction::IN);
  ASSERT_TRUE(in);
  EXPECT_GE(in->lost_at_sender, kWhileDown);
  EXPECT_EQ(in->duplicates, 0u);
}

INSTANTIATE_TEST_SUITE_P(AfterForwarding, NetBridgeRestartTest,
                         ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& p) {
                           return p.param ? "AfterItForwarded"
                                          : "InItsFirstRunBeforeItForwarded";
                         });

// The sending bridge's first run is stopped (SIGSTOP) before it forwarded
// anything and its channel (depth 8) overflows: when it goes on, the
// messages overwritten are counted once, as overwritten, not a second time
// as sent while it was down; sent = crossed + LOST SRC, exactly.
TEST_F(NetBridgeTest, AnOverflowBeforeTheFirstForwardIsCountedOnce) {
  std::unique_ptr<transport::ChannelHandle> a;
  std::unique_ptr<transport::ChannelHandle> b =
      ForwardScan(&a, {"/robot/scan", "out", "reliable"}, /*depth=*/8);
  ASSERT_NE(b, nullptr);
  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;
  ASSERT_EQ(::kill(pid_[0], SIGSTOP), 0);
  constexpr uint64_t kSent = 40;
  Publish(**pub, 0, kSent, sent);
  ASSERT_EQ(::kill(pid_[0], SIGCONT), 0);
  ASSERT_TRUE(WaitFor(
      [&] {
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return out && got.Has(kSent - 1) &&
               out->lost_at_sender + got.count() >= kSent;
      },
      kLong));
  // Settled: nothing more is on its way.
  std::this_thread::sleep_for(milliseconds(500));
  auto out = Status(0, "/robot/scan", status::Direction::OUT);
  ASSERT_TRUE(out);
  EXPECT_GT(out->lost_at_sender, 0u) << "the channel did not overflow";
  EXPECT_EQ(out->lost_at_sender + got.count(), kSent)
      << "crossed " << got.count() << ", LOST SRC " << out->lost_at_sender;
  EXPECT_THAT(out->detail, Not(HasSubstr("while this bridge was not running")));
}

// The cursor file removed under the running bridge (its stores would go to
// a file no next run reads): the bridge sees it at its next status, makes
// it again at its position and says so; killed and restarted afterwards,
// the next run counts what was sent while it was down.
TEST_F(NetBridgeTest, ACursorRemovedUnderTheBridgeIsMadeAgainAndStillCounts) {
  const std::string cursor = shm::Channel::CompanionPathFor(
      options_[0], "/robot/scan", ForwardCursor::kKind, "a");
  std::unique_ptr<transport::ChannelHandle> a;
  std::unique_ptr<transport::ChannelHandle> b =
      ForwardScan(&a, {"/robot/scan", "out", "reliable"});
  ASSERT_NE(b, nullptr);
  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;
  uint64_t next = 0;
  ASSERT_TRUE(PublishUntilMoreThan(**pub, &next, sent, got, 0));
  ASSERT_TRUE(WaitFor([&] { return got.Has(next - 1); }, kLong));
  ASSERT_TRUE(std::filesystem::remove(cursor)) << cursor;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return out && out->detail.find("was removed: made again at its "
                                       "position") != std::string::npos;
      },
      kLong));
  EXPECT_TRUE(std::filesystem::exists(cursor));
  Publish(**pub, next, next + 3, sent);  // forwarded, the new file moves
  next += 3;
  ASSERT_TRUE(WaitFor([&] { return got.Has(next - 1); }, kLong));

  ASSERT_TRUE(KillBridge(0));
  constexpr uint64_t kWhileDown = 5;
  Publish(**pub, next, next + kWhileDown, sent);
  next += kWhileDown;
  StartBridge(0, {{"/robot/scan", "out", "reliable"}});
  EXPECT_TRUE(WaitFor(
      [&] {
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return out && out->lost_at_sender == kWhileDown;
      },
      kLong))
      << "the gap after the removal was not counted";
}

// The cursor cannot be kept (here a directory is where its file goes; a
// full filesystem or another user's file would do the same): the bridge
// forwards as ever and says, in the channel's detail and on stderr, that
// messages sent while it is not running will not be counted.
TEST_F(NetBridgeTest, ABridgeWithoutItsCursorForwardsAndSaysWhatItWillNotCount) {
  const std::string cursor = shm::Channel::CompanionPathFor(
      options_[0], "/robot/scan", ForwardCursor::kKind, "a");
  std::unique_ptr<transport::ChannelHandle> a;
  std::unique_ptr<transport::ChannelHandle> b = ForwardScan(
      &a, {"/robot/scan", "out", "reliable"}, /*depth=*/1024, [&] {
        EXPECT_TRUE(std::filesystem::create_directory(cursor)) << cursor;
      });
  ASSERT_NE(b, nullptr);
  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;
  uint64_t next = 0;
  ASSERT_TRUE(PublishUntilMoreThan(**pub, &next, sent, got, 0));
  auto out = Status(0, "/robot/scan", status::Direction::OUT);
  ASSERT_TRUE(out);
  EXPECT_THAT(out->detail,
              HasSubstr("messages sent while this bridge is not running will "
                        "not be counted"));
  EXPECT_THAT(out->detail, HasSubstr("is not a regular file: remove it"));
  EXPECT_THAT(ReadFile(absl::StrCat(TmpDir(), "/bridge-a-", ::getpid(),
                                    ".log")),
              HasSubstr("will not be counted"));
  std::filesystem::remove(cursor);
}

}  // namespace
}  // namespace tether::net
