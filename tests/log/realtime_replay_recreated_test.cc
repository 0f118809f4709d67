// Real-time and simulated replay of a channel re-created while it was
// recorded: another shape is played whole on one channel, in both replays;
// another type (or an incarnation without tether's metadata) is skipped or
// refused whole, and log info says so; a remapping of it is refused; channel
// metadata whose rate is not one makes the channel unreplayable.
#include "log/realtime_replay.h"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/log_info.h"
#include "log/log_reader.h"
#include "log/log_replayer.h"
#include "log/logger.h"
#include "tests/log/log_test_util.h"
#include "tests/log/replay_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

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

}  // namespace
}  // namespace tether::log
