// Real-time replay into shared memory: bytes and logged send times arrive
// unchanged on channels it creates with the logged shape; remapping; an
// existing channel of another type or smaller refused with both sides named,
// one at least as large used; a range;
// looping with increasing times; pause and step; a channel re-created while
// it was recorded (another shape: played whole on one channel, in both
// replays; another type: skipped or refused whole); failures summed per
// channel in both replays.
#include "log/realtime_replay.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <iterator>
#include <cstddef>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/log_info.h"
#include "log/log_reader.h"
#include "log/log_replayer.h"
#include "log/logger.h"
#include "log/mcap_writer.h"
#include "shm/layout.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

struct Sent {
  std::vector<std::byte> data;
  transport::MessageContext context;
};

// Records `count` Sample messages on /a and Scalars on /b, 1 ms apart, and
// returns what a reader of /a saw.
std::vector<Sent> MakeLog(const std::string& path, int count) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(root.options(), schemas, "/a", kSampleType,
                       {.max_size = 4096, .depth = 512, .publishers = 1});
  // As deep as /a: the logger drains both every 2 ms, and a loaded machine
  // can starve it for longer than 64 sends.
  auto b = MakeChannel(root.options(), schemas, "/b", kScalarsType,
                       {.max_size = 128, .depth = 512});
  LoggerOptions o = LogTo(root.options(), path);
  o.period = std::chrono::milliseconds(2);
  auto logger = Logger::Start(o);
  EXPECT_TRUE(logger.ok());
  auto pa = transport::RawPublisher::Create(a.get());
  auto pb = transport::RawPublisher::Create(b.get());
  auto watch = transport::RawSubscriber::Create(a.get());
  std::vector<Sent> sent;
  for (int i = 0; i < count; ++i) {
    PublishBytes(**pa, SampleMessage(i));
    PublishBytes(**pb, ScalarsMessage(i));
    transport::RawMessage m;
    EXPECT_EQ((*watch)->Next(&m), transport::ReceiveStatus::kOk);
    sent.push_back({std::vector<std::byte>(m.bytes.begin(), m.bytes.end()), m.context});
    (*watch)->Release();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 2u * count; }));
  EXPECT_TRUE((*logger)->Stop().ok());
  return sent;
}

class RealtimeReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(TempFile("replay-source.mcap"));
    sent_ = new std::vector<Sent>(MakeLog(*path_, 100));
  }
  static void TearDownTestSuite() {
    delete path_;
    delete sent_;
  }
  RealtimeReplayOptions Options() {
    RealtimeReplayOptions o;
    o.channels = root_.options();
    o.rate = 20;
    return o;
  }
  static std::string* path_;
  static std::vector<Sent>* sent_;
  shm::testing::ScopedRoot root_;
};
std::string* RealtimeReplayTest::path_ = nullptr;
std::vector<Sent>* RealtimeReplayTest::sent_ = nullptr;

// Reads everything on `name` from the oldest message (unpinned copies).
std::vector<Sent> Drain(const shm::ChannelOptions& options, const std::string& name) {
  std::vector<Sent> out;
  auto h = transport::ChannelHandle::Open(options, name);
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return out;
  auto sub = transport::RawSubscriber::Create(h->get(), {.pin = false, .from_oldest = true});
  transport::RawMessage m;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    out.push_back({std::vector<std::byte>(m.bytes.begin(), m.bytes.end()), m.context});
  }
  return out;
}

// Runs `replay` for `span` of wall time (or to its end).
absl::Status RunFor(RealtimeReplay& replay, std::chrono::nanoseconds span) {
  const auto until = std::chrono::steady_clock::now() + span;
  return replay.Run([&] { return std::chrono::steady_clock::now() > until; });
}

TEST_F(RealtimeReplayTest, CreatesTheChannelsAndDeliversBytesAndSendTimesUnchanged) {
  auto replay = RealtimeReplay::Create(*path_, Options());
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ((*replay)->channels().size(), 2u);
  EXPECT_TRUE((*replay)->channels()[0].created);
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
  EXPECT_EQ((*replay)->progress().messages, 200u);
  EXPECT_TRUE((*replay)->progress().done);
  // The created channel has the logged shape.
  auto list = transport::ListChannels(root_.options());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].params.queue_depth, 512u);
  EXPECT_EQ((*list)[0].params.max_publishers, 1u);
  EXPECT_EQ((*list)[0].type_name, kSampleType);
  const std::vector<Sent> got = Drain(root_.options(), "/a");
  ASSERT_EQ(got.size(), sent_->size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].data, (*sent_)[i].data) << "message " << i;
    EXPECT_EQ(got[i].context.monotonic_send_ns, (*sent_)[i].context.monotonic_send_ns);
    EXPECT_EQ(got[i].context.realtime_send_ns, (*sent_)[i].context.realtime_send_ns);
  }
}

