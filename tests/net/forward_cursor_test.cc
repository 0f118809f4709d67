// ForwardCursor: the net bridge's position in an out channel across its
// restarts — what a later run counts as sent while no bridge ran, a new
// incarnation of the channel or a foreign file starting afresh, and the
// position surviving a SIGKILL of the process that kept it.
#include "net/forward_cursor.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"

namespace tether::net {
namespace {

class ForwardCursorTest : public ::testing::Test {
 protected:
  ForwardCursorTest() {
    std::filesystem::create_directories(root_.root() + "/" +
                                        root_.options().instance);
  }
  // `start`: where the run's watcher starts (the channel's next index).
  std::unique_ptr<ForwardCursor> Open(uint64_t incarnation = 7,
                                      uint64_t start = 0) {
    auto c = ForwardCursor::Open(root_.options(), "/robot/scan", "robot",
                                 incarnation, start);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }
  shm::testing::ScopedRoot root_;
};

TEST_F(ForwardCursorTest, ALaterRunCountsWhatWasSentBetweenRuns) {
  // The first run ever starts at 5: what came before it is not a loss.
  auto first = Open(7, /*start=*/5);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->Resume(5), 0u);
  first->Advance(5);
  first->Advance(6);
  first.reset();

  auto second = Open();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->Resume(10), 3u);  // 7, 8 and 9 crossed nothing
  second->Advance(10);
  second.reset();

  // A run that handled nothing leaves the position where it was, wherever
  // its watcher started.
  Open(7, /*start=*/30).reset();
  auto fourth = Open();
  EXPECT_EQ(fourth->Resume(11), 0u);
  // Ahead of the first index seen: no position, not a huge count.
  fourth.reset();
  EXPECT_EQ(Open()->Resume(3), std::nullopt);
}

TEST_F(ForwardCursorTest, ANewIncarnationOrAForeignFileStartsAfresh) {
  auto c = Open(/*incarnation=*/7);
  c->Advance(100);
  const std::string path = c->path();
  c.reset();
  // The channel was removed and made again: its indices start over, from
  // where this run starts; the caller is told why (what the old position
  // would have counted is not counted).
  auto again = Open(/*incarnation=*/8, /*start=*/3);
  EXPECT_EQ(again->Resume(3), 0u);
  EXPECT_NE(again->started_afresh().find("another incarnation"),
            std::string::npos)
      << again->started_afresh();
  again.reset();
  EXPECT_EQ(Open(8)->started_afresh(), "") << "its own file: kept";
  std::ofstream(path, std::ios::trunc) << "not a cursor, but long enough";
  auto foreign = Open(/*incarnation=*/8, /*start=*/2);
  EXPECT_EQ(foreign->Resume(3), 1u);
  EXPECT_NE(foreign->started_afresh().find("not a cursor"), std::string::npos)
      << foreign->started_afresh();
  foreign.reset();
  std::ofstream(path, std::ios::trunc) << "short";
  EXPECT_NE(Open(8)->started_afresh().find("cut short (5 bytes)"),
            std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::create_directory(path);
  auto refused =
      ForwardCursor::Open(root_.options(), "/robot/scan", "robot", 8, 0);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("is not a regular file: remove it"),
            std::string::npos)
      << refused.status();
}

// Truncated under a running bridge (`truncate -s 0`, another process):
// the next store would be a SIGBUS; it is absorbed, damaged() says so, and
// a cursor opened again at the position works (what the bridge does).
TEST_F(ForwardCursorTest, ACursorTruncatedUnderItIsDamagedNotACrash) {
  auto c = Open(7, /*start=*/0);
  c->Advance(3);
  EXPECT_FALSE(c->damaged());
  ASSERT_EQ(::truncate(c->path().c_str(), 0), 0);
  c->Advance(4);  // would have been a SIGBUS
  EXPECT_TRUE(c->damaged());
  c.reset();
  auto again = Open(7, /*start=*/5);
  EXPECT_FALSE(again->damaged());
  EXPECT_EQ(again->Resume(5), 0u);
  again->Advance(5);
  again.reset();
  EXPECT_EQ(Open()->Resume(8), 2u);  // 6 and 7
}

