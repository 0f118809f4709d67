// Channels shared between users: a stack's channels made by root, read by
// processes running as user nobody, for each permission case — a group
// reader that may write the reader state (pinned, in place), a guest that
// may only read both files (unpinned), a user with no access (an error that
// names the real cause), and a read-only reader that tries to write (it
// cannot: the data file is unchanged byte for byte, and what other readers
// see is intact). Root drops to nobody in forked children, so this runs
// outside Bazel's sandbox (tag no-sandbox); as non-root it is skipped.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/multi_user_test.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using ::testing::HasSubstr;
using tether::testing::RunAsNobody;
using tether::testing::ScopedGroup;

constexpr QueueParams kParams{.slot_size = 256, .queue_depth = 8,
                              .max_publishers = 1, .max_pinned = 4};

// Child-side checks: print what failed (the test log shows it), exit code.
#define CHILD_CHECK(cond, code)                                        \
  do {                                                                 \
    if (!(cond)) {                                                     \
      std::fprintf(stderr, "child: %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      return code;                                                     \
    }                                                                  \
  } while (0)

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

class SharedAccess : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to nobody";
  }

  // Root's stack: the channel with `mode`/`reader_mode` and the test group,
  // and `count` pattern messages in it.
  void MakeChannel(mode_t mode, mode_t reader_mode, int count = 5) {
    root_.options().mode = mode;
    root_.options().reader_mode = reader_mode;
    root_.options().group = group_.gid();
    auto c = Channel::OpenOrCreate(root_.options(), "/robot/state", kParams);
    ASSERT_TRUE(c.ok()) << c.status();
    channel_ = std::move(*c);
    auto p = Publisher::Create(channel_.get());
    ASSERT_TRUE(p.ok()) << p.status();
    publisher_ = std::move(*p);
    for (int i = 0; i < count; ++i) Send(i);
  }
  void Send(uint64_t seq) {
    const size_t n = testing::WritePattern(publisher_->Loan(), 7, seq, 100);
    ASSERT_EQ(publisher_->Send(n).status, SendStatus::kOk);
  }

  testing::ScopedRoot root_;
  ScopedGroup group_;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Publisher> publisher_;
};

TEST_F(SharedAccess, InstanceFolderHasTheStacksGroupAndLetsItIn) {
  MakeChannel(0640, 0660);
  struct stat st;
  const std::string dir = root_.root() + "/test";
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group_.gid());
  // The group enters and lists; files made there inherit the group
  // (setgid); no sticky bit; others stay out (the data is 0640).
  EXPECT_EQ(st.st_mode & 07777, static_cast<mode_t>(S_ISGID | 0750))
      << std::oct << (st.st_mode & 07777);
  ASSERT_EQ(::stat(channel_->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(st.st_gid, group_.gid());
  ASSERT_EQ(::stat(channel_->reader_state_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  EXPECT_EQ(st.st_gid, group_.gid());
}

TEST_F(SharedAccess, GroupReaderPinsAndReadsInPlaceButCannotPublish) {
  MakeChannel(0640, 0660);
  const int rc = RunAsNobody({group_.gid()}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(c.ok(), 1);
    CHILD_CHECK(!(*c)->data_writable(), 2);
    CHILD_CHECK((*c)->reader_state_writable(), 3);
    auto pub = Publisher::Create(c->get());
    CHILD_CHECK(!pub.ok() && absl::IsPermissionDenied(pub.status()), 4);
    CHILD_CHECK(std::string(pub.status().message()).find("may not write") !=
                    std::string::npos,
                5);
    auto r = Reader::Create(c->get(), {.pin = true,
                                      .start = ReaderOptions::Start::kOldest});
    CHILD_CHECK(r.ok() && (*r)->pinning(), 6);
    Sleeper sleeper = (*c)->RegisterSleeper();
    CHILD_CHECK(!sleeper.guest(), 7);
    MessageView v;
    for (int i = 0; i < 5; ++i) {
      CHILD_CHECK((*r)->Next(&v) == ReadStatus::kOk, 8);
      testing::PatternHeader h;
      CHILD_CHECK(testing::CheckPattern(v.data, &h) && h.sequence == uint64_t(i), 9);
    }
    // Dies holding its pin and registration (no destructors run): root's
    // sweep reclaims them.
    std::fflush(nullptr);
    ::_exit((*c)->Stats().pinning_readers == 1 ? 0 : 10);
  });
  EXPECT_EQ(rc, 0);
  // The dead reader's pin and registration are swept by root.
  SweepReport report = channel_->Sweep();
  EXPECT_EQ(report.dead_readers, 1);
  EXPECT_EQ(channel_->Stats().pinning_readers, 0);
}

TEST_F(SharedAccess, GuestReadsUnpinnedCopiesAndAffectsNobody) {
  MakeChannel(0644, 0644);
  const std::string data_before = ReadFile(channel_->path());
  const std::string state_before = ReadFile(channel_->reader_state_path());
  const int rc = RunAsNobody({}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(c.ok(), 1);
    CHILD_CHECK(!(*c)->data_writable() && !(*c)->reader_state_writable(), 2);
    const std::string why = (*c)->GuestReason();
    CHILD_CHECK(why.find("guest") != std::string::npos, 3);
    CHILD_CHECK(why.find((*c)->reader_state_path()) != std::string::npos, 4);
    // Pinning is refused with the reason ...
    auto pinned = Reader::Create(c->get(), {.pin = true});
    CHILD_CHECK(!pinned.ok() && absl::IsPermissionDenied(pinned.status()), 5);
    CHILD_CHECK(std::string(pinned.status().message()).find("guest") !=
                    std::string::npos,
                6);
    // ... unpinned reads work: copy, then check.
    auto r = Reader::Create(c->get(), {.pin = false,
                                      .start = ReaderOptions::Start::kOldest});
    CHILD_CHECK(r.ok(), 7);
    MessageView v;
    for (int i = 0; i < 5; ++i) {
      CHILD_CHECK((*r)->Next(&v) == ReadStatus::kOk, 8);
      std::vector<std::byte> copy(v.data.begin(), v.data.end());
      CHILD_CHECK((*r)->StillValid(v), 9);
      testing::PatternHeader h;
      CHILD_CHECK(testing::CheckPattern(copy, &h) && h.sequence == uint64_t(i), 10);
    }
    // A guest's sleeper announces nothing, and its wake bumps nothing.
    Sleeper s = (*c)->RegisterSleeper();
    CHILD_CHECK(s.guest(), 11);
    s.BeginSleep();
    s.EndSleep();
    (*c)->WakeAll();
    const SweepReport report = (*c)->Sweep();
    CHILD_CHECK(report.skipped_data && report.skipped_reader_state, 12);
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ReadFile(channel_->path()), data_before) << "the guest wrote data";
  EXPECT_EQ(ReadFile(channel_->reader_state_path()), state_before)
      << "the guest wrote reader state";
}

TEST_F(SharedAccess, NoAccessNamesTheFolderTheGroupAndWhoWeAre) {
  MakeChannel(0640, 0660);
  const std::string group = group_.name();
  const int rc = RunAsNobody({}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(!c.ok() && absl::IsPermissionDenied(c.status()), 1);
    const std::string m(c.status().message());
    std::fprintf(stderr, "child saw: %s\n", m.c_str());
    CHILD_CHECK(m.find("cannot enter the folder " + root_.root() + "/test") !=
                    std::string::npos,
                2);
    CHILD_CHECK(m.find("uid 65534 (nobody)") != std::string::npos, 3);
    CHILD_CHECK(m.find("group " + group) != std::string::npos, 4);
    CHILD_CHECK(m.find("usermod -aG " + group + " nobody") != std::string::npos,
                5);
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

// A stack whose channels name no group gets folders of group root (root
// launched it). Joining group root is never the advice: giving the stack's
// channels a group of their own is, and how to give it to this folder.
TEST_F(SharedAccess, AFolderOfGroupRootNeverAdvisesJoiningRoot) {
  root_.options().mode = 0640;
  auto made = Channel::OpenOrCreate(root_.options(), "/robot/state", kParams);
  ASSERT_TRUE(made.ok()) << made.status();
  const std::string dir = root_.root() + "/test";
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  ASSERT_EQ(st.st_gid, 0u);
  ASSERT_EQ(st.st_mode & 07777, 0750u) << std::oct << (st.st_mode & 07777);
  const int rc = RunAsNobody({}, [&] {
    auto listed = Channel::List(root_.options());
    CHILD_CHECK(!listed.ok() && absl::IsPermissionDenied(listed.status()), 1);
    auto opened = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(!opened.ok() && absl::IsPermissionDenied(opened.status()), 2);
    for (const absl::Status& s : {listed.status(), opened.status()}) {
      const std::string m(s.message());
      std::fprintf(stderr, "child saw: %s\n", m.c_str());
      CHILD_CHECK(m.find("mode 0750, owner root, group root") !=
                      std::string::npos,
                  3);
      CHILD_CHECK(m.find("membership of group root") == std::string::npos, 4);
      CHILD_CHECK(m.find("usermod -aG root") == std::string::npos, 5);
      CHILD_CHECK(m.find("a group of their own (\"group\")") !=
                      std::string::npos,
                  6);
      CHILD_CHECK(m.find("chgrp GROUP " + dir + " && chmod g+s " + dir) !=
                      std::string::npos,
                  7);
    }
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(SharedAccess, NoAccessToTheFileItselfNamesTheFileAndTheFix) {
  // Folder open to others (the reader state is 0664), the data file not.
  MakeChannel(0640, 0664);
  const std::string group = group_.name();
  const int rc = RunAsNobody({}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(!c.ok() && absl::IsPermissionDenied(c.status()), 1);
    const std::string m(c.status().message());
    std::fprintf(stderr, "child saw: %s\n", m.c_str());
    CHILD_CHECK(m.find("may not read " + channel_->path()) != std::string::npos,
                2);
    CHILD_CHECK(m.find("mode 0640, owner root, group " + group) !=
                    std::string::npos,
                3);
    CHILD_CHECK(m.find("ask for membership of group " + group) !=
                    std::string::npos,
                4);
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(SharedAccess, CanReadDataButNotReaderStateSaysSo) {
  MakeChannel(0644, 0660);  // others read the data, not the reader state
  const int rc = RunAsNobody({}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(!c.ok() && absl::IsPermissionDenied(c.status()), 1);
    const std::string m(c.status().message());
    std::fprintf(stderr, "child saw: %s\n", m.c_str());
    CHILD_CHECK(m.find("you can read " + channel_->path() +
                       " but not its reader state") != std::string::npos,
                2);
    CHILD_CHECK(m.find(channel_->reader_state_path()) != std::string::npos, 3);
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

TEST_F(SharedAccess, ReadOnlyReaderCannotChangeAByteOtherReadersSee) {
  MakeChannel(0640, 0660);
  auto watcher = Reader::Create(channel_.get(),
                                {.pin = true,
                                 .start = ReaderOptions::Start::kOldest});
  ASSERT_TRUE(watcher.ok());
  const std::string data_before = ReadFile(channel_->path());
  const int rc = RunAsNobody({group_.gid()}, [&] {
    auto c = Channel::Open(root_.options(), "/robot/state");
    CHILD_CHECK(c.ok() && !(*c)->data_writable(), 1);
    // The file itself refuses writing ...
    CHILD_CHECK(::open((*c)->path().c_str(), O_RDWR) < 0 && errno == EACCES, 2);
    CHILD_CHECK(::truncate((*c)->path().c_str(), 0) != 0, 3);
    // ... and so does the mapping: a store into it dies of SIGSEGV.
    auto r = Reader::Create(c->get(), {.pin = true,
                                      .start = ReaderOptions::Start::kOldest});
    CHILD_CHECK(r.ok(), 4);
    MessageView v;
    CHILD_CHECK((*r)->Next(&v) == ReadStatus::kOk, 5);
    const pid_t writer = ::fork();
    if (writer == 0) {
      const_cast<std::byte*>(v.data.data())[0] = std::byte{0x5a};
      ::_exit(0);  // the store went through: a failure
    }
    int status = 0;
    ::waitpid(writer, &status, 0);
    CHILD_CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, 6);
    // mprotect cannot lift it either: the file was opened read-only.
    void* page = reinterpret_cast<void*>(
        reinterpret_cast<uintptr_t>(v.data.data()) & ~uintptr_t{4095});
    CHILD_CHECK(::mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0, 7);
    // Everything a reader does: no byte of the data file changes.
    for (int i = 0; i < 10; ++i) (void)(*r)->Next(&v);
    (*r)->Release();
    (void)(*c)->Sweep();
    (void)(*c)->CheckConsistency();
    (*c)->WakeAll();
    return 0;
  });
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(ReadFile(channel_->path()), data_before)
      << "a read-only reader changed the data file";
  // And what root's reader sees is intact.
  MessageView v;
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ((*watcher)->Next(&v), ReadStatus::kOk);
    testing::PatternHeader h;
    ASSERT_TRUE(testing::CheckPattern(v.data, &h));
    EXPECT_EQ(h.sequence, static_cast<uint64_t>(i));
  }
}

}  // namespace
}  // namespace tether::shm