// Messages logged long after they were sent (record --from-oldest of a
// quiet channel, or a replay that kept the original send times): the index's
// log times do not track the send times, so ranges are found by scanning.
// Every message plays, a range too (it played none).
TEST(RealtimeReplayOldMessages, MessagesLoggedLongAfterTheirSendTimeAllPlay) {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  const transport::SendTimes now = {
      .monotonic_ns = static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u +
                      static_cast<uint64_t>(ts.tv_nsec),
      .realtime_ns = 0};
  constexpr uint64_t kAge = 120'000'000'000;  // well past the 10 s slack
  if (now.monotonic_ns < 2 * kAge) GTEST_SKIP() << "booted too recently";
  const std::string path = TempFile("replay-old.mcap");
  {
    shm::testing::ScopedRoot root;
    transport::SchemaRegistry schemas;
    RegisterTestTypes(schemas);
    auto a = MakeChannel(root.options(), schemas, "/a", kSampleType,
                         {.max_size = 4096, .depth = 64, .publishers = 1});
    auto logger = Logger::Start(LogTo(root.options(), path));
    ASSERT_TRUE(logger.ok()) << logger.status();
    auto pa = transport::RawPublisher::Create(a.get());
    ASSERT_TRUE(pa.ok());
    for (int i = 0; i < 20; ++i) {
      // 1 ms apart, two minutes ago.
      const transport::SendTimes t = {
          .monotonic_ns = now.monotonic_ns - kAge + i * 1'000'000u,
          .realtime_ns = static_cast<uint64_t>(::time(nullptr)) * 1'000'000'000u -
                         kAge + i * 1'000'000u};
      PublishBytes(**pa, SampleMessage(i), &t);
    }
    ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 20u; }));
    ASSERT_TRUE((*logger)->Stop().ok());
  }
  auto reader = LogReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_FALSE((*reader)->log_time_tracks_send());
  EXPECT_EQ((*reader)->start_ns(),
            static_cast<int64_t>(now.monotonic_ns - kAge));
  for (const bool range : {false, true}) {
    SCOPED_TRACE(range ? "a range" : "all");
    shm::testing::ScopedRoot into;
    RealtimeReplayOptions o;
    o.channels = into.options();
    o.rate = 20;
    if (range) {
      o.start_s = 0.005;
      o.end_s = 0.0145;  // messages 5..14
    }
    auto replay = RealtimeReplay::Create(path, o);
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_TRUE((*replay)->Run(nullptr).ok());
    EXPECT_EQ((*replay)->progress().messages, range ? 10u : 20u);
    EXPECT_EQ(Drain(into.options(), "/a").size(), range ? 10u : 20u);
  }
}

TEST_F(RealtimeReplayTest, RemapsAndSelectsChannels) {
  RealtimeReplayOptions o = Options();
  o.select = {"/a"};
  o.remaps = {{"/a", "/replayed/a"}};
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ((*replay)->channels().size(), 1u);
  EXPECT_EQ((*replay)->channels()[0].name, "/replayed/a");
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
  EXPECT_EQ(Drain(root_.options(), "/replayed/a").size(), 100u);
  EXPECT_TRUE(absl::IsNotFound(transport::ChannelHandle::Open(root_.options(), "/b").status()));
}

TEST_F(RealtimeReplayTest, RefusesAnExistingChannelOfAnotherShapeNamingBothSides) {
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto other = MakeChannel(root_.options(), schemas, "/a", kScalarsType,
                           {.max_size = 128, .depth = 16});
  auto replay = RealtimeReplay::Create(*path_, Options());
  ASSERT_FALSE(replay.ok());
  const std::string e(replay.status().message());
  EXPECT_THAT(e, HasSubstr("channel /a exists"));
  EXPECT_THAT(e, HasSubstr(kScalarsType));
  EXPECT_THAT(e, HasSubstr(kSampleType));
  EXPECT_THAT(e, HasSubstr("queue depth 16"));
  EXPECT_THAT(e, HasSubstr("queue depth 512"));
  EXPECT_THAT(e, HasSubstr(":=/other/name"));
}

