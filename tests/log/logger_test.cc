// The logger against real channels: every message of every shape with its
// context, channels that appear while it runs, exact accounting of what it
// missed (counted, and recorded as gap ranges), a writer that falls behind,
// splitting, and no sleeping on wake words.
#include "log/logger.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/log_info.h"
#include "log/log_reader.h"
#include "log/log_recover.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

LogReadOptions Only(uint16_t id) {
  LogReadOptions o;
  o.channels = {id};
  return o;
}

class LoggerTest : public ::testing::Test {
 protected:
  LoggerTest() { RegisterTestTypes(schemas_); }

  LoggerOptions Options(const std::string& file) {
    LoggerOptions o = LogTo(root_.options(), TempFile(file));
    o.period = std::chrono::milliseconds(2);
    o.discovery_period = std::chrono::milliseconds(20);
    return o;
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
};

TEST_F(LoggerTest, RecordsEveryMessageOfEveryShapeWithItsContext) {
  auto samples = MakeChannel(root_.options(), schemas_, "/test/samples",
                             kSampleType, {.max_size = 4096, .depth = 256});
  auto scalars = MakeChannel(root_.options(), schemas_, "/test/scalars",
                             kScalarsType, {.max_size = 128, .depth = 256});
  LoggerOptions options = Options("all.mcap");
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok()) << logger.status();
  auto pub_samples = transport::RawPublisher::Create(samples.get());
  auto pub_scalars = transport::RawPublisher::Create(scalars.get());
  ASSERT_TRUE(pub_samples.ok() && pub_scalars.ok());
  // What a reader sees of each message, to compare the log's context with.
  auto watch = transport::RawSubscriber::Create(samples.get(), {.pin = true});
  ASSERT_TRUE(watch.ok());
  constexpr int kCount = 200;
  std::vector<transport::MessageContext> seen;
  for (int i = 0; i < kCount; ++i) {
    PublishBytes(**pub_samples, SampleMessage(i));
    PublishBytes(**pub_scalars, ScalarsMessage(i));
    transport::RawMessage m;
    ASSERT_EQ((*watch)->Next(&m), transport::ReceiveStatus::kOk);
    seen.push_back(m.context);
    (*watch)->Release();
    if (i % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 2 * kCount; }));
  ASSERT_TRUE((*logger)->Stop().ok());
  const LoggerStats stats = (*logger)->stats();
  EXPECT_EQ(stats.missed, 0u);
  ASSERT_EQ(stats.channels.size(), 2u);
  EXPECT_EQ(stats.channels[0].name, "/test/samples");
  EXPECT_EQ(stats.channels[0].messages, uint64_t{kCount});

  auto reader = LogReader::Open(options.path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->mcap().indexed());
  EXPECT_TRUE((*reader)->mcap().problems().empty());
  EXPECT_EQ((*reader)->mcap().header().profile, kTetherProfile);
  const LogChannel* logged = (*reader)->FindChannel("/test/samples");
  ASSERT_NE(logged, nullptr);
  ASSERT_TRUE(logged->description.has_value());
  EXPECT_EQ(*logged->description, DescribeChannel(*samples));
  EXPECT_EQ(logged->schema_name, kSampleType);
  EXPECT_EQ(logged->schema_encoding, "capnproto");
  EXPECT_EQ(logged->message_encoding, "capnproto");
  ASSERT_NE((*reader)->FindChannel(kGapChannel), nullptr);
  EXPECT_EQ((*reader)->recording().at("instance"), root_.options().instance);

  std::map<std::string, int> next;
  auto cursor = (*reader)->Read();
  LogMessage m;
  int64_t previous = 0;
  while (cursor->Next(&m)) {
    ASSERT_GE(m.monotonic_send_ns, previous) << "not in send-time order";
    previous = m.monotonic_send_ns;
    ASSERT_TRUE(m.has_context);
    const int i = next[m.channel->name]++;
    EXPECT_EQ(m.queue_index, uint64_t(i));
    EXPECT_EQ(m.publisher_pid, uint32_t(::getpid()));
    EXPECT_GE(m.monotonic_receive_ns, m.monotonic_send_ns);
    const std::vector<std::byte> want = m.channel->name == "/test/samples"
                                            ? SampleMessage(i)
                                            : ScalarsMessage(i);
    ASSERT_TRUE(std::equal(m.data.begin(), m.data.end(), want.begin(),
                           want.end()))
        << m.channel->name << " message " << i << " differs";
    if (m.channel->name == "/test/samples") {
      EXPECT_EQ(m.monotonic_send_ns, seen[i].monotonic_send_ns);
      EXPECT_EQ(m.realtime_send_ns, seen[i].realtime_send_ns);
      EXPECT_EQ(m.publisher_sequence, seen[i].publisher_sequence);
      EXPECT_EQ(m.publisher_index, seen[i].publisher_index);
    }
  }
  EXPECT_EQ(next["/test/samples"], kCount);
  EXPECT_EQ(next["/test/scalars"], kCount);
  EXPECT_EQ(cursor->late(), 0u);
  auto gaps = (*reader)->Gaps();
  ASSERT_TRUE(gaps.ok());
  EXPECT_TRUE(gaps->empty());
}

