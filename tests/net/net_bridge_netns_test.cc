// The net bridge between two hosts: network namespaces joined by a veth pair
// (tests/net/two_hosts.h), one real net_bridge process in each, pinned to
// its veth end with unicast discovery, so DDS traffic crosses only that
// veth. Each host's tether channels are their own instance under one
// ScopedRoot; this test publishes into host a's instance and subscribes in
// host b's (shared memory is not namespaced, the bridges are the only link).
// Tagged no-sandbox: namespaces and veths need real root. Skipped when not
// root. Every wait is bounded; nothing asserts on timing.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "net/forward_cursor.h"
#include "tests/net/two_hosts.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::net {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::ChannelLine;
using testing::ReadChannelStatus;
using testing::TwoHosts;
using testing::WaitFor;

constexpr milliseconds kLong{20000};
constexpr uint32_t kMaxSize = 70 * 1024;

std::string BridgePath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "net/net_bridge";
  return absl::StrCat(srcdir, "/", workspace, "/net/net_bridge");
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A framed Sample: stamp = index, a blob of `size` bytes derived from it
// (00 and ff included), one segment.
std::vector<std::byte> MakeMessage(uint64_t index, size_t size) {
  // One segment: the stream framing tether channels carry.
  capnp::MallocMessageBuilder message(static_cast<unsigned>(size / 8 + 64));
  auto root = message.initRoot<Sample>();
  root.setStamp(index);
  auto blob = root.initBlob(static_cast<unsigned>(size));
  for (size_t i = 0; i < size; ++i) {
    blob[i] = static_cast<uint8_t>((index * 31 + i * 7) ^ (i >> 8));
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto* b = reinterpret_cast<const std::byte*>(flat.begin());
  return std::vector<std::byte>(b, b + flat.size() * sizeof(capnp::word));
}

uint64_t StampOf(std::span<const std::byte> bytes) {
  std::vector<capnp::word> words((bytes.size() + 7) / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  return reader.getRoot<Sample>().getStamp();
}

// Collects every message of one channel on its own thread.
class Collector {
 public:
  explicit Collector(std::unique_ptr<transport::ChannelHandle> channel)
      : channel_(std::move(channel)) {
    auto sub = transport::RawSubscriber::Create(channel_.get());
    EXPECT_TRUE(sub.ok()) << sub.status();
    sub_ = std::move(*sub);
    thread_ = std::thread([this] { Loop(); });
  }
  ~Collector() {
    done_ = true;
    thread_.join();
  }
  size_t count() {
    std::lock_guard lock(mu_);
    return received_.size();
  }
  bool Has(uint64_t stamp) {
    std::lock_guard lock(mu_);
    return stamps_.contains(stamp);
  }
  // (stamp, bytes) in arrival order.
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> Received() {
    std::lock_guard lock(mu_);
    return received_;
  }
  uint64_t missed() const { return missed_; }

 private:
  void Loop() {
    while (!done_) {
      transport::RawMessage m;
      const transport::ReceiveStatus s = sub_->Next(&m);
      if (s != transport::ReceiveStatus::kOk) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        continue;
      }
      missed_ += m.context.missed;
      std::vector<std::byte> bytes(m.bytes.begin(), m.bytes.end());
      const uint64_t stamp = StampOf(bytes);
      sub_->Release();
      std::lock_guard lock(mu_);
      stamps_.insert(stamp);
      received_.emplace_back(stamp, std::move(bytes));
    }
  }

  std::unique_ptr<transport::ChannelHandle> channel_;
  std::unique_ptr<transport::RawSubscriber> sub_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> missed_{0};
  std::mutex mu_;
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> received_;
  std::set<uint64_t> stamps_;
  std::thread thread_;
};

std::string SampleType() { return "tests/transport/framing_test.capnp:Sample"; }
std::string ScalarsType() {
  return "tests/transport/framing_test.capnp:Scalars";
}

struct ChannelSpec {
  std::string name;
  std::string direction;    // "out" / "in"
  std::string reliability;  // "" = default
  uint32_t history_depth = 0;
};

class NetBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<TwoHosts>> h = TwoHosts::Create();
    if (!h.ok()) GTEST_SKIP() << h.status();
    hosts_ = std::move(*h);
    for (int i = 0; i < 2; ++i) {
      options_[i] = root_.options();
      options_[i].instance = i == 0 ? "a" : "b";
    }
    schemas_.Register<Sample>();
    schemas_.Register<Scalars>();
  }

  void TearDown() override {
    if (HasFailure() && hosts_ != nullptr) {
      for (const std::string& log : logs_) {
        std::cerr << "--- " << log << " ---\n" << ReadFile(log);
      }
    }
    hosts_.reset();  // stops the bridges, deletes the namespaces
  }

  // Creates `name` in host `host`'s instance.
  std::unique_ptr<transport::ChannelHandle> MakeChannel(
      int host, const std::string& name, const std::string& type,
      uint32_t depth = 1024, uint32_t publishers = 2) {
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType(type);
    c.setMaxSize(kMaxSize);
    c.setFrequencyHz(1000);
    c.setQueueDepth(depth);
    c.setMaxPublishers(publishers);
    c.setMaxPinned(4);
    auto h = transport::ChannelHandle::Create(options_[host], c.asReader(),
                                              schemas_);
    EXPECT_TRUE(h.ok()) << h.status();
    return h.ok() ? std::move(*h) : nullptr;
  }

  // Starts the bridge of `host` ("a" or "b", or `named`) with these
  // channels; `loopback`: on the host's lo alone, no peers (bridges of one
  // host find each other).
  void StartBridge(int host, const std::vector<ChannelSpec>& channels,
                   const std::string& named = "", bool loopback = false) {
    const std::string name = !named.empty() ? named : host == 0 ? "a" : "b";
    std::string list;
    for (const ChannelSpec& c : channels) {
      absl::StrAppend(&list, list.empty() ? "" : ", ", "{\"name\": \"",
                      c.name, "\", \"direction\": \"", c.direction, "\"");
      if (!c.reliability.empty()) {
        absl::StrAppend(&list, ", \"reliability\": \"", c.reliability, "\"");
      }
      if (c.history_depth != 0) {
        absl::StrAppend(&list, ", \"historyDepth\": ", c.history_depth);
      }
      list += "}";
    }
    const std::string link =
        loopback ? std::string("\"interface\": \"lo\", ")
                 : absl::StrCat("\"interface\": \"", hosts_->interface(host),
                                "\", \"peers\": [\"", hosts_->address(1 - host),
                                "\"], ");
    const std::string config = absl::StrCat(
        "{\"name\": \"", name, "\", \"domain\": 7, \"partition\": \"test\", ",
        link, "\"leaseSeconds\": 1, ",
        "\"announceSeconds\": 0.2, \"channels\": [", list, "]}");
    const std::string path =
        absl::StrCat(TmpDir(), "/bridge-", name, "-", ::getpid(), ".json");
    std::ofstream(path) << config;
    const std::string log =
        absl::StrCat(TmpDir(), "/bridge-", name, "-", ::getpid(), ".log");
    logs_.push_back(log);
    pid_[host] = hosts_->Spawn(
        host,
        {BridgePath(), "--config", path, "--root", root_.root(), "--instance",
         options_[host].instance, "--status-interval", "0.1",
         "--print-interval", "0"},
        log);
    ASSERT_GT(pid_[host], 0);
  }

  std::optional<ChannelLine> Status(int host, const std::string& channel,
                                    status::Direction direction) {
    return ReadChannelStatus(options_[host], host == 0 ? "a" : "b", channel,
                             direction);
  }

  // Both ends of `channel` (a out -> b in) matched.
  bool Linked(const std::string& channel) {
    auto out = Status(0, channel, status::Direction::OUT);
    auto in = Status(1, channel, status::Direction::IN);
    return out && in && out->peers > 0 && in->peers > 0 &&
           in->state == status::State::ACTIVE;
  }

  std::unique_ptr<transport::ChannelHandle> Open(int host,
                                                 const std::string& name) {
    auto h = transport::ChannelHandle::Open(options_[host], name);
    return h.ok() ? std::move(*h) : nullptr;
  }

  // Publishes messages [from, to) on `pub`, one every `gap`; returns what
  // was sent by stamp.
  void Publish(transport::RawPublisher& pub, uint64_t from, uint64_t to,
               std::map<uint64_t, std::vector<std::byte>>& sent,
               std::chrono::microseconds gap = std::chrono::microseconds(1000)) {
    for (uint64_t i = from; i < to; ++i) {
      const size_t size = i % 10 == 3 ? 64 * 1024 : (i % 2 ? 1024 : 64);
      std::vector<std::byte> m = MakeMessage(i, size);
      ASSERT_EQ(pub.Publish(m).status, transport::PublishStatus::kOk);
      sent[i] = std::move(m);
      std::this_thread::sleep_for(gap);
    }
  }

  // SIGKILLs host `host`'s bridge (no chance to say anything) and waits
  // until it is gone. False if it does not exit within kLong.
  bool KillBridge(int host) {
    if (::kill(pid_[host], SIGKILL) != 0) return false;
    return WaitFor([&] { return hosts_->Exited(pid_[host]).has_value(); },
                   kLong);
  }

  // Publishes one message at a time, from *next on, until `got` holds more
  // than `count` (after a link or a bridge came up, the first messages may
  // not cross). False if that takes kLong.
  bool PublishUntilMoreThan(transport::RawPublisher& pub, uint64_t* next,
                            std::map<uint64_t, std::vector<std::byte>>& sent,
                            Collector& got, size_t count) {
    return WaitFor(
        [&] {
          Publish(pub, *next, *next + 1, sent);
          ++*next;
          return got.count() > count;
        },
        kLong);
  }

  // Host a forwards /robot/scan (made here, as `out` says) to host b: b's
  // copy once both bridges are linked, or null (a test failure).
  std::unique_ptr<transport::ChannelHandle> ForwardScan(
      std::unique_ptr<transport::ChannelHandle>* a, const ChannelSpec& out,
      uint32_t depth = 1024,
      const std::function<void()>& before_bridges = nullptr) {
    *a = MakeChannel(0, "/robot/scan", SampleType(), depth);
    if (*a == nullptr) return nullptr;
    if (before_bridges) before_bridges();
    StartBridge(1, {{"/robot/scan", "in"}});
    StartBridge(0, {out});
    std::unique_ptr<transport::ChannelHandle> b;
    EXPECT_TRUE(WaitFor(
        [&] { return (b = Open(1, "/robot/scan")) != nullptr; }, kLong));
    EXPECT_TRUE(WaitFor([&] { return Linked("/robot/scan"); }, kLong));
    return b;
  }

  shm::testing::ScopedRoot root_;
  shm::ChannelOptions options_[2];
  transport::SchemaRegistry schemas_;
  std::unique_ptr<TwoHosts> hosts_;
  pid_t pid_[2] = {0, 0};
  std::vector<std::string> logs_;
};


