// Doctor verdicts on hand-made inputs, and fact gathering from a fake /proc,
// /sys and shm directory.
#include "tools/doctor.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <sys/stat.h>
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/tools/json_test_parser.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// A machine that passes every check.
DoctorInputs GoodMachine() {
  DoctorInputs in;
  loop::KernelFeatures& k = in.kernel;
  k.kernel_release = "6.12.57+deb12-rt-amd64";
  k.kernel_build = "#1 SMP PREEMPT_RT Debian 6.12.57-1~bpo12+1";
  k.version = loop::KernelVersion{6, 12, 57};
  k.preempt_rt = true;
  k.io_uring_disabled_sysctl = 0;
  k.io_uring = true;
  k.setup_single_issuer = true;
  k.setup_defer_taskrun = true;
  k.register_ring_fd = true;
  k.register_probe = true;
  k.op_futex_wait = true;
  k.op_futex_wake = true;
  k.op_futex_waitv = true;
  k.futex_waitv_syscall = true;
  in.rtprio = ResourceLimit{99, 99};
  in.memlock = ResourceLimit{kUnlimited, kUnlimited};
  in.cap_effective = 0;
  in.user = "robot";
  in.shm = ShmFacts{.path = "/dev/shm",
                    .exists = true,
                    .writable = true,
                    .tmpfs = true,
                    .size_bytes = uint64_t{8} << 30,
                    .free_bytes = uint64_t{8} << 30};
  in.online_cpus = 4;
  in.isolated_cpus = {2, 3};
  in.governors = {{0, "performance"}, {1, "performance"}};
  return in;
}

const CheckResult& Check(const std::vector<CheckResult>& results,
                         std::string_view id) {
  for (const CheckResult& r : results) {
    if (r.id == id) return r;
  }
  ADD_FAILURE() << "no check " << id;
  static const CheckResult kMissing;
  return kMissing;
}

CheckResult Judge(const DoctorInputs& in, std::string_view id) {
  return Check(RunDoctorChecks(in), id);
}

TEST(Doctor, GoodMachinePassesEveryCheckInTheDocumentedOrder) {
  const std::vector<CheckResult> results = RunDoctorChecks(GoodMachine());
  std::vector<std::string> ids;
  for (const CheckResult& r : results) {
    ids.push_back(r.id);
    EXPECT_EQ(r.verdict, Verdict::kOk) << r.id << ": " << r.detail;
    EXPECT_THAT(r.fix, IsEmpty()) << r.id;
    EXPECT_THAT(r.title, Not(IsEmpty()));
  }
  EXPECT_THAT(ids, ::testing::ElementsAre("io_uring", "io_uring_futex",
                                          "ring_setup", "wake_backend",
                                          "preempt_rt", "rtprio", "memlock",
                                          "dev_shm", "huge_pages", "cpus",
                                          "cpu_governor",
                                          "logind_remove_ipc",
                                          "channel_folders"));
  EXPECT_FALSE(AnyFailed(results));
  EXPECT_THAT(Check(results, "wake_backend").detail, HasSubstr("uring_futex"));
}

TEST(Doctor, IoUringDisabledBySysctlFailsWithTheSysctlFix) {
  DoctorInputs in = GoodMachine();
  in.kernel.io_uring = false;
  in.kernel.io_uring_setup_errno = EPERM;
  in.kernel.io_uring_disabled_sysctl = 2;
  in.kernel.op_futex_wait = false;
  const std::vector<CheckResult> results = RunDoctorChecks(in);
  const CheckResult& io = Check(results, "io_uring");
  EXPECT_EQ(io.verdict, Verdict::kFail);
  EXPECT_THAT(io.detail, HasSubstr("io_uring is disabled"));
  EXPECT_THAT(io.fix, HasSubstr("sysctl -w kernel.io_uring_disabled=0"));
  // Loops still run: on the fallback, saying why.
  EXPECT_EQ(Check(results, "wake_backend").verdict, Verdict::kOk);
  EXPECT_THAT(Check(results, "wake_backend").detail, HasSubstr("futex_waitv"));
  EXPECT_THAT(Check(results, "wake_backend").detail,
              HasSubstr("io_uring is not usable here"));
  EXPECT_EQ(Check(results, "io_uring_futex").verdict, Verdict::kFail);
  EXPECT_TRUE(AnyFailed(results));
}

