// The bench protocol in one process: the ping and pong drivers exchange
// headers directly (no transport), so what they record is exactly what a
// runner's system code would see: one round trip per sample after the
// warm-up, the stop message closing each case with context-switch counts,
// fan-out completing only when every subscriber answered, throughput
// counting gaps as losses.
#include "benchmarks/harness/protocol.h"

#include <time.h>

#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace tether::bench {
namespace {

Session TwoCases(int pongs = 1) {
  Session s;
  s.test = pongs > 1 ? bench::Test::kFanout : bench::Test::kLatency;
  s.pongs = pongs;
  s.cases = {Case{64, WriteMode::kTouch16, 5, 2},
             Case{4096, WriteMode::kFull, 3, 0}};
  return s;
}

// Runs the whole session between the drivers; returns the messages sent.
std::vector<PingDriver::Outgoing> Exchange(const Session& s, Board* board) {
  PingDriver ping(s, board);
  std::vector<PongDriver> pongs;
  for (int i = 0; i < s.pongs; ++i) pongs.emplace_back(s, board, i);
  std::vector<PingDriver::Outgoing> sent;
  std::vector<std::byte> buffer(s.max_payload());
  for (;;) {
    const PingDriver::Outgoing o = ping.Next();
    sent.push_back(o);
    absl::Span<std::byte> out(buffer.data(), o.size);
    ping.Write(out, o);
    ping.BeforeSend();
    ping.AfterSend();
    bool complete = false;
    for (int i = 0; i < s.pongs; ++i) {
      const PongDriver::Action a = pongs[i].OnMessage(out);
      if (o.kind == PingDriver::Kind::kTerminate) {
        EXPECT_EQ(a.kind, PongDriver::Kind::kExit);
        continue;
      }
      EXPECT_EQ(a.kind, PongDriver::Kind::kReply);
      EXPECT_EQ(a.sequence, o.sequence);
      EXPECT_EQ(a.size, o.size);
      std::vector<std::byte> reply(a.size);
      pongs[i].Write(absl::Span<std::byte>(reply.data(), reply.size()), a);
      complete = ping.Reply(i, ReadHeader(reply));
      EXPECT_EQ(complete, i == s.pongs - 1) << "reply of pong " << i;
    }
    if (o.kind == PingDriver::Kind::kTerminate) break;
    EXPECT_TRUE(complete);
  }
  return sent;
}

TEST(PingPong, RecordsOneRoundTripPerSampleAfterTheWarmup) {
  const Session s = TwoCases();
  Board* board = *MapBoard(s);
  const std::vector<PingDriver::Outgoing> sent = Exchange(s, board);
  // Case 0: 2 warm-up + 5 samples + stop; case 1: 3 + stop; terminate.
  ASSERT_EQ(sent.size(), 7u + 1 + 3 + 1 + 1);
  EXPECT_EQ(sent[6].sequence, 6u);
  EXPECT_EQ(sent[7].kind, PingDriver::Kind::kStop);
  EXPECT_EQ(sent[8].size, 4096u);
  EXPECT_EQ(sent[8].mode, WriteMode::kFull);
  EXPECT_EQ(sent.back().kind, PingDriver::Kind::kTerminate);
  for (int c = 0; c < 2; ++c) {
    EXPECT_EQ(board->cases[c].done.load(), 1);
    EXPECT_EQ(board->cases[c].samples, s.cases[c].samples);
    for (int i = 0; i < s.cases[c].samples; ++i) {
      EXPECT_GT(board->rtt(c)[i], 0) << "case " << c << " sample " << i;
      EXPECT_GE(board->oneway(c)[i], 0);
      EXPECT_LE(board->oneway(c)[i], board->rtt(c)[i]);
    }
  }
}

TEST(PingPong, FanoutCompletesOnlyWhenEverySubscriberAnswered) {
  const Session s = TwoCases(3);
  Board* board = *MapBoard(s);
  Exchange(s, board);  // asserts that only the last reply completes a round
  EXPECT_EQ(board->cases[1].done.load(), 1);
}

TEST(PingPong, IgnoresRepliesToOtherMessagesAndDuplicates) {
  const Session s = TwoCases(2);
  Board* board = *MapBoard(s);
  PingDriver ping(s, board);
  const PingDriver::Outgoing o = ping.Next();
  EXPECT_FALSE(ping.Reply(0, Header{o.sequence + 1, 0}));  // stale
  EXPECT_FALSE(ping.Reply(0, Header{o.sequence, 0}));
  EXPECT_FALSE(ping.Reply(0, Header{o.sequence, 0}));      // duplicate
  EXPECT_FALSE(ping.Reply(5, Header{o.sequence, 0}));      // no such pong
  EXPECT_TRUE(ping.Reply(1, Header{o.sequence, 0}));
}

TEST(PingPong, ACaseOverItsTimeBudgetEndsWithAtLeastThirtySamples) {
  Session s;
  s.cases = {Case{64, WriteMode::kTouch16, 1000, 2}};
  s.case_budget_ms = 1;
  Board* board = *MapBoard(s);
  PingDriver ping(s, board);
  PongDriver pong(s, board, 0);
  std::vector<std::byte> buffer(64);
  int data = 0;
  for (;;) {
    const PingDriver::Outgoing o = ping.Next();
    if (o.kind == PingDriver::Kind::kTerminate) break;
    data += o.kind == PingDriver::Kind::kData;
    absl::Span<std::byte> out(buffer.data(), buffer.size());
    ping.Write(out, o);
    const PongDriver::Action a = pong.OnMessage(out);
    std::vector<std::byte> reply(a.size);
    pong.Write(absl::Span<std::byte>(reply.data(), reply.size()), a);
    if (o.kind == PingDriver::Kind::kData) {
      timespec ts{0, 200000};  // 30 rounds take 6 ms, past the 1 ms budget
      ::nanosleep(&ts, nullptr);
    }
    ASSERT_TRUE(ping.Reply(0, ReadHeader(reply)));
  }
  EXPECT_EQ(board->cases[0].done.load(), 1);
  EXPECT_EQ(board->cases[0].samples, 30);
  EXPECT_EQ(data, 2 + 30);
}

TEST(PayloadSource, Touch16WritesOnlyTheHeaderAndFullWritesEveryByte) {
  PayloadSource source(256);
  std::vector<std::byte> touched(256, std::byte{0xee});
  source.Write(absl::Span<std::byte>(touched.data(), touched.size()),
               WriteMode::kTouch16, Header{7, 9});
  EXPECT_EQ(ReadHeader(touched).sequence, 7u);
  EXPECT_EQ(ReadHeader(touched).send_ns, 9u);
  for (size_t i = 16; i < touched.size(); ++i) {
    ASSERT_EQ(touched[i], std::byte{0xee}) << i;
  }
  std::vector<std::byte> full(256, std::byte{0xee});
  source.Write(absl::Span<std::byte>(full.data(), full.size()), WriteMode::kFull,
               Header{7, 9});
  int untouched = 0;
  for (size_t i = 16; i < full.size(); ++i) untouched += full[i] == std::byte{0xee};
  EXPECT_LT(untouched, 4);  // the pattern repeats 0xee at most rarely
}

std::vector<std::byte> Message(uint64_t sequence, uint64_t stamp = 0) {
  std::vector<std::byte> m(64);
  const Header h{sequence, stamp};
  std::memcpy(m.data(), &h, sizeof(h));
  return m;
}

TEST(RateCounter, CountsGapsAsLostAndReportsEachPhaseOnce) {
  Session s;
  s.test = bench::Test::kThroughput;
  Board* board = *MapBoard(s);
  RateCounter counter(board);
  for (uint64_t seq : {0, 1, 2, 5, 6}) {
    EXPECT_FALSE(counter.OnMessage(Message(seq)));
  }
  EXPECT_FALSE(counter.OnMessage(Message(kStop, 0)));
  EXPECT_EQ(board->phases_reported.load(), 1);
  EXPECT_EQ(board->phases[0].received, 5);
  EXPECT_EQ(board->phases[0].lost, 2);
  // A repeated stop for the same phase changes nothing.
  EXPECT_FALSE(counter.OnMessage(Message(kStop, 0)));
  EXPECT_EQ(board->phases_reported.load(), 1);
  // The next phase starts from zero.
  for (uint64_t seq : {0, 1, 2}) EXPECT_FALSE(counter.OnMessage(Message(seq)));
  EXPECT_FALSE(counter.OnMessage(Message(kStop, 1)));
  EXPECT_EQ(board->phases[1].received, 3);
  EXPECT_EQ(board->phases[1].lost, 0);
  EXPECT_TRUE(counter.OnMessage(Message(kTerminate)));
}

}  // namespace
}  // namespace tether::bench