// A long drain period does not hold Stop() up for a period: it drains once
// more and returns, with what was sent meanwhile (a bound of a tenth of the
// period, generous for a loaded machine: it waited the whole minute).
TEST_F(LoggerTest, StopDoesNotWaitOutALongPeriodAndDrainsOnceMore) {
  auto channel = MakeChannel(root_.options(), schemas_, "/slow", kSampleType);
  LoggerOptions o = Options("long-period.mcap");
  o.period = std::chrono::seconds(60);
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok()) << logger.status();
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().channels.size() == 1u; }));
  auto pub = transport::RawPublisher::Create(channel.get());
  ASSERT_TRUE(pub.ok());
  PublishBytes(**pub, SampleMessage(1));
  // Let the drain thread reach its sleep after the first drain (were it not
  // there yet, Stop would not wait anyway).
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const auto begin = std::chrono::steady_clock::now();
  ASSERT_TRUE((*logger)->Stop().ok());
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(6));
  EXPECT_EQ((*logger)->stats().messages, 1u);
}

// A channel whose shared memory is overwritten while recorded stops being
// recorded, with a loss record saying why: `log info` shows it on the
// channel's row, with when (it showed the messages and MISSED 0 only).
TEST_F(LoggerTest, AChannelStoppedForCorruptionIsShownByLogInfo) {
  auto channel = MakeChannel(root_.options(), schemas_, "/doomed", kSampleType);
  const std::string path = TempFile("stopped-corrupt.mcap");
  LoggerOptions o = Options("stopped-corrupt.mcap");
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok()) << logger.status();
  auto pub = transport::RawPublisher::Create(channel.get());
  ASSERT_TRUE(pub.ok());
  for (int i = 0; i < 5; ++i) PublishBytes(**pub, SampleMessage(i));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 5u; }));
  {
    // The header's tail beyond any queue index: what `dd` of 0xff does.
    const int fd = ::open(channel->path().c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    const std::vector<char> ones(256, '\xff');
    ASSERT_EQ(::pwrite(fd, ones.data(), ones.size(), 0), 256);
    ::close(fd);
  }
  ASSERT_TRUE(WaitFor([&] {
    for (const std::string& n : (*logger)->TakeNotices()) {
      if (n.find("corrupt") != std::string::npos) return true;
    }
    return false;
  }));
  ASSERT_TRUE((*logger)->Stop().ok());
  auto info = ComputeLogInfo(path, {});
  ASSERT_TRUE(info.ok()) << info.status();
  const ChannelInfoRow* row = nullptr;
  for (const ChannelInfoRow& r : info->channels) {
    if (r.name == "/doomed") row = &r;
  }
  ASSERT_NE(row, nullptr);
  EXPECT_EQ(row->messages, 5u);
  EXPECT_NE(row->stopped_corrupt_ns, 0);
  EXPECT_THAT(FormatLogInfo(*info),
              HasSubstr("(recording stopped at +"));
}