TEST(Doctor, IoUringBlockedBySeccompFailsPointingAtTheProfile) {
  DoctorInputs in = GoodMachine();
  in.kernel.io_uring = false;
  in.kernel.io_uring_setup_errno = EPERM;
  const CheckResult io = Judge(in, "io_uring");
  EXPECT_EQ(io.verdict, Verdict::kFail);
  EXPECT_THAT(io.detail, HasSubstr("seccomp"));
  EXPECT_THAT(io.fix, HasSubstr("seccomp"));
}

TEST(Doctor, IoUringLimitedToAGroupWarnsEvenWhenThisProcessMayUseIt) {
  DoctorInputs in = GoodMachine();
  in.kernel.io_uring_disabled_sysctl = 1;
  const CheckResult io = Judge(in, "io_uring");
  EXPECT_EQ(io.verdict, Verdict::kWarn);
  EXPECT_THAT(io.fix, HasSubstr("io_uring_group"));
}

TEST(Doctor, KernelWithoutFutexOpsWarnsAndUsesTheFallbackBackend) {
  DoctorInputs in = GoodMachine();
  in.kernel.kernel_release = "6.1.0-13-amd64";
  in.kernel.op_futex_wait = false;
  in.kernel.op_futex_wake = false;
  const std::vector<CheckResult> results = RunDoctorChecks(in);
  EXPECT_EQ(Check(results, "io_uring_futex").verdict, Verdict::kWarn);
  EXPECT_THAT(Check(results, "io_uring_futex").fix, HasSubstr("6.7"));
  EXPECT_EQ(Check(results, "wake_backend").verdict, Verdict::kOk);
  EXPECT_THAT(Check(results, "wake_backend").detail, HasSubstr("futex_waitv"));
  EXPECT_FALSE(AnyFailed(results));
}

TEST(Doctor, KernelWithNoWayToWaitFailsTheWakeBackend) {
  DoctorInputs in = GoodMachine();
  in.kernel.op_futex_wait = false;
  in.kernel.futex_waitv_syscall = false;
  const CheckResult r = Judge(in, "wake_backend");
  EXPECT_EQ(r.verdict, Verdict::kFail);
  EXPECT_THAT(r.detail, HasSubstr("5.16"));
}

TEST(Doctor, OldRingSetupWarnsNamingWhatIsMissing) {
  DoctorInputs in = GoodMachine();
  in.kernel.setup_defer_taskrun = false;
  const CheckResult r = Judge(in, "ring_setup");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("DEFER_TASKRUN"));
  EXPECT_THAT(r.detail, Not(HasSubstr("SINGLE_ISSUER")));
}

TEST(Doctor, NonRtKernelWarnsThatJitterIsUnboundedAndNamesTheDebianPackage) {
  DoctorInputs in = GoodMachine();
  in.kernel.preempt_rt = false;
  in.kernel.kernel_build = "#1 SMP PREEMPT_DYNAMIC";
  const CheckResult r = Judge(in, "preempt_rt");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("not bounded"));
  EXPECT_THAT(r.fix, HasSubstr("linux-image-rt-amd64"));
}