TEST_F(ForwardCursorTest, ThePositionSurvivesASigkill) {
  Open()->Advance(1);  // an earlier run left a position
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = ForwardCursor::Open(root_.options(), "/robot/scan", "robot", 7,
                                 /*start=*/2);
    if (!c.ok()) ::_exit(2);
    (*c)->Resume(2);
    (*c)->Advance(41);
    ::kill(::getpid(), SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(Open()->Resume(50), 8u);  // 42..49
}

TEST_F(ForwardCursorTest, AFirstRunThatDiedBeforeItsFirstForwardLeftAPosition) {
  // Started at 12, killed before any message came: nothing handled.
  Open(7, /*start=*/12).reset();
  // The next run starts later; its first message is 20: 12..19 were sent
  // while no bridge forwarded them.
  EXPECT_EQ(Open(7, /*start=*/18)->Resume(20), 8u);
}

TEST_F(ForwardCursorTest, AFileWithNoPositionTakesThisRunsStart) {
  // What a build before `start` left when no run had handled a message.
  Open(7).reset();
  const std::string path = shm::Channel::CompanionPathFor(
      root_.options(), "/robot/scan", ForwardCursor::kKind, "robot");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t none = ~uint64_t{0};
    f.seekp(ForwardCursor::kPositionOffset);
    f.write(reinterpret_cast<const char*>(&none), sizeof(none));
  }
  EXPECT_EQ(Open(7, /*start=*/4)->Resume(6), 2u);
}

// The stream of frames (net/frame.idl) goes on across runs: the next run
// continues the sequence numbers and the lost count, and the gap Resume()
// counts is in that count, so a receiver that saw the last run counts it
// even when the frame that would have told it never arrived.
TEST_F(ForwardCursorTest, TheStreamGoesOnAcrossRunsWithTheGapInItsLostCount) {
  auto first = Open(7, /*start=*/0);
  const ForwardCursor::Stream s = first->stream();
  EXPECT_NE(s.id, 0u);
  EXPECT_EQ(s.last_seq, 0u);
  EXPECT_EQ(s.lost, 0u);
  EXPECT_EQ(first->Resume(0), 0u);
  first->Record(1, 2, 2);  // frame 1, of message 2; 0 and 1 overwritten
  first->Advance(2);
  first.reset();

  auto second = Open(7, /*start=*/9);
  EXPECT_EQ(second->stream().id, s.id);
  EXPECT_EQ(second->stream().last_seq, 1u);
  EXPECT_EQ(second->Resume(9), 6u);  // 3..8
  EXPECT_EQ(second->stream().lost, 8u);
  second.reset();  // killed before it forwarded anything

  // Its gap is in the count and its start is the position: the third run
  // counts only what came after, not 3..8 again.
  auto third = Open(7, /*start=*/12);
  EXPECT_EQ(third->Resume(12), 3u);  // 9..11
  EXPECT_EQ(third->stream().lost, 11u);
  EXPECT_EQ(third->stream().id, s.id);
  third.reset();

  // Another incarnation is another stream.
  auto other = Open(8, /*start=*/0);
  EXPECT_NE(other->stream().id, s.id);
  EXPECT_EQ(other->stream().last_seq, 0u);
  EXPECT_EQ(other->stream().lost, 0u);
  other.reset();

  // Made again under a running bridge, it keeps the run's stream.
  const ForwardCursor::Stream keep{42, 17, 5};
  auto again = ForwardCursor::Open(root_.options(), "/robot/scan", "robot", 8,
                                   /*start=*/3, &keep);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->stream().id, 42u);
  EXPECT_EQ((*again)->stream().last_seq, 17u);
  EXPECT_EQ((*again)->stream().lost, 5u);
}