TEST_F(LoggerTest, PicksUpChannelsThatAppearWhileItRuns) {
  auto first = MakeChannel(root_.options(), schemas_, "/first", kScalarsType);
  LoggerOptions options = Options("appear.mcap");
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  auto later = MakeChannel(root_.options(), schemas_, "/later", kScalarsType);
  auto pub = transport::RawPublisher::Create(later.get());
  ASSERT_TRUE(pub.ok());
  // Sent before the logger can have found the channel: still recorded, as
  // a channel found later is read from its oldest message.
  for (int i = 0; i < 10; ++i) PublishBytes(**pub, ScalarsMessage(i));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 10; }));
  bool noticed = false;
  for (const std::string& n : (*logger)->TakeNotices()) {
    noticed |= n.find("recording new channel /later") != std::string::npos;
  }
  EXPECT_TRUE(noticed);
  ASSERT_TRUE((*logger)->Stop().ok());
  auto reader = LogReader::Open(options.path);
  ASSERT_TRUE(reader.ok());
  ASSERT_NE((*reader)->FindChannel("/first"), nullptr);
  const LogChannel* c = (*reader)->FindChannel("/later");
  ASSERT_NE(c, nullptr);
  auto cursor = (*reader)->Read(Only(c->id));
  LogMessage m;
  int n = 0;
  while (cursor->Next(&m)) EXPECT_EQ(m.queue_index, uint64_t(n++));
  EXPECT_EQ(n, 10);
}

TEST_F(LoggerTest, FollowsAChannelThatIsRemovedAndCreatedAgain) {
  auto first = MakeChannel(root_.options(), schemas_, "/again", kScalarsType);
  LoggerOptions options = Options("again.mcap");
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  {
    auto pub = transport::RawPublisher::Create(first.get());
    for (int i = 0; i < 5; ++i) PublishBytes(**pub, ScalarsMessage(i));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 5; }));
  // A restarted stack: the file goes and a new one of the same shape comes.
  ASSERT_TRUE(shm::Channel::Remove(root_.options(), "/again").ok());
  auto second = MakeChannel(root_.options(), schemas_, "/again", kScalarsType);
  auto pub = transport::RawPublisher::Create(second.get());
  for (int i = 0; i < 7; ++i) PublishBytes(**pub, ScalarsMessage(100 + i));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 12; }));
  bool noticed = false;
  for (const std::string& n : (*logger)->TakeNotices()) {
    noticed |= n.find("/again was re-created") != std::string::npos;
  }
  EXPECT_TRUE(noticed);
  ASSERT_TRUE((*logger)->Stop().ok());
  auto reader = LogReader::Open(options.path);
  ASSERT_TRUE(reader.ok());
  const LogChannel* c = (*reader)->FindChannel("/again");
  ASSERT_NE(c, nullptr);
  auto cursor = (*reader)->Read(Only(c->id));  // one MCAP channel: same shape
  LogMessage m;
  std::vector<uint64_t> indices;
  while (cursor->Next(&m)) indices.push_back(m.queue_index);
  EXPECT_THAT(indices, ::testing::ElementsAre(0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 5, 6));
}

