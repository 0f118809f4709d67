// Real-time settings: each succeeds where the privilege exists (root here,
// outside Bazel's sandbox) and, in a child that dropped to `nobody`, fails
// with a status that names the missing privilege and the fix. Also the
// RealtimeScope bookkeeping (the checker itself: rt_alloc_check_test).
#include "loop/realtime.h"

#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tether::loop {
namespace {

constexpr int kSkip = 77;

// Sanitizer runtimes intercept mlock/mlockall and make them no-ops.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kMlockIntercepted = true;
#else
constexpr bool kMlockIntercepted = false;
#endif

// What a child reports back: its exit code and the status message.
struct ChildResult {
  int exit_code = -1;
  std::string message;
};

// Runs `body` in a forked child; its returned Status travels back through a
// pipe as "<code>\n<message>". The child exits with the status code, or
// kSkip if `body` decided the test cannot run here.
template <typename Body>
ChildResult RunInChild(Body body) {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    int skip = 0;
    const absl::Status s = body(&skip);
    const std::string text(s.message());
    (void)!::write(fds[1], text.data(), text.size());
    ::_exit(skip != 0 ? kSkip : static_cast<int>(s.code()));
  }
  ::close(fds[1]);
  ChildResult result;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) result.message.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Drops to nobody/nogroup with real-time and memlock limits of zero. False
// where setuid is impossible (Bazel's linux-sandbox user namespace).
bool DropPrivileges(rlim_t memlock) {
  const rlimit rtprio = {0, 0};
  const rlimit lock = {memlock, memlock};
  if (::setrlimit(RLIMIT_RTPRIO, &rtprio) != 0) return false;
  if (::setrlimit(RLIMIT_MEMLOCK, &lock) != 0) return false;
  if (::setgroups(0, nullptr) != 0) return false;
  if (::setgid(65534) != 0) return false;
  if (::setuid(65534) != 0) return false;
  return ::geteuid() == 65534;
}

#define EXPECT_CHILD_SKIPPED_OR(result)                        \
  if ((result).exit_code == kSkip) {                           \
    GTEST_SKIP() << "cannot drop privileges here (sandbox?)";  \
  }