TEST_F(NetBridgeTest, ReliableChannelArrivesByteIdenticalWithNothingLost) {
  auto a = MakeChannel(0, "/robot/scan", SampleType());
  ASSERT_NE(a, nullptr);
  StartBridge(1, {{"/robot/scan", "in"}});
  StartBridge(0, {{"/robot/scan", "out", "reliable"}});
  // b creates its channel from what a announces.
  std::unique_ptr<transport::ChannelHandle> b;
  ASSERT_TRUE(WaitFor([&] { return (b = Open(1, "/robot/scan")) != nullptr; },
                      kLong));
  EXPECT_EQ(b->type_id(), a->type_id());
  EXPECT_EQ(b->max_size(), a->max_size());
  EXPECT_EQ(b->params().queue_depth, a->params().queue_depth);
  EXPECT_TRUE(std::equal(a->schema().begin(), a->schema().end(),
                         b->schema().begin(), b->schema().end()));
  ASSERT_TRUE(WaitFor([&] { return Linked("/robot/scan"); }, kLong));

  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;
  constexpr uint64_t kCount = 500;
  Publish(**pub, 0, kCount, sent);
  ASSERT_TRUE(WaitFor([&] { return got.count() >= kCount; }, kLong))
      << got.count() << " of " << kCount << " arrived";

  const auto received = got.Received();
  ASSERT_EQ(received.size(), kCount);
  for (size_t i = 0; i < received.size(); ++i) {
    ASSERT_EQ(received[i].first, i) << "out of order";
    ASSERT_EQ(received[i].second, sent[i]) << "message " << i << " differs";
  }
  EXPECT_EQ(got.missed(), 0u);
  // Statuses come every 100 ms: wait for both to have seen everything.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto in = Status(1, "/robot/scan", status::Direction::IN);
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return in && out && in->messages == kCount && out->messages == kCount;
      },
      kLong));
  auto in = Status(1, "/robot/scan", status::Direction::IN);
  auto out = Status(0, "/robot/scan", status::Direction::OUT);
  ASSERT_TRUE(in && out);
  EXPECT_EQ(out->messages, kCount);
  EXPECT_EQ(out->lost_at_sender, 0u);
  EXPECT_EQ(in->lost_network, 0u);
  EXPECT_EQ(in->lost_at_sender, 0u);
  EXPECT_EQ(in->dropped, 0u);
  EXPECT_EQ(in->duplicates, 0u);
}

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