// Losses of a channel re-created with another shape belong to the
// incarnation that had them: each loss record names its MCAP channel, so
// log info counts them once, on that row (it counted every loss on every
// row of the name), also after `tether log recover` renumbered the ids.
// The later incarnation is the lossy one: a reader that ignored the id
// would put them on the first.
TEST_F(LoggerTest, LossesCountOnceAgainstTheIncarnationThatHadThem) {
  LoggerOptions options = Options("lossy-recreated.mcap");
  options.period = std::chrono::milliseconds(50);
  auto deep = MakeChannel(root_.options(), schemas_, "/re", kScalarsType,
                          {.max_size = 128, .depth = 64});
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  {
    auto pub = transport::RawPublisher::Create(deep.get());
    for (int i = 0; i < 10; ++i) PublishBytes(**pub, ScalarsMessage(i));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 10; }));
  deep.reset();
  ASSERT_TRUE(shm::Channel::Remove(root_.options(), "/re").ok());
  auto tiny = MakeChannel(root_.options(), schemas_, "/re", kScalarsType,
                          {.max_size = 128, .depth = 4});
  auto pub = transport::RawPublisher::Create(tiny.get());
  // Once the logger reads the new incarnation, a burst its 4 slots cannot
  // hold until the next drain.
  PublishBytes(**pub, ScalarsMessage(100));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 11; }));
  for (int i = 0; i < 40; ++i) PublishBytes(**pub, ScalarsMessage(101 + i));
  ASSERT_TRUE(WaitFor([&] {
    const LoggerStats s = (*logger)->stats();
    return s.messages + s.missed == 51;
  }));
  ASSERT_TRUE((*logger)->Stop().ok());
  const uint64_t missed = (*logger)->stats().missed;
  ASSERT_GT(missed, 0u);

  const std::string recovered = TempFile("lossy-recreated-recovered.mcap");
  McapWriterOptions wo;
  wo.overwrite = true;
  ASSERT_TRUE(RecoverLog(options.path, recovered, wo).ok());
  for (const std::string& path : {options.path, recovered}) {
    auto info = ComputeLogInfo(path);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->missed, missed) << path;
    std::vector<uint64_t> rows;
    for (const ChannelInfoRow& r : info->channels) {
      if (r.name == "/re") rows.push_back(r.missed);
    }
    EXPECT_THAT(rows, ::testing::ElementsAre(0u, missed)) << path;
  }
}

// A loss record without the incarnation (a log from before it was
// recorded) decodes with none; log recover's rewrite sets only the id.
TEST(GapRecords, TheIncarnationIsOptionalAndRewrittenAlone) {
  GapRecord g;
  g.channel = "/re";
  g.missed = 3;
  g.first_queue_index = 4;
  g.last_queue_index = 6;
  const std::vector<std::byte> old = EncodeGap(g);
  auto decoded = DecodeGap(old);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_FALSE(decoded->mcap_channel_id.has_value());
  auto with = WithGapChannelId(old, 9);
  ASSERT_TRUE(with.ok()) << with.status();
  auto again = DecodeGap(*with);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->mcap_channel_id, std::optional<uint16_t>(9));
  EXPECT_EQ(again->channel, "/re");
  EXPECT_EQ(again->missed, 3u);
  EXPECT_EQ(again->last_queue_index, 6u);
  auto none = WithGapChannelId(*with, std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(DecodeGap(*none)->mcap_channel_id.has_value());
}