// A stack whose config changed since the recording: an existing channel of
// the logged type at least as large in every dimension carries the replay;
// one smaller in any dimension (here only the queue depth) is refused.
TEST_F(RealtimeReplayTest, ReplaysIntoAnExistingChannelAtLeastAsLargeOnly) {
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  {
    auto larger = MakeChannel(root_.options(), schemas, "/a", kSampleType,
                              {.max_size = 8192, .depth = 1024, .publishers = 2});
    auto replay = RealtimeReplay::Create(*path_, Options());
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_EQ((*replay)->channels().size(), 2u);
    EXPECT_EQ((*replay)->channels()[0].name, "/a");
    EXPECT_FALSE((*replay)->channels()[0].created);
    ASSERT_TRUE((*replay)->Run(nullptr).ok());
    EXPECT_EQ((*replay)->progress().messages, 200u);
    const std::vector<Sent> got = Drain(root_.options(), "/a");
    ASSERT_EQ(got.size(), sent_->size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].data, (*sent_)[i].data) << "message " << i;
    }
  }
  ASSERT_TRUE(shm::Channel::Remove(root_.options(), "/a").ok());
  ASSERT_TRUE(shm::Channel::Remove(root_.options(), "/b").ok());
  auto shallower = MakeChannel(root_.options(), schemas, "/a", kSampleType,
                               {.max_size = 8192, .depth = 256, .publishers = 2});
  auto replay = RealtimeReplay::Create(*path_, Options());
  ASSERT_FALSE(replay.ok());
  const std::string e(replay.status().message());
  EXPECT_THAT(e, HasSubstr("cannot carry the log's /a"));
  EXPECT_THAT(e, HasSubstr("queue depth 256"));
  EXPECT_THAT(e, HasSubstr("queue depth 512"));
}

// Writes a tail past any queue index into `channel`'s header, as a stray
// writer could: every later send on it fails as corrupt.
void CorruptTail(const transport::ChannelHandle& channel) {
  const int fd = ::open(channel.path().c_str(), O_WRONLY);
  ASSERT_GE(fd, 0);
  const uint64_t beyond = ~uint64_t{0};
  ASSERT_EQ(::pwrite(fd, &beyond, sizeof(beyond),
                     offsetof(shm::internal::ChannelHeader, tail)),
            static_cast<ssize_t>(sizeof(beyond)));
  ::close(fd);
}

// Sends that fail on several channels (here both channels' memory turns
// corrupt after the replay opened them): the error names every one, with
// how many failed and why, not only the first.
TEST_F(RealtimeReplayTest, NamesEveryChannelWhosePublishingFailed) {
  auto replay = RealtimeReplay::Create(*path_, Options());
  ASSERT_TRUE(replay.ok()) << replay.status();
  for (const char* name : {"/a", "/b"}) {
    auto h = transport::ChannelHandle::Open(root_.options(), name);
    ASSERT_TRUE(h.ok()) << h.status();
    CorruptTail(**h);
  }
  const absl::Status s = (*replay)->Run(nullptr);
  ASSERT_FALSE(s.ok());
  const std::string e(s.message());
  EXPECT_THAT(e, HasSubstr("publishing failed on 2 channels"));
  EXPECT_THAT(e, HasSubstr("/a 100 (channel shared memory is corrupt)"));
  EXPECT_THAT(e, HasSubstr("/b 100 (channel shared memory is corrupt)"));
  EXPECT_EQ((*replay)->progress().failed, 200u);
}

TEST_F(RealtimeReplayTest, ReusesAMatchingChannelButNeedsAFreePublisherSlot) {
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto same = MakeChannel(root_.options(), schemas, "/a", kSampleType,
                          {.max_size = 4096, .depth = 512, .publishers = 1});
  auto live = transport::RawPublisher::Create(same.get());  // takes the slot
  ASSERT_TRUE(live.ok());
  RealtimeReplayOptions o = Options();
  o.select = {"/a"};
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(std::string(replay.status().message()), HasSubstr("cannot publish on /a"));
  live->reset();
  replay = RealtimeReplay::Create(*path_, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_FALSE((*replay)->channels()[0].created);
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
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

TEST_F(RealtimeReplayTest, BadSelectionsSayWhatTheLogHas) {
  RealtimeReplayOptions o = Options();
  o.select = {"/nope"};
  auto replay = RealtimeReplay::Create(*path_, o);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(std::string(replay.status().message()), HasSubstr("it has: /a, /b"));
  o.select = {};
  o.remaps = {{"/zzz", "/y"}};
  replay = RealtimeReplay::Create(*path_, o);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(std::string(replay.status().message()), HasSubstr("no channel /zzz"));
  o.remaps = {{"/a", "/b"}};
  replay = RealtimeReplay::Create(*path_, o);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(std::string(replay.status().message()), HasSubstr("would be replayed on /b"));
  o.remaps = {};
  o.select = {kGapChannel};
  replay = RealtimeReplay::Create(*path_, o);
  ASSERT_FALSE(replay.ok());
  EXPECT_THAT(std::string(replay.status().message()), HasSubstr("loss records"));
}

// A log that holds messages no typed reader takes (recorded from a writer
// that sent a corrupt root pointer) must not put them into a live stack:
// they are skipped, counted per channel with why, and the valid ones go.
TEST(RealtimeReplayMalformed, SkipsAndCountsMessagesThatFailTheCheck) {
  const std::string path = TempFile("replay-malformed.mcap");
  {
    shm::testing::ScopedRoot root;
    transport::SchemaRegistry schemas;
    RegisterTestTypes(schemas);
    auto b = MakeChannel(root.options(), schemas, "/b", kScalarsType,
                         {.max_size = 128, .depth = 64});
    LoggerOptions o = LogTo(root.options(), path);
    o.period = std::chrono::milliseconds(2);
    auto logger = Logger::Start(o);
    ASSERT_TRUE(logger.ok()) << logger.status();
    auto pb = transport::RawPublisher::Create(b.get());
    ASSERT_TRUE(pb.ok());
    for (int i = 0; i < 10; ++i) {
      SendUnchecked(**pb, i % 2 == 0 ? WithCorruptRoot(ScalarsMessage(i))
                                     : ScalarsMessage(i));
    }
    ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 10u; }));
    ASSERT_TRUE((*logger)->Stop().ok());
  }
  shm::testing::ScopedRoot live;
  RealtimeReplayOptions o;
  o.channels = live.options();
  o.rate = 20;
  auto replay = RealtimeReplay::Create(path, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  EXPECT_TRUE((*replay)->Run(nullptr).ok());
  EXPECT_EQ((*replay)->progress().messages, 5u);
  EXPECT_EQ((*replay)->progress().malformed, 5u);
  EXPECT_EQ((*replay)->progress().failed, 0u);
  ASSERT_EQ((*replay)->malformed().size(), 1u);
  const MalformedMessages& m = (*replay)->malformed()[0];
  EXPECT_EQ(m.name, "/b");
  EXPECT_EQ(m.count, 5u);
  EXPECT_THAT(m.why, HasSubstr("out-of-bounds"));
  // Only the valid ones reached the live channel.
  const std::vector<Sent> got = Drain(live.options(), "/b");
  ASSERT_EQ(got.size(), 5u);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].data, ScalarsMessage(static_cast<int>(2 * i + 1)));
  }
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

