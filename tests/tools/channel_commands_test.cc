// tether echo, pub, stat and clean as libraries, over real channels in a
// unique shm root: output lines, losses, rate limiting, errors, statistics
// and what clean removes and keeps.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>
#include <functional>
#include <cstdio>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <chrono>
#include <thread>

#include "capnp/message.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel_access.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/transport/framing_test.capnp.h"
#include "tools/clean.h"
#include "tools/cli.h"
#include "tools/echo.h"
#include "tools/pub.h"
#include "tools/stat.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

class ChannelCommandsTest : public ::testing::Test {
 protected:
  ChannelCommandsTest() { schemas_.Register<Scalars>(); }

  std::unique_ptr<transport::ChannelHandle> MakeChannel(
      const std::string& name, uint32_t depth = 16, uint32_t publishers = 2,
      uint32_t pinned = 2, uint32_t max_size = 256) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<transport::config::Channel>();
    c.setName(name);
    c.setType("tests/transport/framing_test.capnp:Scalars");
    c.setMaxSize(max_size);
    c.setFrequencyHz(1000);
    c.setQueueDepth(depth);
    c.setMaxPublishers(publishers);
    c.setMaxPinned(pinned);
    auto ch = transport::ChannelHandle::Create(root_.options(), c.asReader(),
                                               schemas_);
    EXPECT_TRUE(ch.ok()) << ch.status();
    return ch.ok() ? std::move(*ch) : nullptr;
  }

  void Send(transport::ChannelHandle* ch, int64_t first, int n) {
    auto pub = transport::Publisher<Scalars>::Create(ch);
    ASSERT_TRUE(pub.ok()) << pub.status();
    for (int i = 0; i < n; ++i) {
      auto loan = (*pub)->MakeLoan();
      loan.root().setI64(first + i);
      ASSERT_EQ((*pub)->Send(std::move(loan)).status,
                transport::PublishStatus::kOk);
    }
  }

  EchoOptions Echo(const std::string& name) {
    EchoOptions o;
    o.channels = root_.options();
    o.channel = name;
    return o;
  }

  static std::vector<std::string> Lines(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
};

TEST_F(ChannelCommandsTest, EchoPrintsEachMessageAsOneJsonLine) {
  auto ch = MakeChannel("/robot/scalars");
  Send(ch.get(), 5, 3);
  EchoOptions o = Echo("/robot/scalars");
  o.count = 3;
  o.from_oldest = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(lines[i], HasSubstr("\"i64\":\"" + std::to_string(5 + i) + "\""));
    EXPECT_TRUE(test::ParseJson(lines[i]).ok()) << lines[i];
  }
  EXPECT_THAT(err.str(), HasSubstr("3 printed, missed 0"));
}