TEST(Doctor, MemlockTooLowWithoutCapabilityWarnsWithLimitsConfFix) {
  DoctorInputs in = GoodMachine();
  in.memlock = ResourceLimit{8 << 20, 8 << 20};
  const CheckResult r = Judge(in, "memlock");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("8.0 MiB"));
  EXPECT_THAT(r.fix, HasSubstr("robot - memlock unlimited"));
  EXPECT_THAT(r.fix, HasSubstr("/etc/security/limits.d/"));

  in.cap_effective = uint64_t{1} << kCapIpcLock;
  EXPECT_EQ(Judge(in, "memlock").verdict, Verdict::kOk);
  in.cap_effective = uint64_t{1} << kCapSysNice;  // The wrong capability.
  EXPECT_EQ(Judge(in, "memlock").verdict, Verdict::kWarn);
  in.memlock = ResourceLimit{kMinMemlockBytes, kMinMemlockBytes};
  EXPECT_EQ(Judge(in, "memlock").verdict, Verdict::kOk);
  in.memlock.reset();
  EXPECT_EQ(Judge(in, "memlock").verdict, Verdict::kWarn);
}

TEST(Doctor, NoRealtimePriorityWithoutCapabilityWarnsWithLimitsConfFix) {
  DoctorInputs in = GoodMachine();
  in.rtprio = ResourceLimit{0, 0};
  const CheckResult r = Judge(in, "rtprio");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.fix, HasSubstr("robot - rtprio 99"));

  in.cap_effective = uint64_t{1} << kCapSysNice;
  EXPECT_EQ(Judge(in, "rtprio").verdict, Verdict::kOk);
  in.cap_effective = 0;
  in.rtprio = ResourceLimit{50, 50};
  EXPECT_EQ(Judge(in, "rtprio").verdict, Verdict::kOk);
  EXPECT_THAT(Judge(in, "rtprio").detail, HasSubstr("50"));
}

TEST(Doctor, ShmProblemsFailOrWarnWithAMountFix) {
  DoctorInputs in = GoodMachine();
  in.shm.exists = false;
  EXPECT_EQ(Judge(in, "dev_shm").verdict, Verdict::kFail);
  EXPECT_THAT(Judge(in, "dev_shm").fix, HasSubstr("mount -t tmpfs"));

  in = GoodMachine();
  in.shm.writable = false;
  EXPECT_EQ(Judge(in, "dev_shm").verdict, Verdict::kFail);

  in = GoodMachine();
  in.shm.tmpfs = false;
  EXPECT_EQ(Judge(in, "dev_shm").verdict, Verdict::kWarn);

  in = GoodMachine();
  in.shm.free_bytes = 1 << 20;
  EXPECT_EQ(Judge(in, "dev_shm").verdict, Verdict::kWarn);
  EXPECT_THAT(Judge(in, "dev_shm").fix, HasSubstr("remount"));
}

TEST(Doctor, HugePagesSaysWhatTheChannelRootsPagesAreAndHowToGetHugeOnes) {
  DoctorInputs in = GoodMachine();
  in.shm.root_mount = "/dev/shm";
  in.shm.root_fstype = "tmpfs";
  in.shm.root_huge = "never";
  in.shm.root_path = "/dev/shm/tether";
  in.shm.thp_shmem = "never";
  CheckResult r = Judge(in, "huge_pages");
  EXPECT_EQ(r.verdict, Verdict::kOk);  // advice, not a problem
  EXPECT_THAT(r.detail, HasSubstr("4 KiB pages (huge=never)"));
  EXPECT_THAT(r.detail, HasSubstr("huge=within_size,mode=1777,size=2G tmpfs "
                                  "/dev/shm/tether"));

  in.shm.root_huge = "advise";
  EXPECT_THAT(Judge(in, "huge_pages").detail,
              HasSubstr("huge=advise does not help"));

  // tether collapses large channel files into huge pages itself where the
  // kernel can (MADV_COLLAPSE, Linux 6.1): then no mount is needed.
  in.shm.root_huge = "never";
  in.shm.collapse_errno = 0;
  r = Judge(in, "huge_pages");
  EXPECT_EQ(r.verdict, Verdict::kOk);
  EXPECT_THAT(r.detail, HasSubstr("tether gives channel files of 2 MiB or "
                                  "more huge pages itself"));
  EXPECT_THAT(r.detail, Not(HasSubstr("mount -t tmpfs")));
  in.shm.collapse_errno = EINVAL;  // a kernel before 6.1
  r = Judge(in, "huge_pages");
  EXPECT_THAT(r.detail, HasSubstr("cannot give channel files huge pages "
                                  "itself here (MADV_COLLAPSE: Invalid "
                                  "argument; it needs Linux 6.1)"));
  EXPECT_THAT(r.detail, HasSubstr("huge=within_size,mode=1777,size=2G"));
  in.shm.collapse_errno = -1;

  in.shm.root_mount = "/dev/shm/tether";
  in.shm.root_huge = "within_size";
  r = Judge(in, "huge_pages");
  EXPECT_THAT(r.detail, HasSubstr("gives channel files 2 MiB pages"));
  EXPECT_THAT(r.detail, Not(HasSubstr("small channel files")));

  in.shm.root_huge = "always";
  EXPECT_THAT(Judge(in, "huge_pages").detail,
              HasSubstr("small channel files get a 2 MiB page each"));

  in.shm.thp_shmem = "deny";  // overrides the mount option
  EXPECT_THAT(Judge(in, "huge_pages").detail,
              HasSubstr("4 KiB pages: transparent_hugepage/shmem_enabled is "
                        "deny"));
  in.shm.thp_shmem = "";
  EXPECT_THAT(Judge(in, "huge_pages").detail,
              HasSubstr("no transparent huge pages"));
}