// Records /a, re-created while recorded: `first` messages of a first
// incarnation (depth 8, max size 1024), then `second` of one of `type2`
// (depth 32, max size 4096); with `b`, also `b` Scalars messages on /b
// before the re-creation. Returns the bytes sent on /a, in order.
std::vector<std::vector<std::byte>> LogAReCreatedChannel(
    const std::string& path, int first, int second, const char* type2,
    int b = 0) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  LoggerOptions o = LogTo(root.options(), path);
  o.period = std::chrono::milliseconds(2);
  std::vector<std::vector<std::byte>> sent;
  auto a = MakeChannel(root.options(), schemas, "/a", kScalarsType,
                       {.max_size = 1024, .depth = 8, .publishers = 1});
  decltype(a) other;
  if (b > 0) {
    other = MakeChannel(root.options(), schemas, "/b", kScalarsType,
                        {.max_size = 128, .depth = 8});
  }
  auto logger = Logger::Start(o);
  EXPECT_TRUE(logger.ok());
  {
    auto pub = transport::RawPublisher::Create(a.get());
    for (int i = 0; i < first; ++i) {
      sent.push_back(ScalarsMessage(i));
      PublishBytes(**pub, sent.back());
    }
    if (b > 0) {
      auto pub_b = transport::RawPublisher::Create(other.get());
      for (int i = 0; i < b; ++i) PublishBytes(**pub_b, ScalarsMessage(i));
    }
  }
  EXPECT_TRUE(
      WaitFor([&] { return (*logger)->stats().messages == size_t(first + b); }));
  a.reset();
  EXPECT_TRUE(shm::Channel::Remove(root.options(), "/a").ok());
  a = MakeChannel(root.options(), schemas, "/a", type2,
                  {.max_size = 4096, .depth = 32, .publishers = 2});
  auto pub = transport::RawPublisher::Create(a.get());
  for (int i = 0; i < second; ++i) {
    sent.push_back(type2 == std::string(kScalarsType) ? ScalarsMessage(100 + i)
                                                      : SampleMessage(i));
    PublishBytes(**pub, sent.back());
  }
  EXPECT_TRUE(WaitFor(
      [&] { return (*logger)->stats().messages == size_t(first + second + b); }));
  EXPECT_TRUE((*logger)->Stop().ok());
  return sent;
}