TEST_F(ChannelCommandsTest, EchoContextShowsABridgesOrigin) {
  auto ch = MakeChannel("/robot/scalars");
  auto pub = transport::Publisher<Scalars>::Create(ch.get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto loan = (*pub)->MakeLoan();
  loan.root().setI64(1);
  transport::SendTimes tag;
  tag.origin = 0xfedc'ba98'7654'3210ull;  // beyond a double's 53 bits
  ASSERT_EQ((*pub)->Send(std::move(loan), &tag).status,
            transport::PublishStatus::kOk);
  EchoOptions o = Echo("/robot/scalars");
  o.count = 1;
  o.from_oldest = true;
  o.context = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  auto json = test::ParseJson(Lines(out.str()).at(0));
  ASSERT_TRUE(json.ok()) << out.str();
  EXPECT_EQ(json->Find("origin")->string, "fedcba9876543210");
}

TEST_F(ChannelCommandsTest, EchoContextWrapsTheMessage) {
  auto ch = MakeChannel("/robot/scalars");
  Send(ch.get(), 9, 2);
  EchoOptions o = Echo("/robot/scalars");
  o.count = 2;
  o.from_oldest = true;
  o.context = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  std::vector<std::string> lines = Lines(out.str());
  ASSERT_EQ(lines.size(), 2u);
  auto json = test::ParseJson(lines[1]);
  ASSERT_TRUE(json.ok()) << lines[1];
  EXPECT_EQ(json->Find("queue_index")->number, 1);
  EXPECT_EQ(json->Find("publisher_pid")->number, ::getpid());
  EXPECT_EQ(json->Find("missed")->number, 0);
  EXPECT_GE(json->Find("latency_us")->number, 0);
  EXPECT_GT(json->Find("monotonic_send_ns")->number, 0);
  ASSERT_NE(json->Find("realtime_send_ns"), nullptr);
  EXPECT_EQ(json->Find("origin")->string, "0000000000000000");  // a tether node's
  EXPECT_EQ(json->Find("message")->Find("i64")->string, "10");
}

TEST_F(ChannelCommandsTest, EchoRateSkipsAndCountsSkipped) {
  auto ch = MakeChannel("/robot/scalars");
  Send(ch.get(), 0, 5);
  EchoOptions o = Echo("/robot/scalars");
  o.from_oldest = true;
  o.rate_hz = 0.001;  // one line per 1000 s: only the first is printed
  int polls = 0;
  o.stop = [&polls] { return ++polls > 7; };  // 5 messages, 1 wait, stop
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  EXPECT_EQ(Lines(out.str()).size(), 1u);
  EXPECT_THAT(err.str(), HasSubstr("1 printed, 4 skipped by --rate"));
}

// Bytes a raw publisher can send: a Scalars message whose root pointer
// (bytes 8-15) is 0xFFFFFFFFFFFFFFFC, out of bounds.
void SendCorruptRoot(transport::ChannelHandle* ch, int n) {
  auto raw = transport::RawPublisher::Create(ch);
  ASSERT_TRUE(raw.ok()) << raw.status();
  const uint64_t words[3] = {uint64_t{2} << 32, 0xFFFFFFFFFFFFFFFCull, 0};
  for (int i = 0; i < n; ++i) {
    std::span<std::byte> slot = (*raw)->Loan();
    std::memcpy(slot.data(), words, sizeof(words));
    ASSERT_EQ((*raw)->Send(sizeof(words)).status,
              transport::PublishStatus::kOk);
  }
}

TEST_F(ChannelCommandsTest, EchoFailsWhenNoMessageDecodes) {
  auto ch = MakeChannel("/robot/scalars");
  SendCorruptRoot(ch.get(), 3);
  EchoOptions o = Echo("/robot/scalars");
  o.from_oldest = true;
  int polls = 0;
  o.stop = [&polls] { return ++polls > 5; };  // 3 messages, 1 wait, stop
  std::ostringstream out, err;
  EXPECT_EQ(RunEcho(o, out, err), kExitFailure) << err.str();
  EXPECT_EQ(out.str(), "");
  EXPECT_THAT(err.str(), HasSubstr("queue index 0: malformed message"));
  EXPECT_THAT(err.str(), HasSubstr("0 printed, missed 0, 3 undecodable"));
  EXPECT_THAT(err.str(),
              HasSubstr("none of the 3 messages received decodes as "
                        "tests/transport/framing_test.capnp:Scalars"));
}

TEST_F(ChannelCommandsTest, EchoSkipsAnUndecodableMessageAndGoesOn) {
  auto ch = MakeChannel("/robot/scalars");
  SendCorruptRoot(ch.get(), 1);
  Send(ch.get(), 4, 1);
  EchoOptions o = Echo("/robot/scalars");
  o.count = 1;
  o.from_oldest = true;
  std::ostringstream out, err;
  EXPECT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("\"i64\":\"4\""));
  EXPECT_THAT(err.str(), HasSubstr("1 printed, missed 0, 1 undecodable"));
}

TEST_F(ChannelCommandsTest, EchoReportsLostMessages) {
  auto ch = MakeChannel("/robot/scalars", /*depth=*/4);
  EchoOptions o = Echo("/robot/scalars");
  o.count = 2;
  bool sent = false;
  // Once the subscriber exists, overrun it: 12 messages into a depth of 4.
  o.stop = [&] {
    if (!sent) {
      sent = true;
      Send(ch.get(), 100, 12);
    }
    return false;
  };
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  EXPECT_THAT(err.str(), ContainsRegex("missed [1-9][0-9]* messages before"));
  EXPECT_THAT(err.str(), ContainsRegex("2 printed, missed [1-9]"));
  EXPECT_EQ(Lines(out.str()).size(), 2u);
}