// A queue of 4 and a logger draining every 50 ms: bursts of 40 overflow it.
// Every message is either in the log or inside exactly one gap record, and
// the counts agree.
TEST_F(LoggerTest, CountsAndRecordsExactlyWhatItMissed) {
  auto ch = MakeChannel(root_.options(), schemas_, "/tiny", kScalarsType,
                        {.max_size = 128, .depth = 4, .frequency_hz = 1000});
  LoggerOptions options = Options("missed.mcap");
  options.period = std::chrono::milliseconds(50);
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  bool warned = false;
  for (const std::string& n : (*logger)->TakeNotices()) {
    warned |= n.find("/tiny: queue depth 4") != std::string::npos;
  }
  EXPECT_TRUE(warned) << "no warning about a queue that cannot hold a period";
  auto pub = transport::RawPublisher::Create(ch.get());
  ASSERT_TRUE(pub.ok());
  constexpr int kBursts = 5, kPerBurst = 40;
  for (int b = 0; b < kBursts; ++b) {
    for (int i = 0; i < kPerBurst; ++i) {
      PublishBytes(**pub, ScalarsMessage(b * kPerBurst + i));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(60));
  }
  ASSERT_TRUE(WaitFor([&] {
    const LoggerStats s = (*logger)->stats();
    return s.messages + s.missed == kBursts * kPerBurst;
  }));
  ASSERT_TRUE((*logger)->Stop().ok());
  const LoggerStats stats = (*logger)->stats();
  EXPECT_GT(stats.missed, 0u);

  auto reader = LogReader::Open(options.path);
  ASSERT_TRUE(reader.ok());
  std::set<uint64_t> present;
  auto cursor = (*reader)->Read(Only((*reader)->FindChannel("/tiny")->id));
  LogMessage m;
  while (cursor->Next(&m)) present.insert(m.queue_index);
  auto gaps = (*reader)->Gaps();
  ASSERT_TRUE(gaps.ok()) << gaps.status();
  uint64_t in_gaps = 0;
  for (const GapRecord& g : *gaps) {
    EXPECT_EQ(g.channel, "/tiny");
    // Overwritten before the drain, or (a burst racing the copy) during it.
    EXPECT_TRUE(g.reason == GapRecord::Reason::kOverwritten ||
                g.reason == GapRecord::Reason::kOverwrittenWhileCopying);
    ASSERT_EQ(g.last_queue_index - g.first_queue_index + 1, g.missed);
    for (uint64_t q = g.first_queue_index; q <= g.last_queue_index; ++q) {
      EXPECT_EQ(present.count(q), 0u) << q << " is both logged and missing";
      ++in_gaps;
    }
  }
  EXPECT_EQ(in_gaps, stats.missed);
  EXPECT_EQ(present.size(), stats.messages);
  EXPECT_EQ(present.size() + in_gaps, uint64_t{kBursts * kPerBurst});
  // And the summary metadata says the same.
  bool summary = false;
  for (const mcap::Metadata& md : (*reader)->mcap().metadata()) {
    if (md.name == kSummaryMetadata) {
      summary = true;
      EXPECT_EQ(md.metadata.at("missed /tiny"), std::to_string(stats.missed));
    }
  }
  EXPECT_TRUE(summary);
}

TEST_F(LoggerTest, AWriterTooFarBehindDropsWithARecordNotSilently) {
  auto ch = MakeChannel(root_.options(), schemas_, "/x", kScalarsType);
  LoggerOptions options = Options("backlog.mcap");
  options.max_backlog_bytes = 1;  // nothing fits: every drained message dropped
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  auto pub = transport::RawPublisher::Create(ch.get());
  for (int i = 0; i < 20; ++i) PublishBytes(**pub, ScalarsMessage(i));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().missed == 20; }));
  ASSERT_TRUE((*logger)->Stop().ok());
  EXPECT_EQ((*logger)->stats().messages, 0u);
  auto reader = LogReader::Open(options.path);
  ASSERT_TRUE(reader.ok());
  auto gaps = (*reader)->Gaps();
  ASSERT_TRUE(gaps.ok());
  uint64_t dropped = 0;
  for (const GapRecord& g : *gaps) {
    EXPECT_EQ(g.reason, GapRecord::Reason::kWriterBacklog);
    dropped += g.missed;
  }
  EXPECT_EQ(dropped, 20u);
}

TEST_F(LoggerTest, SplitsBySizeIntoFilesThatEachStandAlone) {
  auto ch = MakeChannel(root_.options(), schemas_, "/big", kSampleType,
                        {.max_size = 4096, .depth = 1024});
  LoggerOptions options = Options("split.mcap");
  options.split_bytes = 20'000;
  options.mcap.compression = Compression::kNone;
  options.mcap.chunk_size = 4096;
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  auto pub = transport::RawPublisher::Create(ch.get());
  constexpr int kCount = 300;
  for (int i = 0; i < kCount; ++i) {
    PublishBytes(**pub, SampleMessage(i));
    if (i % 20 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(4));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == kCount; }));
  ASSERT_TRUE((*logger)->Stop().ok());
  const std::vector<std::string> files = (*logger)->stats().files;
  ASSERT_GT(files.size(), 2u);
  EXPECT_EQ(files[0], SplitFileName(options.path, true, 0));
  EXPECT_THAT(files[1], HasSubstr("split_001.mcap"));
  uint64_t next = 0;
  for (const std::string& f : files) {
    auto reader = LogReader::Open(f);
    ASSERT_TRUE(reader.ok()) << f;
    EXPECT_TRUE((*reader)->mcap().indexed());
    const LogChannel* c = (*reader)->FindChannel("/big");
    ASSERT_NE(c, nullptr) << f << " lacks the channel record";
    ASSERT_TRUE(c->description.has_value());
    auto cursor = (*reader)->Read(Only(c->id));
    LogMessage m;
    while (cursor->Next(&m)) EXPECT_EQ(m.queue_index, next++);
  }
  EXPECT_EQ(next, uint64_t{kCount});
}