// The link is cut for longer than the lease (the peers lose each other) and
// restored: the bridges find each other again and every message that did
// not arrive is counted, exactly.
class NetBridgeLinkCutTest : public NetBridgeTest,
                             public ::testing::WithParamInterface<const char*> {
};

TEST_P(NetBridgeLinkCutTest, LossIsCountedExactlyAcrossALinkCut) {
  const std::string reliability = GetParam();
  std::unique_ptr<transport::ChannelHandle> a;
  std::unique_ptr<transport::ChannelHandle> b =
      ForwardScan(&a, {"/robot/scan", "out", reliability, 16});
  ASSERT_NE(b, nullptr);
  Collector got(std::move(b));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  std::map<uint64_t, std::vector<std::byte>> sent;

  // A reliable DDS reader that is volatile starts at the writer's first
  // heartbeat after matching: a message sent in the instant after discovery
  // may never be delivered, and nobody can count it. So the stream starts
  // with the first message that crossed; counting is exact from there.
  uint64_t start = 0;
  ASSERT_TRUE(PublishUntilMoreThan(**pub, &start, sent, got, 0));
  ASSERT_TRUE(WaitFor([&] { return got.Has(start - 1); }, kLong));
  const uint64_t first = got.Received().front().first;
  Publish(**pub, start, first + 100, sent);
  ASSERT_TRUE(WaitFor([&] { return got.Has(first + 99); }, kLong));
  ASSERT_TRUE(hosts_->SetLink(false).ok());
  Publish(**pub, first + 100, first + 400, sent);
  // b gives a up once the lease runs out.
  ASSERT_TRUE(WaitFor(
      [&] {
        auto in = Status(1, "/robot/scan", status::Direction::IN);
        return in && in->peers == 0 && in->state == status::State::NO_PEER;
      },
      kLong));
  ASSERT_TRUE(hosts_->SetLink(true).ok());
  ASSERT_TRUE(WaitFor([&] { return Linked("/robot/scan"); }, kLong));
  // Keep sending until messages flow again, then 100 more.
  uint64_t next = first + 400;
  ASSERT_TRUE(PublishUntilMoreThan(**pub, &next, sent, got, 100));
  const uint64_t last = next + 100;
  Publish(**pub, next, last, sent);
  ASSERT_TRUE(WaitFor([&] { return got.Has(last - 1); }, kLong))
      << "the last message did not arrive";

  const auto received = got.Received();
  std::set<uint64_t> seen;
  uint64_t previous = 0;
  for (const auto& [stamp, bytes] : received) {
    ASSERT_EQ(bytes, sent[stamp]) << "message " << stamp << " differs";
    if (!seen.empty()) {
      ASSERT_GT(stamp, previous) << "out of order or repeated";
    }
    previous = stamp;
    seen.insert(stamp);
  }
  const uint64_t missing = last - first - seen.size();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto in = Status(1, "/robot/scan", status::Direction::IN);
        auto out = Status(0, "/robot/scan", status::Direction::OUT);
        return in && out && in->messages == seen.size() &&
               out->messages == last;
      },
      kLong));
  auto in = Status(1, "/robot/scan", status::Direction::IN);
  auto out = Status(0, "/robot/scan", status::Direction::OUT);
  ASSERT_TRUE(in && out);
  // Everything sent while the link was down and the peers apart is gone.
  EXPECT_GE(missing, 1u);
  EXPECT_EQ(in->lost_network, missing)
      << "received " << seen.size() << " of " << last;
  EXPECT_EQ(out->messages, last);
  EXPECT_EQ(in->messages + in->lost_network, out->messages - first);
  EXPECT_GE(in->reconnects, 1u);
  EXPECT_EQ(in->dropped, 0u);
  EXPECT_EQ(got.missed(), 0u);
  // The first 100 crossed before the cut, all of them.
  for (uint64_t i = first; i < first + 100; ++i) {
    EXPECT_TRUE(seen.contains(i)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Qos, NetBridgeLinkCutTest,
                         ::testing::Values("bestEffort", "reliable"));

TEST_F(NetBridgeTest, TypeMismatchIsRefusedNamingBothSides) {
  auto a = MakeChannel(0, "/robot/pose", SampleType());
  auto b = MakeChannel(1, "/robot/pose", ScalarsType());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  StartBridge(1, {{"/robot/pose", "in"}});
  StartBridge(0, {{"/robot/pose", "out"}});
  std::optional<ChannelLine> in;
  ASSERT_TRUE(WaitFor(
      [&] {
        in = Status(1, "/robot/pose", status::Direction::IN);
        return in && in->state == status::State::REFUSED;
      },
      kLong));
  EXPECT_THAT(in->detail, HasSubstr("bridge a on host"));
  EXPECT_THAT(in->detail, HasSubstr("bridge b on host"));
  EXPECT_THAT(in->detail, HasSubstr("Sample"));
  EXPECT_THAT(in->detail, HasSubstr("Scalars"));
  EXPECT_THAT(ReadFile(logs_[0]), HasSubstr("refused"));

  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok());
  std::map<uint64_t, std::vector<std::byte>> sent;
  Publish(**pub, 0, 20, sent);
  // b's channel keeps its own type and gets none of a's messages.
  auto b_again = Open(1, "/robot/pose");
  ASSERT_NE(b_again, nullptr);
  EXPECT_EQ(b_again->type_id(), b->type_id());
  std::this_thread::sleep_for(milliseconds(500));
  auto sub = transport::RawSubscriber::Create(b_again.get(),
                                              {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok());
  transport::RawMessage m;
  EXPECT_EQ((*sub)->Next(&m), transport::ReceiveStatus::kNothingNew);
  in = Status(1, "/robot/pose", status::Direction::IN);
  ASSERT_TRUE(in);
  EXPECT_EQ(in->messages, 0u);
  EXPECT_FALSE(hosts_->Exited(pid_[1]).has_value()) << "bridge b died";
}

TEST_F(NetBridgeTest, MessageForwardedIntoAHostIsNeverForwardedBack) {
  // Both hosts forward /robot/chat both ways.
  auto a = MakeChannel(0, "/robot/chat", SampleType());
  auto b = MakeChannel(1, "/robot/chat", SampleType());
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  StartBridge(1, {{"/robot/chat", "in"}, {"/robot/chat", "out"}});
  StartBridge(0, {{"/robot/chat", "out"}, {"/robot/chat", "in"}});
  ASSERT_TRUE(WaitFor(
      [&] {
        auto a_in = Status(0, "/robot/chat", status::Direction::IN);
        return Linked("/robot/chat") && a_in && a_in->peers > 0;
      },
      kLong));
  Collector at_a(Open(0, "/robot/chat"));
  Collector at_b(Open(1, "/robot/chat"));
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok());
  std::map<uint64_t, std::vector<std::byte>> sent;
  constexpr uint64_t kCount = 50;
  Publish(**pub, 0, kCount, sent);
  ASSERT_TRUE(WaitFor([&] { return at_b.count() >= kCount; }, kLong));
  // Give an echo every chance to come back before looking.
  std::this_thread::sleep_for(milliseconds(1000));
  EXPECT_EQ(at_b.count(), kCount);
  EXPECT_EQ(at_a.count(), kCount) << "a saw its own messages come back";
  auto b_out = Status(1, "/robot/chat", status::Direction::OUT);
  auto a_in = Status(0, "/robot/chat", status::Direction::IN);
  ASSERT_TRUE(b_out && a_in);
  EXPECT_EQ(b_out->messages, 0u);
  EXPECT_EQ(a_in->messages, 0u);
}