TEST_F(ChannelCommandsTest, EchoFallsBackToUnpinnedCopies) {
  auto ch = MakeChannel("/robot/scalars", 16, 2, /*pinned=*/1);
  Send(ch.get(), 1, 1);
  // Take the only pin.
  auto holder = transport::RawSubscriber::Create(ch.get(), {.pin = true});
  ASSERT_TRUE(holder.ok()) << holder.status();
  EchoOptions o = Echo("/robot/scalars");
  o.count = 1;
  o.from_oldest = true;
  std::ostringstream out, err;
  ASSERT_EQ(RunEcho(o, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("\"i64\":\"1\""));
  EXPECT_THAT(err.str(), HasSubstr("unpinned copies"));
  EXPECT_THAT(err.str(), HasSubstr("maxPinned=1"));
}

TEST_F(ChannelCommandsTest, EchoUnknownChannelListsExisting) {
  auto ch = MakeChannel("/robot/scalars");
  std::ostringstream out, err;
  EXPECT_EQ(RunEcho(Echo("/nope"), out, err), kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("no channel /nope"));
  EXPECT_THAT(err.str(), HasSubstr("/robot/scalars"));
}

// A publisher at a rate that stalls (here: 60 ms inside its stop check,
// at 1 kHz) goes on from where it is instead of sending the late ticks
// back to back, which would overrun a short queue; it says how many it
// skipped, and sends its count all the same.
TEST_F(ChannelCommandsTest, PubAtARateSkipsTicksAfterAStallInsteadOfBursting) {
  auto ch = MakeChannel("/robot/scalars");
  auto sub = transport::Subscriber<Scalars>::Create(
      ch.get(), {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok());
  PubOptions p;
  p.channels = root_.options();
  p.channel = "/robot/scalars";
  p.json = R"({"u8": 1})";
  p.rate_hz = 1000;
  p.count = 6;
  int calls = 0;
  p.stop = [&calls] {
    if (++calls == 3) std::this_thread::sleep_for(std::chrono::milliseconds(60));
    return false;
  };
  std::ostringstream out, err;
  ASSERT_EQ(RunPub(p, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("published 6 messages on /robot/scalars ("));
  EXPECT_THAT(out.str(), HasSubstr("of the rate skipped"));
  int received = 0;
  transport::Message<Scalars> m;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    EXPECT_EQ(m.context.missed, 0u);
    ++received;
  }
  EXPECT_EQ(received, 6);
}

TEST_F(ChannelCommandsTest, PubPublishesJsonThatEchoReadsBack) {
  auto ch = MakeChannel("/robot/scalars");
  PubOptions p;
  p.channels = root_.options();
  p.channel = "/robot/scalars";
  // As a string, a 64-bit value beyond 2^53 arrives exactly.
  p.json = R"({"i64": "9007199254740993", "f64": 1.5, "flag": true})";
  p.count = 2;
  std::ostringstream out, err;
  ASSERT_EQ(RunPub(p, out, err), kExitOk) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("published 2 messages on /robot/scalars"));
  auto sub = transport::Subscriber<Scalars>::Create(
      ch.get(), {.pin = true, .from_oldest = true});
  ASSERT_TRUE(sub.ok());
  transport::Message<Scalars> m;
  ASSERT_EQ((*sub)->Next(&m), transport::ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getI64(), 9007199254740993);
  EXPECT_EQ(m.root.getF64(), 1.5);
  EXPECT_TRUE(m.root.getFlag());
  ASSERT_EQ((*sub)->Next(&m), transport::ReceiveStatus::kOk);
  EXPECT_EQ(m.root.getI64(), 9007199254740993);
}

TEST_F(ChannelCommandsTest, PubRejectsBadJsonNamingTheProblem) {
  auto ch = MakeChannel("/robot/scalars");
  PubOptions p;
  p.channels = root_.options();
  p.channel = "/robot/scalars";
  // Each bad input, and the words that name its problem.
  for (const auto& [json, expected] :
       std::vector<std::pair<const char*, const char*>>{
           {R"({"i64": "abc"})", "i64: expected a whole number"},
           {R"({"i64": )", "not valid JSON (line 1, column 9)"},
           {R"({"speed": 1})", "speed: unknown field"},
           {R"({"f64": 1e400})", "f64: the number is too large"},
           {R"({"i32": 1.5})", "i32: expected a whole number"},
           {R"({"u8": 300})", "u8: the number 300 is out of range; use 0..255"},
           // A double cannot hold it exactly: it would be sent rounded.
           {R"({"i64": 9007199254740993})", "at or beyond 2^53, where a JSON "
                                            "number (a double) no longer"},
           {R"({"i64": "9223372036854775808"})",
            "i64: the string \"9223372036854775808\" is out of range; use "
            "-9223372036854775808..9223372036854775807"},
           {R"({"i64": "-99999999999999999999"})", "is out of range; use "},
       }) {
    p.json = json;
    std::ostringstream out, err;
    EXPECT_EQ(RunPub(p, out, err), kExitUsage) << json;
    EXPECT_THAT(err.str(), HasSubstr(expected)) << json;
    if (std::string(json) != R"({"i64": )") {
      EXPECT_THAT(err.str(), HasSubstr("JSON does not fit")) << json;
      EXPECT_THAT(err.str(), HasSubstr("Scalars")) << json;
    }
  }
  EXPECT_EQ(ch->stats().next_queue_index, 0u);  // nothing sent
}

TEST_F(ChannelCommandsTest, PubUnknownChannelAndFullChannel) {
  auto ch = MakeChannel("/robot/scalars", 16, /*publishers=*/1);
  PubOptions p;
  p.channels = root_.options();
  p.channel = "/robot/other";
  p.json = "{}";
  std::ostringstream out, err;
  EXPECT_EQ(RunPub(p, out, err), kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("no channel /robot/other"));
  EXPECT_THAT(err.str(), HasSubstr("channels there: /robot/scalars"));

  auto holder = transport::RawPublisher::Create(ch.get());
  ASSERT_TRUE(holder.ok());
  p.channel = "/robot/scalars";
  std::ostringstream out2, err2;
  EXPECT_EQ(RunPub(p, out2, err2), kExitFailure);
  EXPECT_THAT(err2.str(), HasSubstr("maxPublishers"));
}

// A message larger than the channel's maxSize: the error gives both sizes
// (what to shrink, or what to raise maxSize to), nothing is sent, and the
// failed send is counted where `tether list` reads it.
TEST_F(ChannelCommandsTest, PubOfAMessageLargerThanMaxSizeSaysBothSizes) {
  auto ch = MakeChannel("/robot/scalars", 16, 2, 2, /*max_size=*/32);
  PubOptions p;
  p.channels = root_.options();
  p.channel = "/robot/scalars";
  p.json = R"({"i64": "1", "f64": 2.5})";  // 40 bytes framed: 3 data words
  std::ostringstream out, err;
  EXPECT_EQ(RunPub(p, out, err), kExitFailure);
  EXPECT_THAT(err.str(),
              HasSubstr("tether pub: /robot/scalars: message of 40 bytes is "
                        "larger than the channel's maxSize of 32 bytes "
                        "(after 0 sent)"));
  EXPECT_EQ(ch->stats().next_queue_index, 0u);
  EXPECT_EQ(ch->stats().send_failures, 1u);
}

TEST(StatRow, PercentilesRateAndTable) {
  std::vector<int64_t> ns;
  for (int i = 100; i >= 1; --i) ns.push_back(i * 1000);
  StatRow row = MakeStatRow("/a", 100, 3, 2.0, ns);
  EXPECT_EQ(row.rate_hz, 50);
  EXPECT_EQ(row.p50_us, 50);
  EXPECT_EQ(row.p99_us, 99);
  EXPECT_EQ(row.max_us, 100);
  std::vector<int64_t> none;
  StatRow empty = MakeStatRow("/b", 0, 0, 1.0, none);
  EXPECT_EQ(empty.max_us, 0);
  std::string table = FormatStatTable({row, empty});
  EXPECT_THAT(table, HasSubstr("CHANNEL"));
  EXPECT_THAT(table, HasSubstr("P99 US"));
  EXPECT_THAT(table, ContainsRegex("/a +100 +3 +50.0 +50.0 +99.0 +100.0"));
}

TEST_F(ChannelCommandsTest, StatCountsWhatItSees) {
  auto busy = MakeChannel("/busy");
  auto idle = MakeChannel("/idle");
  std::atomic<bool> done{false};
  std::thread publisher([&] {
    auto pub = transport::Publisher<Scalars>::Create(busy.get());
    ASSERT_TRUE(pub.ok());
    while (!done) {
      auto loan = (*pub)->MakeLoan();
      (void)(*pub)->Send(std::move(loan));
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  StatOptions o;
  o.channels = root_.options();  // every channel
  o.duration = std::chrono::milliseconds(400);
  o.interval = std::chrono::milliseconds(100);
  std::ostringstream out, err;
  const int code = RunStat(o, out, err);
  done = true;
  publisher.join();
  ASSERT_EQ(code, kExitOk) << err.str();
  const std::string text = out.str();
  // An interval report (its time says when it printed: a loaded machine
  // can make the first one late, so the test does not name it).
  EXPECT_THAT(text, ContainsRegex("--- [0-9]+\\.[0-9] s ---"));
  const size_t summary = text.find("=== summary over");
  ASSERT_NE(summary, std::string::npos) << text;
  std::vector<std::string> lines = Lines(text.substr(summary));
  ASSERT_EQ(lines.size(), 4u) << text;  // title, header, /busy, /idle
  unsigned long long messages = 0, missed = 0;
  ASSERT_EQ(std::sscanf(lines[2].c_str(), "/busy %llu %llu", &messages,
                        &missed), 2)
      << lines[2];
  EXPECT_GT(messages, 0u);
  EXPECT_THAT(lines[3], ContainsRegex("^/idle +0 +0 "));
}

TEST_F(ChannelCommandsTest, StatUnknownChannelFails) {
  StatOptions o;
  o.channels = root_.options();
  o.names = {"/nope"};
  o.duration = std::chrono::milliseconds(10);
  std::ostringstream out, err;
  EXPECT_EQ(RunStat(o, out, err), kExitFailure);
  EXPECT_THAT(err.str(), HasSubstr("no channel /nope"));
}

// A child process registers a publisher and dies without deregistering.
void PublishFromDyingChild(transport::ChannelHandle* ch) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto pub = transport::RawPublisher::Create(ch);
    ::_exit(pub.ok() ? 0 : 1);  // no destructor: registration left behind
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

pid_t DeadPid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ::waitpid(child, nullptr, 0);
  return child;
}

TEST_F(ChannelCommandsTest, CleanRemovesStaleKeepsLive) {
  auto stale = MakeChannel("/stale");
  PublishFromDyingChild(stale.get());
  EXPECT_EQ(stale->stats().publishers, 1);  // not yet swept
  stale.reset();  // an open handle, even a tool's, keeps a channel
  auto live = MakeChannel("/live");
  auto live_pub = transport::RawPublisher::Create(live.get());
  ASSERT_TRUE(live_pub.ok());
  const std::string dir = root_.root() + "/test/";
  const std::string dead_tmp =
      ".%2Fx.tmp." + std::to_string(DeadPid()) + ".0";
  const std::string live_tmp = ".%2Fy.tmp." + std::to_string(::getpid()) + ".0";
  std::ofstream(dir + dead_tmp) << "x";
  std::ofstream(dir + live_tmp) << "x";

  // Dry run: reports, changes nothing.
  auto dry = CleanInstance(root_.options(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  std::string text = FormatCleanReport(*dry, true);
  EXPECT_THAT(text, HasSubstr("would remove /stale"));
  EXPECT_THAT(text, HasSubstr("would remove " + dead_tmp));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);

  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  text = FormatCleanReport(*report, false);
  EXPECT_THAT(text, HasSubstr("removed /stale: no live publisher"));
  EXPECT_THAT(text, HasSubstr("/live: kept: in use by 1 live publisher"));
  EXPECT_THAT(text, HasSubstr("removed " + dead_tmp));
  EXPECT_THAT(text, HasSubstr(live_tmp + ": kept: temporary file of live"));
  EXPECT_THAT(text, Not(HasSubstr("empty directory")));
  EXPECT_EQ(*shm::Channel::List(root_.options()),
            std::vector<std::string>{"/live"});
  EXPECT_NE(::access((dir + live_tmp).c_str(), F_OK), -1);
  EXPECT_EQ(::access((dir + dead_tmp).c_str(), F_OK), -1);
  EXPECT_EQ(live->stats().publishers, 1);
}

TEST_F(ChannelCommandsTest, CleanKeepsAChannelAnUnregisteredProcessHasOpen) {
  auto open = MakeChannel("/watched");  // no publisher, no pinning reader
  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("/watched: kept: a process has it open"));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 1u);
}

TEST_F(ChannelCommandsTest, CleanRemovesAFileOfAnotherLayoutNobodyMaps) {
  const std::string dir = root_.root() + "/test/";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  // What an older tether left: not a channel this build can open.
  std::ofstream(dir + "%2Fold") << std::string(4096, 'x');
  auto report = CleanInstance(root_.options(), /*dry_run=*/false,
                              /*force=*/true);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("removed /old: cannot open"));
  EXPECT_EQ(::access((dir + "%2Fold").c_str(), F_OK), -1);
}

TEST_F(ChannelCommandsTest, CleanRemovesEmptiedInstanceDirectory) {
  auto stale = MakeChannel("/stale");
  stale.reset();
  auto report = CleanInstance(root_.options(), false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->directory_removed);
  EXPECT_THAT(FormatCleanReport(*report, false),
              HasSubstr("removed empty directory"));
  EXPECT_EQ(::access((root_.root() + "/test").c_str(), F_OK), -1);
  auto again = CleanInstance(root_.options(), false);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(FormatCleanReport(*again, false), HasSubstr("nothing to clean"));
}

// A file about a channel (the net bridge's forwarding cursor) stays while
// its channel does and goes with it; the folder goes when nothing is left.
TEST_F(ChannelCommandsTest, CleanRemovesAChannelsCompanionFileWithTheChannel) {
  auto stale = MakeChannel("/stale");
  stale.reset();
  auto live = MakeChannel("/live");
  auto live_pub = transport::RawPublisher::Create(live.get());
  ASSERT_TRUE(live_pub.ok());
  const std::string stale_cursor = shm::Channel::CompanionPathFor(
      root_.options(), "/stale", "net-cursor", "robot/1");
  const std::string live_cursor = shm::Channel::CompanionPathFor(
      root_.options(), "/live", "net-cursor", "robot");
  std::ofstream(stale_cursor) << "x";
  std::ofstream(live_cursor) << "x";
  ASSERT_EQ(shm::Channel::CompanionOf(
                stale_cursor.substr(stale_cursor.rfind('/') + 1)),
            "/stale");
  EXPECT_EQ(shm::Channel::CompanionOf(".%2Fx.tmp.12.0"), std::nullopt);
  EXPECT_EQ(*shm::Channel::List(root_.options()),
            (std::vector<std::string>{"/live", "/stale"}));

  auto dry = CleanInstance(root_.options(), /*dry_run=*/true);
  ASSERT_TRUE(dry.ok()) << dry.status();
  EXPECT_THAT(FormatCleanReport(*dry, true),
              HasSubstr("belonged to channel /stale, which is gone"));
  EXPECT_EQ(::access(stale_cursor.c_str(), F_OK), 0);

  auto report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  const std::string text = FormatCleanReport(*report, false);
  EXPECT_THAT(text, HasSubstr("belonged to channel /stale, which is gone"));
  EXPECT_THAT(text, HasSubstr("kept: belongs to channel /live, which stays"));
  EXPECT_EQ(::access(stale_cursor.c_str(), F_OK), -1);
  EXPECT_EQ(::access(live_cursor.c_str(), F_OK), 0);

  live_pub->reset();
  live.reset();
  report = CleanInstance(root_.options(), /*dry_run=*/false);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(::access(live_cursor.c_str(), F_OK), -1);
  EXPECT_TRUE(report->directory_removed) << FormatCleanReport(*report, false);
}

// Where the ring of channel `name` lies in its file, in bytes. Opening the
// channel sweeps it: ask before a process dies whose registration the test
// wants left behind.
struct FileBytes {
  uint64_t begin = 0, end = 0;
};
FileBytes RingOf(const shm::ChannelOptions& options, const std::string& name) {
  auto c = shm::Channel::Open(options, name);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return {};
  using Access = shm::internal::ChannelAccess;
  const auto* base = reinterpret_cast<const std::byte*>(Access::header(**c));
  auto at = [base](const void* p) {
    return static_cast<uint64_t>(reinterpret_cast<const std::byte*>(p) - base);
  };
  return {at(Access::ring_entry(**c, 0)),
          at(Access::ring_entry(**c, (*c)->params().queue_depth - 1)) + 8};
}

// `dd if=/dev/urandom of=<file> conv=notrunc` over `bytes` of channel
// `name`'s file: through the file, no channel opened (so nothing swept).
void WriteGarbage(const shm::ChannelOptions& options, const std::string& name,
                  FileBytes bytes) {
  std::mt19937_64 rng(2000);
  std::vector<uint64_t> words((bytes.end - bytes.begin + 7) / 8);
  for (uint64_t& w : words) w = rng();
  const std::string path = shm::Channel::PathFor(options, name);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path;
  EXPECT_EQ(::pwrite(fd, words.data(), bytes.end - bytes.begin,
                     static_cast<off_t>(bytes.begin)),
            static_cast<ssize_t>(bytes.end - bytes.begin));
  ::close(fd);
}

// `tether clean` with these words, through the command's own parser.
int RunClean(const std::vector<std::string>& words, std::string* out) {
  absl::StatusOr<ParsedArgs> args = CleanParser().Parse(words);
  EXPECT_TRUE(args.ok()) << args.status();
  if (!args.ok()) return -1;
  std::ostringstream o, e;
  const int code = RunCleanCommand(*args, o, e);
  *out = o.str() + e.str();
  return code;
}

// The tester's case: a corrupt ring, and its only publisher killed. A sweep
// reclaims nothing from a corrupt channel, so the dead publisher stays
// registered; clean must say "corrupt", not "in use by 1 live publisher",
// and remove it, since nobody alive uses it.
TEST_F(ChannelCommandsTest, CleanRemovesACorruptChannelWhoseProcessesAreDead) {
  auto imu = MakeChannel("/robot/imu", 16, /*publishers=*/1);
  const FileBytes ring = RingOf(root_.options(), "/robot/imu");
  PublishFromDyingChild(imu.get());
  EXPECT_EQ(imu->stats().publishers, 1);  // not swept
  imu.reset();
  WriteGarbage(root_.options(), "/robot/imu", ring);
  const std::vector<std::string> where = {"--root", root_.root(),
                                          "--instance", "test"};

  std::vector<std::string> dry = where;
  dry.push_back("--dry-run");
  std::string text;
  EXPECT_EQ(RunClean(dry, &text), kExitOk) << text;
  EXPECT_THAT(text, HasSubstr("would remove /robot/imu: corrupt (ring "
                              "position "));
  EXPECT_THAT(text, HasSubstr("; no live process uses it (its registered "
                              "process(es) "));
  EXPECT_THAT(text, HasSubstr(" are dead)"));
  EXPECT_THAT(text, Not(HasSubstr("live publisher")));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 1u);

  EXPECT_EQ(RunClean(where, &text), kExitOk) << text;
  EXPECT_THAT(text, HasSubstr("removed /robot/imu: corrupt (ring position "));
  EXPECT_TRUE(shm::Channel::List(root_.options())->empty());
  // What a fresh launch then does: a new, healthy channel.
  auto fresh = MakeChannel("/robot/imu", 16, 1);
  ASSERT_NE(fresh, nullptr);
  EXPECT_FALSE(fresh->corrupt());
  EXPECT_TRUE(transport::RawPublisher::Create(fresh.get()).ok());
}

