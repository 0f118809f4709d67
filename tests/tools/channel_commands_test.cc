// tether echo, pub and stat as libraries, over real channels in a unique
// shm root: output lines, context, losses, undecodable messages, rate
// limiting, errors and statistics. (tether clean: channel_clean_test.cc.)
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/channel_commands_test_fixture.h"
#include "tests/tools/json_test_parser.h"
#include "tests/transport/framing_test.capnp.h"
#include "tools/cli.h"
#include "tools/echo.h"
#include "tools/pub.h"
#include "tools/stat.h"
#include "transport/channel_handle.h"
#include "transport/typed_endpoints.h"

namespace tether::tools {
namespace {

using testing::ChannelCommandsTest;
using ::testing::ContainsRegex;
using ::testing::HasSubstr;

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

}  // namespace
}  // namespace tether::tools
