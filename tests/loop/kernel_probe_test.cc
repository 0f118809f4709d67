// The kernel probe on this machine and on injected /proc and /sys trees, and
// the wake-backend choice on hand-made feature sets.
#include "loop/kernel_probe.h"

#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::loop {
namespace {

using ::testing::HasSubstr;

constexpr KernelVersion kFutexOpsVersion = {6, 7, 0};

// A kernel of the given release with everything up to io_uring futex ops.
KernelFeatures ModernKernel() {
  KernelFeatures f;
  f.kernel_release = "6.18.44-test";
  f.version = KernelVersion{6, 18, 44};
  f.io_uring_disabled_sysctl = 0;
  f.io_uring = true;
  f.setup_single_issuer = true;
  f.setup_defer_taskrun = true;
  f.register_ring_fd = true;
  f.register_probe = true;
  f.op_futex_wait = true;
  f.op_futex_wake = true;
  f.op_futex_waitv = true;
  f.futex_waitv_syscall = true;
  return f;
}

// Debian 12's own kernel: io_uring and futex_waitv, no io_uring futex ops.
KernelFeatures Debian12Kernel() {
  KernelFeatures f = ModernKernel();
  f.kernel_release = "6.1.0-13-amd64";
  f.version = KernelVersion{6, 1, 0};
  f.io_uring_disabled_sysctl.reset();
  f.op_futex_wait = false;
  f.op_futex_wake = false;
  f.op_futex_waitv = false;
  return f;
}

TEST(ProbeKernel, ReportsWhatThisKernelOffers) {
  const KernelFeatures f = ProbeKernel();
  utsname names;
  ASSERT_EQ(uname(&names), 0);
  EXPECT_EQ(f.kernel_release, names.release);
  ASSERT_TRUE(f.version.has_value()) << f.kernel_release;
  EXPECT_TRUE(f.io_uring) << IoUringStatus(f);
  EXPECT_EQ(f.io_uring_setup_errno, 0);
  EXPECT_TRUE(f.register_probe);
  EXPECT_FALSE(f.uring_persistent_futex_wait);
  if (*f.version >= KernelVersion{6, 1, 0}) {
    EXPECT_TRUE(f.setup_single_issuer);
    EXPECT_TRUE(f.setup_defer_taskrun);
    EXPECT_TRUE(f.register_ring_fd);
    EXPECT_TRUE(f.futex_waitv_syscall);
  }
  // The build machines run 6.18; Debian 12's own 6.1 has no futex ops.
  const bool has_ops = *f.version >= kFutexOpsVersion;
  EXPECT_EQ(f.op_futex_wait, has_ops);
  EXPECT_EQ(f.op_futex_wake, has_ops);
  EXPECT_EQ(f.op_futex_waitv, has_ops);

  absl::StatusOr<WakeBackendChoice> choice = ChooseWakeBackend(f);
  ASSERT_TRUE(choice.ok()) << choice.status();
  EXPECT_EQ(choice->backend,
            has_ops ? WakeBackend::kUringFutex : WakeBackend::kFutexWaitv);
}

TEST(ProbeKernel, ProbingTwiceGivesTheSameAnswer) {
  const KernelFeatures a = ProbeKernel();
  const KernelFeatures b = ProbeKernel();
  EXPECT_EQ(a.io_uring, b.io_uring);
  EXPECT_EQ(a.op_futex_wait, b.op_futex_wait);
  EXPECT_EQ(a.setup_defer_taskrun, b.setup_defer_taskrun);
  EXPECT_EQ(a.register_ring_fd, b.register_ring_fd);
}

class FakeRootTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
            ("kernel_probe_test." + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  ProbeOptions Options() const {
    return ProbeOptions{.proc_root = (root_ / "proc").string(),
                        .sys_root = (root_ / "sys").string()};
  }

  std::filesystem::path root_;
};

TEST_F(FakeRootTest, ReadsRealtimeAndTheIoUringSysctlFromTheInjectedRoots) {
  Write("sys/kernel/realtime", "1\n");
  Write("proc/sys/kernel/io_uring_disabled", "1\n");
  const KernelFeatures f = ProbeKernel(Options());
  EXPECT_TRUE(f.preempt_rt);
  EXPECT_EQ(f.io_uring_disabled_sysctl, std::optional<int>(1));
}

TEST_F(FakeRootTest, MissingFilesMeanNoSysctlAndNoRealtimeFlag) {
  const KernelFeatures f = ProbeKernel(Options());
  EXPECT_FALSE(f.io_uring_disabled_sysctl.has_value());
  // Still RT if the build string says so (it does not on the build machines).
  EXPECT_EQ(f.preempt_rt, IsPreemptRt("", f.kernel_build));
}

TEST(ParseKernelRelease, ReadsMajorMinorPatchAndIgnoresTheSuffix) {
  EXPECT_EQ(ParseKernelRelease("6.18.44-fc-v657"),
            std::optional<KernelVersion>(KernelVersion{6, 18, 44}));
  EXPECT_EQ(ParseKernelRelease("6.1.0-13-amd64"),
            std::optional<KernelVersion>(KernelVersion{6, 1, 0}));
  EXPECT_EQ(ParseKernelRelease("6.7-rc1"),
            std::optional<KernelVersion>(KernelVersion{6, 7, 0}));
  EXPECT_EQ(ParseKernelRelease("5.15"),
            std::optional<KernelVersion>(KernelVersion{5, 15, 0}));
  EXPECT_EQ(ParseKernelRelease(""), std::nullopt);
  EXPECT_EQ(ParseKernelRelease("6"), std::nullopt);
  EXPECT_EQ(ParseKernelRelease("linux"), std::nullopt);
  EXPECT_LT((KernelVersion{6, 1, 0}), kFutexOpsVersion);
  EXPECT_GT((KernelVersion{6, 10, 0}), kFutexOpsVersion);
}

TEST(IsPreemptRt, ReadsTheSysfsFlagOrTheBuildString) {
  EXPECT_TRUE(IsPreemptRt("1", "#1 SMP PREEMPT_DYNAMIC"));
  EXPECT_TRUE(IsPreemptRt("", "#1 SMP PREEMPT_RT Debian 6.1.55-1"));
  EXPECT_FALSE(IsPreemptRt("0", "#1 SMP PREEMPT_DYNAMIC"));
  EXPECT_FALSE(IsPreemptRt("", "#1 SMP PREEMPT_DYNAMIC"));
}

TEST(ChooseWakeBackend, ModernKernelUsesOneShotUringFutexWaits) {
  absl::StatusOr<WakeBackendChoice> c = ChooseWakeBackend(ModernKernel());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend, WakeBackend::kUringFutex);
  EXPECT_THAT(c->reason, HasSubstr("IORING_OP_FUTEX_WAIT"));
  EXPECT_THAT(c->reason, HasSubstr("6.18.44-test"));
}