// A channel re-created with another queue shape while it was recorded (the
// log holds it twice under one name): both incarnations play, in order, on
// one channel made large enough for either.
TEST_F(RealtimeReplayTest, PlaysAChannelReCreatedWithAnotherShapeOnOneChannel) {
  const std::string path = TempFile("recreated.mcap");
  const auto sent = LogAReCreatedChannel(path, 5, 7, kScalarsType);
  {
    auto reader = LogReader::Open(path);
    ASSERT_TRUE(reader.ok());
    int named_a = 0;
    for (const LogChannel& c : (*reader)->channels()) named_a += c.name == "/a";
    ASSERT_EQ(named_a, 2) << "the logger kept one MCAP channel per shape";
  }
  auto replay = RealtimeReplay::Create(path, Options());
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ((*replay)->channels().size(), 1u);
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
  EXPECT_EQ((*replay)->progress().messages, 12u);
  auto list = transport::ListChannels(root_.options());
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].params.queue_depth, 32u);
  EXPECT_EQ((*list)[0].params.max_publishers, 2u);
  auto replayed = transport::ChannelHandle::Open(root_.options(), "/a");
  ASSERT_TRUE(replayed.ok()) << replayed.status();
  EXPECT_EQ((*replayed)->max_size(), 4096u);
  const std::vector<Sent> got = Drain(root_.options(), "/a");
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].data, sent[i]) << "message " << i;
  }
}

// The same log in simulated time (LogReplayer): both incarnations reach a
// watcher of the one channel, in order, also when the code under test
// takes the channel over (its original is replayed under /original).
TEST(LogReplayerReCreated, PlaysEveryIncarnationOnOneChannel) {
  const std::string path = TempFile("recreated-sim.mcap");
  const auto sent = LogAReCreatedChannel(path, 5, 7, kScalarsType);
  for (const bool take_over : {false, true}) {
    shm::testing::ScopedRoot root;
    LogReplayerOptions options;
    options.shm_root = root.root();
    if (take_over) options.taken_over = {"/a"};
    auto replayer = LogReplayer::Open(path, options);
    ASSERT_TRUE(replayer.ok()) << replayer.status();
    auto factory = (*replayer)->MakeFactory();
    ASSERT_TRUE(factory.ok()) << factory.status();
    const std::string replayed = take_over ? "/original/a" : "/a";
    loop::EventLoop* observer = (*factory)->MakeEventLoop("observer");
    std::vector<std::vector<std::byte>> got;
    ASSERT_TRUE(observer
                    ->MakeRawWatcher(replayed,
                                     [&](const transport::RawMessage& m) {
                                       got.emplace_back(m.bytes.begin(),
                                                        m.bytes.end());
                                     })
                    .ok());
    (*factory)->RunFor(std::chrono::seconds(30));
    EXPECT_EQ(got, sent) << replayed;
    EXPECT_EQ((*replayer)->stats().messages, 12u);
    // The replayed channel, and the one a node under test publishes when
    // it takes /a over, are as large as the largest incarnation.
    for (const std::string& name : {replayed, std::string("/a")}) {
      auto h = (*factory)->channels().Find(name);
      ASSERT_TRUE(h.ok()) << h.status();
      EXPECT_EQ((*h)->params().queue_depth, 32u) << name;
    }
  }
}

// Re-created as another type: one channel cannot carry both. Named by
// --channels, the replay is refused naming both types and what to do;
// matched by the default selection or a glob, /a is skipped whole (none of
// its messages plays) with that reason in a note, and /b plays. With
// nothing else to replay, the error says what was skipped and why.
TEST_F(RealtimeReplayTest, AChannelReCreatedAsAnotherTypeIsSkippedOrRefusedWhole) {
  const std::string path = TempFile("retyped.mcap");
  (void)LogAReCreatedChannel(path, 3, 3, kSampleType, /*b=*/4);
  RealtimeReplayOptions named = Options();
  named.select = {"/a"};
  auto refused = RealtimeReplay::Create(path, named);
  ASSERT_FALSE(refused.ok());
  const std::string e(refused.status().message());
  EXPECT_THAT(e, HasSubstr("cannot replay /a: it was re-created as another type"));
  EXPECT_THAT(e, HasSubstr(kScalarsType));
  EXPECT_THAT(e, HasSubstr(kSampleType));
  EXPECT_THAT(e, HasSubstr("--channels"));

  for (const std::vector<std::string>& select :
       {std::vector<std::string>{}, std::vector<std::string>{"/*"}}) {
    shm::testing::ScopedRoot into;
    RealtimeReplayOptions o = Options();
    o.channels = into.options();
    o.select = select;
    auto replay = RealtimeReplay::Create(path, o);
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_EQ((*replay)->channels().size(), 1u);
    EXPECT_EQ((*replay)->channels()[0].name, "/b");
    ASSERT_EQ((*replay)->notes().size(), 1u);
    EXPECT_THAT((*replay)->notes()[0],
                HasSubstr("skipping /a: it was re-created as another type"));
    EXPECT_THAT((*replay)->notes()[0], HasSubstr(kSampleType));
    ASSERT_TRUE((*replay)->Run(nullptr).ok());
    EXPECT_EQ((*replay)->progress().messages, 4u);
    EXPECT_TRUE(absl::IsNotFound(
        transport::ChannelHandle::Open(into.options(), "/a").status()));
  }

  // log info says the same of the name, on each of its rows, and why once.
  auto info = ComputeLogInfo(path);
  ASSERT_TRUE(info.ok()) << info.status();
  int rows = 0;
  for (const ChannelInfoRow& r : info->channels) {
    if (r.name != "/a") continue;
    ++rows;
    EXPECT_FALSE(r.replayable);
    EXPECT_THAT(r.not_replayable, HasSubstr("re-created as another type"));
  }
  EXPECT_EQ(rows, 2);
  EXPECT_THAT(FormatLogInfo(*info),
              HasSubstr("not replayable: /a: it was re-created as another type"));
  EXPECT_THAT(FormatLogInfoJson(*info), HasSubstr("\"not_replayable\":\"it was"));

  const std::string alone = TempFile("retyped-alone.mcap");
  (void)LogAReCreatedChannel(alone, 3, 3, kSampleType);
  auto nothing = RealtimeReplay::Create(alone, Options());
  ASSERT_FALSE(nothing.ok());
  EXPECT_THAT(nothing.status().message(), HasSubstr("nothing to replay"));
  EXPECT_THAT(nothing.status().message(),
              HasSubstr("skipped /a: it was re-created as another type"));
}