TEST_F(LoggerTest, NeverSleepsOnAChannelsWakeWord) {
  auto ch = MakeChannel(root_.options(), schemas_, "/quiet", kScalarsType);
  LoggerOptions options = Options("quiet.mcap");
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  // Idle for many drain periods: a reader that slept on the word would show
  // up as a sleeper (publishers would then make the wake syscall).
  for (int i = 0; i < 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    auto list = transport::ListChannels(root_.options());
    ASSERT_TRUE(list.ok());
    ASSERT_EQ(list->size(), 1u);
    EXPECT_EQ((*list)[0].stats.sleepers, 0u);
    EXPECT_EQ((*list)[0].stats.pinning_readers, 0);
  }
  ASSERT_TRUE((*logger)->Stop().ok());
}

TEST_F(LoggerTest, FiltersByNameAndGlob) {
  auto a = MakeChannel(root_.options(), schemas_, "/robot/a", kScalarsType);
  auto b = MakeChannel(root_.options(), schemas_, "/robot/b", kScalarsType);
  auto c = MakeChannel(root_.options(), schemas_, "/camera/c", kScalarsType);
  LoggerOptions options = Options("glob.mcap");
  options.include = {"/robot/*", "/camera/c"};
  options.exclude = {"/robot/b"};
  auto logger = Logger::Start(options);
  ASSERT_TRUE(logger.ok());
  ASSERT_TRUE((*logger)->Stop().ok());
  std::vector<std::string> names;
  for (const LoggerChannelStats& s : (*logger)->stats().channels) {
    names.push_back(s.name);
  }
  EXPECT_THAT(names, ::testing::ElementsAre("/camera/c", "/robot/a"));
}

TEST_F(LoggerTest, RefusesToOverwriteAnExistingFileUnlessTold) {
  LoggerOptions options = Options("exists.mcap");
  {
    auto logger = Logger::Start(options);
    ASSERT_TRUE(logger.ok());
  }
  options.overwrite = false;
  auto again = Logger::Start(options);
  ASSERT_FALSE(again.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(again.status()));
}

TEST(LoggingWarning, OnlyWhenTheQueueCannotHoldTwoPeriods) {
  using std::chrono::milliseconds;
  EXPECT_FALSE(LoggingWarning("/a", 1000, 1024, milliseconds(10)).has_value());
  EXPECT_FALSE(LoggingWarning("/a", 1000, 20, milliseconds(10)).has_value());
  EXPECT_FALSE(LoggingWarning("/a", 0, 2, milliseconds(10)).has_value());
  auto w = LoggingWarning("/a", 1000, 16, milliseconds(10));
  ASSERT_TRUE(w.has_value());
  EXPECT_THAT(*w, HasSubstr("queue depth 16 holds 16 ms at 1000 Hz"));
  EXPECT_THAT(*w, HasSubstr(">= 32"));
}

TEST(SplitFileName, NumbersTheFiles) {
  EXPECT_EQ(SplitFileName("/x/run.mcap", false, 3), "/x/run.mcap");
  EXPECT_EQ(SplitFileName("/x/run.mcap", true, 3), "/x/run_003.mcap");
  EXPECT_EQ(SplitFileName("/x/run", true, 12), "/x/run_012");
}

}  // namespace
}  // namespace tether::log