TEST_F(ChannelCommandsTest, CleanNeverRemovesACorruptChannelALiveProcessUses) {
  auto published = MakeChannel("/published");
  auto live_pub = transport::RawPublisher::Create(published.get());
  ASSERT_TRUE(live_pub.ok()) << live_pub.status();
  auto opened = MakeChannel("/opened");  // open, registered nowhere
  WriteGarbage(root_.options(), "/published",
               RingOf(root_.options(), "/published"));
  WriteGarbage(root_.options(), "/opened", RingOf(root_.options(), "/opened"));

  std::string text;
  EXPECT_EQ(RunClean({"--root", root_.root(), "--instance", "test"}, &text),
            kExitFailure)
      << text;
  const std::string again = "then run `tether clean --root " + root_.root() +
                            " --instance test` again to remove it";
  EXPECT_THAT(text, HasSubstr("/published: kept: corrupt (ring position "));
  EXPECT_THAT(text, HasSubstr(" and in use by live process(es) " +
                              std::to_string(::getpid()) +
                              ": stop them (stop the stack), " + again));
  EXPECT_THAT(text, HasSubstr("/opened: kept: corrupt (ring position "));
  EXPECT_THAT(text, HasSubstr(" and a process has it open (an unpinned "
                              "reader or a tool?): stop it, " + again));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);
  // --force is about unreadable maps, never about a live user.
  auto forced = CleanInstance(root_.options(), false, /*force=*/true);
  ASSERT_TRUE(forced.ok()) << forced.status();
  for (const CleanEntry& e : forced->entries) {
    EXPECT_TRUE(e.corrupt) << e.name;
    EXPECT_FALSE(e.removed) << e.name;
  }
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), 2u);
}