TEST(ChooseWakeBackend, OldKernelFallsBackToTheFutexWaitv) {
  absl::StatusOr<WakeBackendChoice> c = ChooseWakeBackend(Debian12Kernel());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend, WakeBackend::kFutexWaitv);
  EXPECT_THAT(c->reason, HasSubstr("6.7"));
  EXPECT_THAT(c->reason, HasSubstr("loop thread waits in futex_waitv"));
}

TEST(ChooseWakeBackend, PersistentWaitsWinWhenAKernelOffersThem) {
  KernelFeatures f = ModernKernel();
  f.uring_persistent_futex_wait = true;
  absl::StatusOr<WakeBackendChoice> c = ChooseWakeBackend(f);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->backend, WakeBackend::kUringPersistent);
}

TEST(ChooseWakeBackend, KernelWithoutAnyFutexWaitIsAnErrorNamingTheVersion) {
  KernelFeatures f = Debian12Kernel();
  f.kernel_release = "5.10.0-28-amd64";
  f.futex_waitv_syscall = false;
  absl::StatusOr<WakeBackendChoice> c = ChooseWakeBackend(f);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(c.status().message(), HasSubstr("5.16"));
  EXPECT_THAT(c.status().message(), HasSubstr("5.10.0-28-amd64"));
}

