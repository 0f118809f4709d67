// Real-time replay into shared memory, its channels: bytes and logged send
// times arrive unchanged on channels it creates with the logged shape (also
// of messages logged long after they were sent); remapping and selecting; an
// existing channel of another type or smaller refused with both sides named,
// one at least as large used (with a free publisher slot); bad selections
// say what the log has.
#include "log/realtime_replay.h"

#include <time.h>

#include <cstddef>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "log/logger.h"
#include "tests/log/log_test_util.h"
#include "tests/log/replay_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

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
