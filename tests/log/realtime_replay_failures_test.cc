// Real-time and simulated replay when things fail: publishing failures
// summed per channel in both replays; messages that fail the check skipped
// and counted; damaged parts of the log counted and noted, only where they
// could have held what the replay plays.
#include "log/realtime_replay.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_reader.h"
#include "log/log_replayer.h"
#include "log/logger.h"
#include "shm/layout.h"
#include "tests/log/log_test_util.h"
#include "tests/log/replay_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

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

}  // namespace
}  // namespace tether::log
