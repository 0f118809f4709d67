// A process without access to a channel file gets PermissionDenied with the
// fix. Runs outside Bazel's sandbox (tag no-sandbox) so that root can drop
// to another user; a non-root user is refused a mode-0000 file directly.
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

constexpr QueueParams kParams{.slot_size = 64, .queue_depth = 4,
                              .max_publishers = 1, .max_pinned = 1};

// 0 when Open is refused with the right code and message.
int TryOpen(const ChannelOptions& options) {
  auto c = Channel::Open(options, "c");
  if (c.ok()) return 11;
  if (c.status().code() != absl::StatusCode::kPermissionDenied) return 12;
  // Names who we are and the file's mode, not just "denied".
  const std::string m(c.status().message());
  // (Root's run: the instance folder, mode 0700, is what stops nobody.)
  if ((m.find("may not read") == std::string::npos &&
       m.find("cannot enter the folder") == std::string::npos) ||
      m.find("mode 0") == std::string::npos ||
      m.find("you (uid") == std::string::npos) {
    return 13;
  }
  return 0;
}

TEST(ChannelPermission, ProcessWithoutAccessGetsPermissionDeniedAndTheFix) {
  testing::ScopedRoot root;
  root.options().mode = ::geteuid() == 0 ? 0600 : 0;
  ASSERT_TRUE(Channel::OpenOrCreate(root.options(), "c", kParams).ok());
  if (::geteuid() != 0) {
    EXPECT_EQ(TryOpen(root.options()), 0);
    return;
  }
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(10);
    ::_exit(TryOpen(root.options()));
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  ASSERT_NE(WEXITSTATUS(status), 10) << "could not drop to user nobody";
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

}  // namespace
}  // namespace tether::shm