TEST_F(ForwardCursorTest, AnOlderBuildsFileKeepsItsPositionAndStartsAStream) {
  const std::string path = shm::Channel::CompanionPathFor(
      root_.options(), "/robot/scan", ForwardCursor::kKind, "robot");
  {
    // magic "TNETNCUR", incarnation 7, position 4: no stream.
    const uint64_t words[3] = {0x5255434e'54454e54ull, 7, 4};
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(words), sizeof(words));
  }
  ASSERT_EQ(std::filesystem::file_size(path), ForwardCursor::kStreamlessSize);
  auto c = Open(7, /*start=*/6);
  EXPECT_EQ(c->started_afresh(), "");
  EXPECT_EQ(c->Resume(6), 2u);  // 4 and 5
  EXPECT_NE(c->stream().id, 0u);
  EXPECT_EQ(c->stream().last_seq, 0u);
  EXPECT_EQ(c->stream().lost, 2u);
}

TEST_F(ForwardCursorTest, TheStreamSurvivesASigkill) {
  const uint64_t id = Open()->stream().id;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = ForwardCursor::Open(root_.options(), "/robot/scan", "robot", 7,
                                 /*start=*/0);
    if (!c.ok()) ::_exit(2);
    // About to write frame 42, of message 50, 9 lost in all so far.
    (*c)->Record(42, 9, 50);
    ::kill(::getpid(), SIGKILL);
    ::_exit(3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));
  auto c = Open();
  const ForwardCursor::Stream s = c->stream();
  EXPECT_EQ(s.id, id);
  EXPECT_EQ(s.last_seq, 42u);  // the next run writes 43 on
  EXPECT_EQ(s.lost, 9u);
  // Killed before the write: message 50 is counted by the next run (the
  // messages the 9 counted, before it, are not counted again).
  EXPECT_EQ(c->Resume(60), 10u);  // 50..59
}

// Two bridges of one name on one instance would write the same stream's
// numbers (a receiver would drop one's frames as duplicates): the second
// cannot open the cursor while the first has it, and can once it is gone.
TEST_F(ForwardCursorTest, ASecondBridgeOfTheSameNameCannotOpenTheCursor) {
  auto first = Open();
  ASSERT_NE(first, nullptr);
  auto second = ForwardCursor::Open(root_.options(), "/robot/scan", "robot", 7,
                                    /*start=*/0);
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("is in use by another process"),
            std::string::npos)
      << second.status();
  first.reset();
  EXPECT_NE(Open(), nullptr);
}

// A file killed while it was given a stream (the id, stored last, still 0)
// keeps its position and is given one by the next Open().
TEST_F(ForwardCursorTest, AFileWithNoStreamIdIsGivenOne) {
  Open(7, /*start=*/3).reset();
  const std::string path = shm::Channel::CompanionPathFor(
      root_.options(), "/robot/scan", ForwardCursor::kKind, "robot");
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t none = 0;
    f.seekp(ForwardCursor::kStreamlessSize);
    f.write(reinterpret_cast<const char*>(&none), sizeof(none));
  }
  auto c = Open(7, /*start=*/5);
  EXPECT_EQ(c->started_afresh(), "");
  EXPECT_NE(c->stream().id, 0u);
  EXPECT_EQ(c->Resume(5), 2u);  // 3 and 4
}

// Removed, replaced or cut short inside its page (no SIGBUS) under the
// process: Gone() says which, so the bridge makes it again.
TEST_F(ForwardCursorTest, GoneSaysWhenTheFileIsNoLongerTheCursors) {
  auto c = Open();
  EXPECT_EQ(c->Gone(), "");
  c->Advance(9);
  EXPECT_EQ(c->position(), 10u);
  ASSERT_EQ(::truncate(c->path().c_str(), 24), 0);
  EXPECT_EQ(c->Gone(), "was cut short to 24 bytes");
  ASSERT_TRUE(std::filesystem::remove(c->path()));
  EXPECT_EQ(c->Gone(), "was removed");
  std::ofstream(c->path()) << "another file";
  EXPECT_EQ(c->Gone(), "was replaced by another file");
  EXPECT_EQ(c->position(), 10u);  // still known, for the cursor made again
}

}  // namespace
}  // namespace tether::net