// Writes an MCAP log by hand, as another writer (or damage) may leave one:
// `channels` (name, metadata), all of `d`'s schema, and one Scalars message
// for each entry of `order` (an index into `channels`), 1 us apart or at
// `times` (ns, one per entry), in chunks of `chunk_size` bytes.
void WriteLogByHand(
    const std::string& path, const ChannelDescription& d,
    const std::vector<std::pair<std::string, mcap::KeyValueMap>>& channels,
    const std::vector<size_t>& order, const std::vector<uint64_t>& times = {},
    uint64_t chunk_size = 1 << 20) {
  McapWriterOptions wo;
  wo.overwrite = true;
  wo.chunk_size = chunk_size;
  auto w = McapWriter::Create(path, wo);
  ASSERT_TRUE(w.ok()) << w.status();
  auto schema = (*w)->AddSchema(d.type_name, "capnproto", d.schema);
  ASSERT_TRUE(schema.ok());
  std::vector<uint16_t> ids;
  for (const auto& [name, meta] : channels) {
    auto id = (*w)->AddChannel(*schema, name, "capnproto", meta);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  const std::vector<std::byte> m = ScalarsMessage(1);
  for (size_t i = 0; i < order.size(); ++i) {
    const uint64_t t = times.empty() ? 1000 * (i + 1) : times[i];
    ASSERT_TRUE((*w)->WriteMessage({ids[order[i]], 0, t, t, m}, {}).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

// WriteLogByHand of two Scalars channels with tether's metadata: /a three
// times, then /b, at `times` (four), in chunks of `chunk_size` bytes.
void WriteABLog(const std::string& path, const std::vector<uint64_t>& times,
                uint64_t chunk_size = 1 << 20) {
  shm::testing::ScopedRoot source;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(source.options(), schemas, "/a", kScalarsType);
  auto b = MakeChannel(source.options(), schemas, "/b", kScalarsType);
  const ChannelDescription da = DescribeChannel(*a);
  WriteLogByHand(path, da,
                 {{"/a", ChannelMetadata(da)},
                  {"/b", ChannelMetadata(DescribeChannel(*b))}},
                 {0, 0, 0, 1}, times, chunk_size);
}

// A name whose later incarnation lacks tether's metadata (a log another
// writer added to, or a damaged one): the name is one unit, so none of /a
// plays, not only the incarnation that cannot (which used to play alone,
// its gap unsaid but for a note about the other); /b plays; named
// explicitly, /a is refused, saying which incarnation.
TEST(RealtimeReplayIncarnations, ANameWithAnUnreplayableIncarnationIsSkippedWhole) {
  shm::testing::ScopedRoot source;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(source.options(), schemas, "/a", kScalarsType);
  auto b = MakeChannel(source.options(), schemas, "/b", kScalarsType);
  const ChannelDescription da = DescribeChannel(*a);
  const ChannelDescription db = DescribeChannel(*b);
  const std::string path = TempFile("unreplayable-incarnation.mcap");
  // /a with tether's metadata, /a without, /b: /a, /b, /a, /b.
  WriteLogByHand(path, da,
                 {{"/a", ChannelMetadata(da)}, {"/a", {}}, {"/b", ChannelMetadata(db)}},
                 {0, 2, 1, 2});
  shm::testing::ScopedRoot into;
  RealtimeReplayOptions o;
  o.channels = into.options();
  auto replay = RealtimeReplay::Create(path, o);
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_EQ((*replay)->channels().size(), 1u);
  EXPECT_EQ((*replay)->channels()[0].name, "/b");
  ASSERT_EQ((*replay)->notes().size(), 1u);
  EXPECT_THAT((*replay)->notes()[0], HasSubstr("skipping /a: "));
  EXPECT_THAT((*replay)->notes()[0], HasSubstr("incarnation 2 of the 2"));
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
  EXPECT_EQ((*replay)->progress().messages, 2u);
  EXPECT_TRUE(absl::IsNotFound(
      transport::ChannelHandle::Open(into.options(), "/a").status()));

  o.select = {"/a"};
  auto refused = RealtimeReplay::Create(path, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("cannot replay /a: "));
  EXPECT_THAT(refused.status().message(), HasSubstr("incarnation 2 of the 2"));
}

// The simulated replay sums its failed sends per channel too (it kept the
// first failure only): both channels' memory turns corrupt after the
// factory made them, and publish_error() names each with its count.
TEST_F(RealtimeReplayTest, LogReplayerNamesEveryChannelWhosePublishingFailed) {
  shm::testing::ScopedRoot root;
  LogReplayerOptions options;
  options.shm_root = root.root();
  auto replayer = LogReplayer::Open(*path_, options);
  ASSERT_TRUE(replayer.ok()) << replayer.status();
  EXPECT_TRUE((*replayer)->notes().empty());
  auto factory = (*replayer)->MakeFactory();
  ASSERT_TRUE(factory.ok()) << factory.status();
  for (const char* name : {"/a", "/b"}) {
    auto h = (*factory)->channels().Find(name);
    ASSERT_TRUE(h.ok()) << h.status();
    CorruptTail(**h);
  }
  (*factory)->RunUntil((*replayer)->end_time());
  EXPECT_EQ((*replayer)->stats().publish_failures, 200u);
  const std::string e((*replayer)->publish_error().message());
  EXPECT_THAT(e, HasSubstr("publishing failed on 2 channels"));
  EXPECT_THAT(e, HasSubstr("/a 100 ("));
  EXPECT_THAT(e, HasSubstr("/b 100 ("));
}

// The simulated replay skips what the default selection cannot replay, and
// says so in notes() (it dropped the notes).
TEST(LogReplayerReCreated, SaysWhatItSkipped) {
  const std::string path = TempFile("retyped-sim.mcap");
  (void)LogAReCreatedChannel(path, 2, 2, kSampleType, /*b=*/3);
  shm::testing::ScopedRoot root;
  LogReplayerOptions options;
  options.shm_root = root.root();
  auto replayer = LogReplayer::Open(path, options);
  ASSERT_TRUE(replayer.ok()) << replayer.status();
  ASSERT_EQ((*replayer)->notes().size(), 1u);
  EXPECT_THAT((*replayer)->notes()[0],
              HasSubstr("skipping /a: it was re-created as another type"));
  EXPECT_EQ((*replayer)->ReplayedName("/a"), "");
  EXPECT_EQ((*replayer)->ReplayedName("/b"), "/b");
  // Taking it over would leave the node under test without its channel.
  options.taken_over = {"/a"};
  auto taken = LogReplayer::Open(path, options);
  ASSERT_FALSE(taken.ok());
  EXPECT_THAT(taken.status().message(),
              HasSubstr("cannot take over /a: it was re-created as another type"));
}

// A log whose channel metadata gives a rate that is not one ("nan",
// "inf", negative: another writer, or a damaged file): the channel is not
// replayable, and the reason names the key and the value (it used to pass
// as a number and fail later inside the generated stack config).
TEST(RealtimeReplayBadMetadata, ARateThatIsNotOneMakesTheChannelUnreplayable) {
  for (const char* bad : {"nan", "inf", "-5"}) {
    shm::testing::ScopedRoot root;
    transport::SchemaRegistry schemas;
    RegisterTestTypes(schemas);
    auto a = MakeChannel(root.options(), schemas, "/a", kScalarsType);
    const ChannelDescription d = DescribeChannel(*a);
    mcap::KeyValueMap meta = ChannelMetadata(d);
    meta["tether.frequency_hz"] = bad;
    const std::string path = TempFile("bad-rate.mcap");
    WriteLogByHand(path, d, {{"/a", meta}}, {0});
    RealtimeReplayOptions o;
    o.channels = root.options();
    o.select = {"/a"};
    auto replay = RealtimeReplay::Create(path, o);
    ASSERT_FALSE(replay.ok()) << bad;
    EXPECT_THAT(std::string(replay.status().message()),
                HasSubstr(absl::StrCat("tether.frequency_hz '", bad,
                                       "' is not a rate")));
  }
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

// A chunk that cannot be read loses its messages: the replay counts the
// damaged part (ReplayProgress::damaged, what `tether replay` exits 1 on)
// and says where, once per part even when looping.
TEST_F(RealtimeReplayTest, CountsTheDamagedPartsItCouldNotRead) {
  const std::string bad = TempFile("damaged-chunk.mcap");
  {
    auto reader = LogReader::Open(*path_);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_FALSE((*reader)->mcap().chunk_indexes().empty());
    const mcap::ChunkIndex& first = (*reader)->mcap().chunk_indexes()[0];
    std::ifstream in(*path_, std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                            std::istreambuf_iterator<char>());
    // The last byte of the first chunk's records (its compressed data).
    const uint64_t at = first.chunk_start_offset + first.chunk_length - 1;
    ASSERT_LT(at, bytes.size());
    bytes[at] ^= 0x5a;
    std::ofstream(bad, std::ios::binary).write(bytes.data(), bytes.size());
  }
  auto replay = RealtimeReplay::Create(bad, Options());
  ASSERT_TRUE(replay.ok()) << replay.status();
  ASSERT_TRUE((*replay)->Run(nullptr).ok());
  const ReplayProgress p = (*replay)->progress();
  EXPECT_EQ(p.damaged, 1u);
  EXPECT_LT(p.messages, 200u);
  int damage_notes = 0;
  for (const std::string& n : (*replay)->notes()) {
    damage_notes += n.find("damaged log: ") != std::string::npos;
  }
  EXPECT_GE(damage_notes, 1);
}

// A remapping names its channel: one that cannot be replayed is refused,
// not skipped; and one name remapped twice is an error (the last used to win).
TEST_F(RealtimeReplayTest, RemappingsNameTheirChannel) {
  const std::string path = TempFile("retyped-remap.mcap");
  (void)LogAReCreatedChannel(path, 2, 2, kSampleType, /*b=*/2);
  RealtimeReplayOptions o = Options();
  o.remaps = {{"/a", "/x"}};
  auto refused = RealtimeReplay::Create(path, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("cannot replay /a: it was re-created as another type"));
  o.remaps = {{"/b", "/q"}, {"/b", "/r"}};
  auto twice = RealtimeReplay::Create(path, o);
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(),
              HasSubstr("/b is remapped twice (/b:=/q and /b:=/r)"));
}

// Damage counts against a replay only where it could have held what the
// replay plays: a damaged chunk of /b alone leaves a replay of /a whole
// (exit 0), and is still noted. (A range is judged by the chunk's log
// times where they track send times, as in tether's recordings; this
// hand-written log's do not, so a range of it counts all damage.)
TEST(RealtimeReplayDamage, OnlyDamageInTheReplayedChannelsAndRangeCounts) {
  const std::string path = TempFile("damaged-b.mcap");
  // One message a chunk: /a at 1..3 ms, /b at 100 ms.
  WriteABLog(path, {1'000'000, 2'000'000, 3'000'000, 100'000'000},
             /*chunk_size=*/16);
  {
    auto reader = LogReader::Open(path);
    ASSERT_TRUE(reader.ok()) << reader.status();
    const uint16_t idb = (*reader)->FindChannel("/b")->id;
    const mcap::ChunkIndex* of_b = nullptr;
    for (const mcap::ChunkIndex& c : (*reader)->mcap().chunk_indexes()) {
      if (c.message_index_offsets.count(idb) > 0) of_b = &c;
    }
    ASSERT_NE(of_b, nullptr);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(of_b->chunk_start_offset +
                                        of_b->chunk_length - 1));
    f.put('\x5a');
  }
  struct Case {
    std::vector<std::string> select;
    std::optional<double> end_s;
    uint64_t damaged, messages;
  };
  for (const Case& c : {Case{{"/a"}, std::nullopt, 0, 3},
                        Case{{}, 0.05, 1, 3}, Case{{}, std::nullopt, 1, 3}}) {
    shm::testing::ScopedRoot into;
    RealtimeReplayOptions o;
    o.channels = into.options();
    o.select = c.select;
    o.end_s = c.end_s;
    o.rate = 100;
    auto replay = RealtimeReplay::Create(path, o);
    ASSERT_TRUE(replay.ok()) << replay.status();
    ASSERT_TRUE((*replay)->Run(nullptr).ok());
    EXPECT_EQ((*replay)->progress().damaged, c.damaged) << c.select.size();
    EXPECT_EQ((*replay)->progress().messages, c.messages);
    bool noted = false;
    for (const std::string& n : (*replay)->notes()) {
      noted |= n.find("damaged log: ") != std::string::npos;
    }
    EXPECT_TRUE(noted);
  }
}

TEST(ParseRemap, AcceptsOnlyAbsoluteNames) {
  auto r = ParseRemap("/a/b:=/c");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->first, "/a/b");
  EXPECT_EQ(r->second, "/c");
  for (const char* bad : {"/a=/b", "a:=/b", "/a:=b", ":=/b", "/a:="}) {
    EXPECT_FALSE(ParseRemap(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace tether::log