// Two bridges of one instance on one host (against the rule) that both
// forward a channel both ways: each refuses the other's frames, saying why,
// so one message stays one message instead of circling between them.
TEST_F(NetBridgeTest, TwoBridgesOfOneInstanceRefuseEachOtherInsteadOfEchoing) {
  // Room for the test's publisher and both bridges'.
  auto a = MakeChannel(0, "/robot/chat", SampleType(), 1024, 4);
  ASSERT_NE(a, nullptr);
  auto pub = transport::RawPublisher::Create(a.get());
  ASSERT_TRUE(pub.ok());
  const std::vector<ChannelSpec> both = {{"/robot/chat", "out"},
                                         {"/robot/chat", "in"}};
  StartBridge(0, both, "a1", /*loopback=*/true);
  StartBridge(0, both, "a2", /*loopback=*/true);
  const auto refused = [&](const std::string& bridge) {
    auto in = ReadChannelStatus(options_[0], bridge, "/robot/chat",
                                status::Direction::IN);
    return in && in->detail.find("bridges this same instance") !=
                     std::string::npos;
  };
  // Each has seen the other's announcement (refused it, or, without the
  // check, accepted it: then the out sides match the other's in).
  const auto met = [&](const std::string& bridge) {
    auto out = ReadChannelStatus(options_[0], bridge, "/robot/chat",
                                 status::Direction::OUT);
    return refused(bridge) || (out && out->peers > 0);
  };
  ASSERT_TRUE(WaitFor([&] { return met("a1") && met("a2"); }, kLong));
  std::map<uint64_t, std::vector<std::byte>> sent;
  Publish(**pub, 0, 1, sent);
  // Give an echo every chance to start before looking.
  std::this_thread::sleep_for(milliseconds(1500));
  EXPECT_EQ(a->stats().next_queue_index, 1u)
      << "the message was published again by the bridges";
  EXPECT_TRUE(refused("a1") && refused("a2"));
}

}  // namespace
}  // namespace tether::net