TEST(ChooseWakeBackend, ForcedBackendIsUsedWhenSupportedAndRefusedOtherwise) {
  absl::StatusOr<WakeBackendChoice> thread =
      ChooseWakeBackend(ModernKernel(), WakeBackend::kFutexWaitv);
  ASSERT_TRUE(thread.ok()) << thread.status();
  EXPECT_EQ(thread->backend, WakeBackend::kFutexWaitv);
  EXPECT_THAT(thread->reason, HasSubstr("forced"));

  absl::StatusOr<WakeBackendChoice> uring =
      ChooseWakeBackend(Debian12Kernel(), WakeBackend::kUringFutex);
  ASSERT_FALSE(uring.ok());
  EXPECT_THAT(uring.status().message(), HasSubstr("futex_waitv"));

  absl::StatusOr<WakeBackendChoice> persistent =
      ChooseWakeBackend(ModernKernel(), WakeBackend::kUringPersistent);
  ASSERT_FALSE(persistent.ok());
  EXPECT_THAT(persistent.status().message(), HasSubstr("uring_futex"));
}

TEST(ChooseWakeBackend, IoUringDisabledOrRefusedSelectsTheFallbackAndSaysWhy) {
  struct Case {
    int err;
    std::optional<int> sysctl;
    const char* cause;
  };
  for (const Case& c : {Case{EPERM, 2, "kernel.io_uring_disabled=2"},
                        Case{EPERM, 0, "seccomp"},
                        Case{ENOSYS, std::nullopt, "ENOSYS"}}) {
    KernelFeatures f = ModernKernel();
    f.io_uring = false;
    f.op_futex_wait = false;
    f.io_uring_setup_errno = c.err;
    f.io_uring_disabled_sysctl = c.sysctl;
    absl::StatusOr<WakeBackendChoice> choice = ChooseWakeBackend(f);
    ASSERT_TRUE(choice.ok()) << choice.status();
    EXPECT_EQ(choice->backend, WakeBackend::kFutexWaitv);
    EXPECT_THAT(choice->reason, HasSubstr("io_uring is not usable here"));
    EXPECT_THAT(choice->reason, HasSubstr(c.cause));
    EXPECT_TRUE(ChooseWakeBackend(f, WakeBackend::kFutexWaitv).ok());
    // Asking for an io_uring backend there is an error naming the cause.
    absl::StatusOr<WakeBackendChoice> uring =
        ChooseWakeBackend(f, WakeBackend::kUringFutex);
    ASSERT_FALSE(uring.ok());
    EXPECT_THAT(uring.status().message(), HasSubstr(c.cause));
  }
}

TEST(IoUringStatus, DisabledBySysctlSaysHowToEnableIt) {
  KernelFeatures f;
  f.io_uring_setup_errno = EPERM;
  f.io_uring_disabled_sysctl = 2;
  const absl::Status s = IoUringStatus(f);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("io_uring is disabled"));
  EXPECT_THAT(s.message(), HasSubstr("sysctl -w kernel.io_uring_disabled=0"));
}

TEST(IoUringStatus, RestrictedToAGroupNamesTheGroupSysctl) {
  KernelFeatures f;
  f.io_uring_setup_errno = EPERM;
  f.io_uring_disabled_sysctl = 1;
  EXPECT_THAT(IoUringStatus(f).message(), HasSubstr("kernel.io_uring_group"));
}

TEST(IoUringStatus, RefusedWhileTheSysctlAllowsItPointsAtSeccomp) {
  KernelFeatures f;
  f.io_uring_setup_errno = EPERM;
  f.io_uring_disabled_sysctl = 0;
  EXPECT_THAT(IoUringStatus(f).message(), HasSubstr("seccomp"));
  f.io_uring_setup_errno = ENOSYS;
  f.io_uring_disabled_sysctl.reset();
  EXPECT_THAT(IoUringStatus(f).message(), HasSubstr("CONFIG_IO_URING"));
}

TEST(IoUringStatus, UsableIoUringIsOk) {
  EXPECT_TRUE(IoUringStatus(ModernKernel()).ok());
}

TEST(WakeBackendName, RoundTripsThroughParse) {
  for (WakeBackend b : {WakeBackend::kUringPersistent, WakeBackend::kUringFutex,
                        WakeBackend::kFutexWaitv}) {
    EXPECT_EQ(ParseWakeBackend(WakeBackendName(b)), std::optional(b));
  }
  EXPECT_EQ(WakeBackendName(WakeBackend::kUringFutex), "uring_futex");
  EXPECT_EQ(ParseWakeBackend("epoll"), std::nullopt);
}

}  // namespace
}  // namespace tether::loop