TEST(Realtime, PriorityOutsideThePolicyRangeIsInvalidArgument) {
  absl::Status s = SetThreadScheduling(SchedPolicy::kFifo, 0);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("[1, 99]"), absl::string_view::npos) << s;
  s = SetThreadScheduling(SchedPolicy::kOther, 5);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST(Realtime, FifoWithoutPrivilegeNamesCapSysNiceAndRtprio) {
  const ChildResult r = RunInChild([](int* skip) {
    if (!DropPrivileges(64 * 1024)) {
      *skip = 1;
      return absl::OkStatus();
    }
    return SetThreadScheduling(SchedPolicy::kFifo, 10);
  });
  EXPECT_CHILD_SKIPPED_OR(r);
  EXPECT_EQ(r.exit_code, static_cast<int>(absl::StatusCode::kPermissionDenied))
      << r.message;
  EXPECT_NE(r.message.find("CAP_SYS_NICE"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("rtprio"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("limits.conf"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("soft 0"), std::string::npos)
      << "names the current limit: " << r.message;
}

TEST(Realtime, LockMemoryWithoutPrivilegeNamesMemlockAndTheLimit) {
  if (kMlockIntercepted) GTEST_SKIP() << "the sanitizer makes mlockall a no-op";
  const ChildResult r = RunInChild([](int* skip) {
    if (!DropPrivileges(64 * 1024)) {
      *skip = 1;
      return absl::OkStatus();
    }
    return LockMemory();
  });
  EXPECT_CHILD_SKIPPED_OR(r);
  EXPECT_EQ(r.exit_code,
            static_cast<int>(absl::StatusCode::kResourceExhausted))
      << r.message;
  EXPECT_NE(r.message.find("CAP_IPC_LOCK"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("memlock"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("soft 65536"), std::string::npos) << r.message;
}

TEST(Realtime, LockMemoryWithAZeroLimitIsPermissionDenied) {
  if (kMlockIntercepted) GTEST_SKIP() << "the sanitizer makes mlockall a no-op";
  const ChildResult r = RunInChild([](int* skip) {
    if (!DropPrivileges(0)) {
      *skip = 1;
      return absl::OkStatus();
    }
    return LockMemory();
  });
  EXPECT_CHILD_SKIPPED_OR(r);
  EXPECT_EQ(r.exit_code, static_cast<int>(absl::StatusCode::kPermissionDenied))
      << r.message;
}

TEST(Realtime, PinningAnotherUsersThreadWithoutPrivilegeIsPermissionDenied) {
  const pid_t parent = ::getpid();
  const ChildResult r = RunInChild([parent](int* skip) {
    if (!DropPrivileges(0)) {
      *skip = 1;
      return absl::OkStatus();
    }
    const int cpu[] = {0};
    return SetThreadAffinity(cpu, parent);
  });
  EXPECT_CHILD_SKIPPED_OR(r);
  EXPECT_EQ(r.exit_code, static_cast<int>(absl::StatusCode::kPermissionDenied))
      << r.message;
  EXPECT_NE(r.message.find("CAP_SYS_NICE"), std::string::npos) << r.message;
}

TEST(Realtime, FifoWorksWithPrivilegeAndIsPerThread) {
  const ChildResult r = RunInChild([](int* skip) {
    absl::Status s = SetThreadScheduling(SchedPolicy::kFifo, 10);
    if (absl::IsPermissionDenied(s)) {
      *skip = 1;  // no CAP_SYS_NICE here (container, sandbox)
      return s;
    }
    if (!s.ok()) return s;
    if (::sched_getscheduler(0) != SCHED_FIFO) {
      return absl::InternalError("the thread is not SCHED_FIFO");
    }
    return SetThreadScheduling(SchedPolicy::kOther, 0);
  });
  if (r.exit_code == kSkip) GTEST_SKIP() << r.message;
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

TEST(Realtime, AffinityPinsTheCallingThread) {
  std::thread t([] {
    const int cpus[] = {0};
    const absl::Status s = SetThreadAffinity(cpus);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(::sched_getcpu(), 0);
  });
  t.join();
}

TEST(Realtime, AffinityOutsideTheAllowedSetListsTheAllowedCpus) {
  const int cpus[] = {1000};
  const absl::Status s = SetThreadAffinity(cpus);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("may run on CPUs {0"), absl::string_view::npos)
      << s;
  const int bad[] = {-1};
  EXPECT_TRUE(absl::IsInvalidArgument(SetThreadAffinity(bad)));
  EXPECT_TRUE(absl::IsInvalidArgument(SetThreadAffinity({})));
}

TEST(Realtime, LockMemoryWorksWithPrivilege) {
  if (kMlockIntercepted) GTEST_SKIP() << "the sanitizer makes mlockall a no-op";
  const ChildResult r = RunInChild([](int*) {
    absl::Status s = LockMemory();
    PrefaultStack();
    return s;
  });
  EXPECT_EQ(r.exit_code, 0) << r.message;
}

TEST(Realtime, TimerSlackIsSetForTheCallingThread) {
  std::thread t([] {
    ASSERT_TRUE(SetTimerSlack(std::chrono::nanoseconds(1)).ok());
    EXPECT_EQ(::prctl(PR_GET_TIMERSLACK, 0, 0, 0, 0), 1);
  });
  t.join();
  EXPECT_TRUE(absl::IsInvalidArgument(SetTimerSlack(Duration::zero())));
}

TEST(RealtimeScope, MarksTheThreadAndNests) {
  EXPECT_FALSE(AllocationForbidden());
  {
    RealtimeScope outer;
    EXPECT_TRUE(AllocationForbidden());
    {
      RealtimeScope inner;
      AllowAllocationScope allow;
      EXPECT_FALSE(AllocationForbidden());
    }
    EXPECT_TRUE(AllocationForbidden());
    bool other_thread = true;
    std::thread t([&] { other_thread = AllocationForbidden(); });
    t.join();
    EXPECT_FALSE(other_thread) << "the scope is per thread";
  }
  EXPECT_FALSE(AllocationForbidden());
  // This binary does not link //loop:rt_alloc_check.
  EXPECT_FALSE(AllocationCheckActive());
}

}  // namespace
}  // namespace tether::loop