TEST(Doctor, ShmReportsTheStacksFoundAndWarnsWhenTheLargestWouldNotFitAgain) {
  DoctorInputs in = GoodMachine();
  in.shm.size_bytes = 4ull << 30;
  in.shm.free_bytes = 2ull << 30;
  in.shm.instances = {{"arm", 1ull << 30}, {"demo", 4ull << 20}};
  EXPECT_EQ(Judge(in, "dev_shm").verdict, Verdict::kOk);
  EXPECT_THAT(Judge(in, "dev_shm").detail,
              HasSubstr("2 stack instances under /dev/shm/tether use 1.0 GiB "
                        "(arm 1.0 GiB, demo 4.0 MiB)"));

  in.shm.instances.front().second = 3ull << 30;
  const CheckResult r = Judge(in, "dev_shm");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("another stack as large as \"arm\""));
  EXPECT_THAT(r.fix, HasSubstr("remount,size=10241M"));
  EXPECT_THAT(r.fix, HasSubstr("--shm-size"));
}

// With --root elsewhere, the stacks are the folders of that root itself
// (no "/tether" appended), and the fix names it.
TEST(Doctor, ShmNamesTheRootInUse) {
  DoctorInputs in = GoodMachine();
  in.shm.path = "/mnt/robot";
  in.shm.root_path = "/mnt/robot";
  in.shm.size_bytes = 64ull << 20;
  in.shm.free_bytes = 1ull << 20;
  in.shm.instances = {{"arm", 60ull << 20}};
  const CheckResult r = Judge(in, "dev_shm");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("1 stack instance under /mnt/robot use"));
  EXPECT_THAT(r.fix, HasSubstr("remove stale stacks under /mnt/robot "
                               "(tether clean --root /mnt/robot"));
  EXPECT_THAT(r.fix, Not(HasSubstr("/mnt/robot/tether")));
}

TEST(Doctor, NoIsolatedCpusWarnsWithAKernelCommandLine) {
  DoctorInputs in = GoodMachine();
  EXPECT_THAT(Judge(in, "cpus").detail, HasSubstr("isolated: 2-3"));
  in.isolated_cpus.clear();
  const CheckResult r = Judge(in, "cpus");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.fix, HasSubstr("isolcpus=3"));
  in.online_cpus = 1;
  EXPECT_EQ(Judge(in, "cpus").verdict, Verdict::kOk);
}

TEST(Doctor, PowersavingGovernorWarnsNamingTheCpus) {
  DoctorInputs in = GoodMachine();
  in.governors = {
      {0, "performance"}, {1, "powersave"}, {2, "powersave"}, {3, "schedutil"}};
  const CheckResult r = Judge(in, "cpu_governor");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("CPUs 1-3 use powersave, schedutil"));
  EXPECT_THAT(r.fix, HasSubstr("cpupower frequency-set -g performance"));
  in.governors.clear();
  EXPECT_EQ(Judge(in, "cpu_governor").verdict, Verdict::kOk);
}

