// Several publisher processes and several reader processes on one channel
// for a few seconds (--seconds=N; the "stress" tagged target runs longer).
// Every reader checks per-publisher order, intact payloads and exact loss
// accounting; afterwards every message sent is either received or counted
// as missed by every reader, and the channel audits clean.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/stress_workers.h"

namespace tether::shm {
namespace {

double g_seconds = 2.0;

TEST(ProcessStress, PublisherAndReaderProcessesAccountForEveryMessage) {
  testing::ScopedRoot root;
  const std::string name = "/stress/process";
  QueueParams params{.slot_size = 1024, .queue_depth = 64, .max_publishers = 4,
                     .max_pinned = 4};
  auto channel = Channel::OpenOrCreate(root.options(), name, params);
  ASSERT_TRUE(channel.ok()) << channel.status();
  testing::SharedBoard* board = testing::SharedBoard::Create();
  ASSERT_NE(board, nullptr);
  constexpr int kPublishers = 3;
  constexpr int kReaders = 4;
  std::vector<pid_t> readers, publishers;
  for (int r = 0; r < kReaders; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::_exit(testing::ReaderMain(root.options(), name, r, r,
                                  /*sleepy=*/r % 2 == 0, /*slow=*/r == 3,
                                  board, 1000 + r));
    }
    readers.push_back(pid);
  }
  while (board->ready.load() < kReaders && board->errors.load() == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (int p = 0; p < kPublishers; ++p) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::_exit(testing::PublisherMain(root.options(), name, p, board, 2000 + p));
    }
    publishers.push_back(pid);
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(g_seconds));
  board->stop = 1;
  for (pid_t pid : publishers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  board->drain = 1;
  for (pid_t pid : readers) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  EXPECT_EQ(board->errors.load(), 0) << board->first_error;
  uint64_t total = 0;
  for (int p = 0; p < kPublishers; ++p) total += board->sent[p].load();
  EXPECT_EQ((*channel)->Stats().next_queue_index, total);
  EXPECT_GT(total, 1000u);
  for (int r = 0; r < kReaders; ++r) {
    SCOPED_TRACE(r);
    const testing::ReaderReport& rep = board->readers[r];
    EXPECT_EQ(rep.done.load(), 1);
    EXPECT_EQ(rep.start.load(), 0u);
    EXPECT_EQ(rep.end.load(), total);
    EXPECT_EQ(rep.received.load() + rep.missed.load(), total);
    uint64_t not_received = 0;
    for (int p = 0; p < kPublishers; ++p) {
      uint64_t got = board->received_from[r][p].load();
      EXPECT_LE(got, board->sent[p].load());
      not_received += board->sent[p].load() - got;
    }
    EXPECT_EQ(not_received, rep.missed.load());
    std::printf("reader %d: received %llu, missed %llu of %llu\n", r,
                static_cast<unsigned long long>(rep.received.load()),
                static_cast<unsigned long long>(rep.missed.load()),
                static_cast<unsigned long long>(total));
  }
  testing::AuditResult audit = testing::Audit(channel->get(), true);
  EXPECT_TRUE(audit.ok()) << audit.ToString();
  testing::SharedBoard::Destroy(board);
}

}  // namespace
}  // namespace tether::shm

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      tether::shm::g_seconds = std::atof(argv[i] + 10);
    }
  }
  return RUN_ALL_TESTS();
}