// The runtime attacker's damaged files: a channel this build made, then
// truncated, grown, its magic zeroed, its slot size changed. None opens
// any more, and /proc/<pid>/maps of other users may be unreadable (here
// even root's are), so the maps scan cannot tell whether a process maps
// them; the header says the flock can, and clean decides by it: kept (exit
// 1) while a process that opened the channel before the damage still has
// it, removed without --force once it is gone.
TEST_F(ChannelCommandsTest, CleanDecidesDamagedChannelsByTheirLock) {
  using Header = shm::internal::ChannelHeader;
  const auto damage = [&](const std::string& name,
                          const std::function<void(int fd)>& how) {
    const std::string path = shm::Channel::PathFor(root_.options(), name);
    const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0) << path;
    how(fd);
    ::close(fd);
  };
  const auto poke = [](int fd, size_t offset, uint64_t value, size_t bytes) {
    EXPECT_EQ(::pwrite(fd, &value, bytes, static_cast<off_t>(offset)),
              static_cast<ssize_t>(bytes));
  };
  const std::vector<std::string> names = {"/truncated", "/grown",
                                          "/zeroed_magic", "/slot_size"};
  std::vector<std::unique_ptr<transport::ChannelHandle>> users;
  for (const std::string& n : names) users.push_back(MakeChannel(n));
  damage("/truncated", [](int fd) { EXPECT_EQ(::ftruncate(fd, 4096), 0); });
  damage("/grown", [](int fd) {
    struct stat st;
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_EQ(::ftruncate(fd, st.st_size + 4096), 0);
  });
  damage("/zeroed_magic",
         [&](int fd) { poke(fd, offsetof(Header, magic), 0, 8); });
  damage("/slot_size",
         [&](int fd) { poke(fd, offsetof(Header, slot_size), 123456, 4); });
  for (const std::string& n : names) {
    EXPECT_FALSE(shm::Channel::Open(root_.options(), n).ok()) << n;
    EXPECT_TRUE(shm::Channel::LockTellsUse(root_.options(), n)) << n;
  }

  const std::vector<std::string> where = {"--root", root_.root(),
                                          "--instance", "test"};
  std::string text;
  EXPECT_EQ(RunClean(where, &text), kExitFailure) << text;
  for (const std::string& n : names) {
    EXPECT_THAT(text, HasSubstr(n + ": kept: cannot open ("));
  }
  EXPECT_THAT(text, Not(HasSubstr("maps are unreadable")));
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), names.size());

  users.clear();  // the processes that used them stopped
  std::vector<std::string> dry = where;
  dry.push_back("--dry-run");
  EXPECT_EQ(RunClean(dry, &text), kExitOk) << text;
  EXPECT_EQ(shm::Channel::List(root_.options())->size(), names.size());
  EXPECT_EQ(RunClean(where, &text), kExitOk) << text;
  for (const std::string& n : names) {
    EXPECT_THAT(text, HasSubstr("removed " + n + ": cannot open ("));
  }
  EXPECT_TRUE(shm::Channel::List(root_.options())->empty());
  // Their reader-state files went with them: the folder is empty.
  EXPECT_THAT(text, HasSubstr("removed empty directory"));
}

// A file no header vouches for (junk where a channel's file would be) is
// decided by the maps scan: removed where every process's maps can be
// read, kept with exit status 1 and the --force advice where some cannot.
TEST_F(ChannelCommandsTest, CleanOfJunkSaysWhetherItRemovedIt) {
  const std::string dir = root_.root() + "/test/";
  ASSERT_EQ(std::system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "%2Fjunk") << std::string(4096, '\0');
  EXPECT_FALSE(shm::Channel::LockTellsUse(root_.options(), "/junk"));
  std::string text;
  const int code =
      RunClean({"--root", root_.root(), "--instance", "test"}, &text);
  const bool gone = ::access((dir + "%2Fjunk").c_str(), F_OK) != 0;
  if (gone) {
    EXPECT_EQ(code, kExitOk) << text;
    EXPECT_THAT(text, HasSubstr("removed /junk: cannot open ("));
  } else {
    EXPECT_EQ(code, kExitFailure) << text;
    EXPECT_THAT(text, HasSubstr("/junk: kept: cannot open ("));
    EXPECT_THAT(text, HasSubstr("--force removes it"));
  }
}

}  // namespace
}  // namespace tether::tools