TEST(Doctor, LogindRemoveIpcYesOrUnsetWarnsWithTheDropInFix) {
  DoctorInputs in = GoodMachine();
  in.logind.present = true;
  CheckResult r = Judge(in, "logind_remove_ipc");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("default is yes"));
  EXPECT_THAT(r.fix, HasSubstr("RemoveIPC=no"));
  in.logind.remove_ipc = true;
  in.logind.source = "/etc/systemd/logind.conf:12";
  r = Judge(in, "logind_remove_ipc");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("RemoveIPC=yes (/etc/systemd/logind.conf:12)"));
  in.logind.remove_ipc = false;
  EXPECT_EQ(Judge(in, "logind_remove_ipc").verdict, Verdict::kOk);
}

TEST(Doctor, ChannelFoldersOthersCannotEnterOrStickyWarn) {
  DoctorInputs in = GoodMachine();
  in.channel_folders = {
      {.path = "/dev/shm/tether", .mode = 01777, .owner = "root",
       .group = "root", .is_root = true},
      {.path = "/dev/shm/tether/demo", .mode = 0700, .owner = "root",
       .group = "root"},
      {.path = "/dev/shm/tether/viz", .mode = 03770, .owner = "robot",
       .group = "robots"}};
  const CheckResult r = Judge(in, "channel_folders");
  EXPECT_EQ(r.verdict, Verdict::kWarn);
  EXPECT_THAT(r.detail, HasSubstr("/dev/shm/tether/demo (mode 0700"));
  EXPECT_THAT(r.detail, HasSubstr("only root can enter it"));
  EXPECT_THAT(r.detail, HasSubstr("sticky bit"));
  EXPECT_THAT(r.fix, HasSubstr("chmod -t /dev/shm/tether/viz"));
  EXPECT_THAT(r.detail, Not(HasSubstr("cannot reach any instance")));
  in.channel_folders[0].mode = 0750;
  EXPECT_THAT(Judge(in, "channel_folders").detail,
              HasSubstr("cannot reach any instance"));
  in.channel_folders = {{.path = "/dev/shm/tether/demo", .mode = 02750,
                         .owner = "root", .group = "robots"}};
  EXPECT_EQ(Judge(in, "channel_folders").verdict, Verdict::kOk);
}

TEST(Doctor, GathersRemoveIpcFromLogindConfAndItsDropInsInOrder) {
  char tmpl[] = "/tmp/tether-doctor-etc-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string etc = tmpl;
  ASSERT_EQ(::mkdir((etc + "/systemd").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((etc + "/systemd/logind.conf.d").c_str(), 0755), 0);
  std::ofstream(etc + "/systemd/logind.conf") << "[Login]\n#RemoveIPC=no\nRemoveIPC=no\n";
  std::ofstream(etc + "/systemd/logind.conf.d/20-late.conf") << "[Login]\nRemoveIPC=yes\n";
  std::ofstream(etc + "/systemd/logind.conf.d/10-early.conf") << "[Login]\nRemoveIPC=no\n";
  DoctorOptions options;
  options.etc_root = etc;
  options.tether_root = etc + "/no-such-root";
  const DoctorInputs in = GatherDoctorInputs(options);
  EXPECT_TRUE(in.logind.present);
  ASSERT_TRUE(in.logind.remove_ipc.has_value());
  EXPECT_TRUE(*in.logind.remove_ipc);
  EXPECT_EQ(in.logind.source, etc + "/systemd/logind.conf.d/20-late.conf:2");
  EXPECT_TRUE(in.channel_folders.empty());
  std::filesystem::remove_all(etc);
}

TEST(Doctor, TextReportShowsVerdictsFixesAndCounts) {
  DoctorInputs in = GoodMachine();
  in.shm.exists = false;
  in.kernel.preempt_rt = false;
  const std::string text = FormatDoctorText(in, RunDoctorChecks(in));
  EXPECT_THAT(text, HasSubstr("FAIL  /dev/shm (channel files)"));
  EXPECT_THAT(text, HasSubstr("WARN  real-time kernel (PREEMPT_RT)"));
  EXPECT_THAT(text, HasSubstr("OK    io_uring enabled"));
  EXPECT_THAT(text, HasSubstr("fix: mount -t tmpfs"));
  EXPECT_THAT(text, HasSubstr("\n11 OK, 1 WARN, 1 FAIL\n"));
  for (std::string_view rest = text; !rest.empty();) {
    const size_t nl = rest.find('\n');
    EXPECT_LE(rest.substr(0, nl).size(), 79u) << rest.substr(0, nl);
    rest.remove_prefix(nl == std::string_view::npos ? rest.size() : nl + 1);
  }
}

TEST(Doctor, JsonReportIsValidAndMatchesTheChecks) {
  DoctorInputs in = GoodMachine();
  in.kernel.io_uring = false;
  in.kernel.io_uring_setup_errno = ENOSYS;
  in.kernel.kernel_build = "quote\" and \\ backslash";
  const std::vector<CheckResult> results = RunDoctorChecks(in);
  absl::StatusOr<test::JsonValue> json =
      test::ParseJson(FormatDoctorJson(in, results));
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_FALSE(json->Find("ok")->boolean);
  // The fallback still runs loops.
  EXPECT_EQ(json->Find("wake_backend")->string, "futex_waitv");
  EXPECT_EQ(json->Find("counts")->Find("fail")->number,
            3);  // io_uring and the two checks of its features.
  EXPECT_EQ(json->Find("kernel")->Find("build")->string,
            "quote\" and \\ backslash");
  const test::JsonValue* checks = json->Find("checks");
  ASSERT_NE(checks, nullptr);
  ASSERT_EQ(checks->array.size(), results.size());
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_EQ(checks->array[i].Find("id")->string, results[i].id);
    EXPECT_EQ(checks->array[i].Find("verdict")->string,
              VerdictName(results[i].verdict));
    EXPECT_EQ(checks->array[i].Find("fix")->string, results[i].fix);
  }
}

TEST(ParseCpuList, ReadsRangesAndSingles) {
  EXPECT_EQ(ParseCpuList("0-3,8,10-11\n"),
            std::optional<std::vector<int>>({0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(ParseCpuList(""),
            std::optional<std::vector<int>>(std::vector<int>{}));
  EXPECT_EQ(ParseCpuList("\n"),
            std::optional<std::vector<int>>(std::vector<int>{}));
  EXPECT_EQ(ParseCpuList("3-1"), std::nullopt);
  EXPECT_EQ(ParseCpuList("a"), std::nullopt);
  EXPECT_EQ(ParseCpuList("1,,2"), std::nullopt);
}

class FakeTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") /
            ("doctor_test." + std::to_string(getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "shm");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& text) {
    const std::filesystem::path path = root_ / relative;
    std::filesystem::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }

  DoctorOptions Options() const {
    return DoctorOptions{.proc_root = (root_ / "proc").string(),
                         .sys_root = (root_ / "sys").string(),
                         .shm_path = (root_ / "shm").string()};
  }

  std::filesystem::path root_;
};

constexpr char kLimits[] =
    "Limit                     Soft Limit           Hard Limit           Units "
    "    \n"
    "Max cpu time              unlimited            unlimited            "
    "seconds   \n"
    "Max locked memory         65536                unlimited            bytes "
    "    \n"
    "Max nice priority         0                    0                    \n"
    "Max realtime priority     10                   20                   \n"
    "Max realtime timeout      unlimited            unlimited            us    "
    "    \n";

TEST_F(FakeTreeTest, GathersFactsFromTheInjectedTree) {
  Write("proc/self/status",
        "Name:\tdoctor\nCapInh:\t0000000000000000\n"
        "CapEff:\t0000000000004000\nCapBnd:\t000001ffffffffff\n");
  Write("proc/self/limits", kLimits);
  Write("proc/sys/kernel/io_uring_disabled", "0\n");
  Write("sys/kernel/realtime", "1\n");
  Write("sys/devices/system/cpu/online", "0-3\n");
  Write("sys/devices/system/cpu/isolated", "2-3\n");
  Write("sys/devices/system/cpu/cpu0/cpufreq/scaling_governor", "powersave\n");
  Write("sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "performance\n");
  Write("shm/tether/demo/%2Frobot%2Fimu", std::string(8192, 'x'));

  const DoctorInputs in = GatherDoctorInputs(Options());
  EXPECT_EQ(in.cap_effective, std::optional<uint64_t>(0x4000));
  ASSERT_TRUE(in.memlock.has_value());
  EXPECT_EQ(in.memlock->soft, 65536u);
  EXPECT_EQ(in.memlock->hard, kUnlimited);
  ASSERT_TRUE(in.rtprio.has_value());
  EXPECT_EQ(in.rtprio->soft, 10u);
  EXPECT_EQ(in.rtprio->hard, 20u);
  EXPECT_TRUE(in.kernel.preempt_rt);
  EXPECT_EQ(in.kernel.io_uring_disabled_sysctl, std::optional<int>(0));
  EXPECT_EQ(in.online_cpus, 4);
  EXPECT_EQ(in.isolated_cpus, (std::vector<int>{2, 3}));
  EXPECT_EQ(in.governors, (std::vector<std::pair<int, std::string>>{
                              {0, "powersave"}, {1, "performance"}}));
  EXPECT_TRUE(in.shm.exists);
  EXPECT_TRUE(in.shm.writable);
  EXPECT_GT(in.shm.size_bytes, 0u);
  // One instance folder with one 8 KiB channel file.
  EXPECT_EQ(in.shm.instances.size(), 1u);
  if (!in.shm.instances.empty()) {
    EXPECT_EQ(in.shm.instances[0].first, "demo");
    EXPECT_GE(in.shm.instances[0].second, 8192u);
  }

  const std::vector<CheckResult> results = RunDoctorChecks(in);
  EXPECT_EQ(Check(results, "memlock").verdict, Verdict::kOk);  // CAP_IPC_LOCK.
  EXPECT_EQ(Check(results, "rtprio").verdict, Verdict::kOk);   // rtprio 10.
  EXPECT_EQ(Check(results, "preempt_rt").verdict, Verdict::kOk);
  EXPECT_EQ(Check(results, "cpus").verdict, Verdict::kOk);
  EXPECT_EQ(Check(results, "cpu_governor").verdict, Verdict::kWarn);
  EXPECT_THAT(Check(results, "cpu_governor").detail, HasSubstr("CPUs 0 use"));
}

TEST_F(FakeTreeTest, MissingFilesBecomeAbsentFactsAndAMissingShmFails) {
  DoctorOptions options = Options();
  options.shm_path = (root_ / "no-such-dir").string();
  const DoctorInputs in = GatherDoctorInputs(options);
  EXPECT_FALSE(in.cap_effective.has_value());
  EXPECT_FALSE(in.memlock.has_value());
  EXPECT_FALSE(in.rtprio.has_value());
  EXPECT_FALSE(in.kernel.io_uring_disabled_sysctl.has_value());
  EXPECT_TRUE(in.isolated_cpus.empty());
  EXPECT_TRUE(in.governors.empty());
  EXPECT_GT(in.online_cpus, 0);  // Falls back to sysconf.
  EXPECT_FALSE(in.shm.exists);

  const std::vector<CheckResult> results = RunDoctorChecks(in);
  EXPECT_EQ(Check(results, "dev_shm").verdict, Verdict::kFail);
  EXPECT_EQ(Check(results, "memlock").verdict, Verdict::kWarn);
  EXPECT_TRUE(AnyFailed(results));
}

}  // namespace
}  // namespace tether::tools
