// The reliability issue's reproducers against the live demo stack: the real
// launcher and node binaries run examples/config/example_stack.json while the
// test, like a tester with `dd` and `truncate`, writes garbage into their
// channel files. Each attack must end in a reported corruption or a clear
// error -- never a crash, a SIGBUS, a busy loop, a hang or a silent loss --
// and the channels nobody attacked keep flowing.
#include <fcntl.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "shm/channel_access.h"
#include "tests/examples/demo_run.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/run_tether.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"

namespace tether::examples {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using examples::testing::DemoWorkdir;
using examples::testing::RunCommand;
using std::chrono::milliseconds;

// Where the parts of a channel file are, in bytes from its start, read from
// a mapping of the live file (so the test follows the layout, whatever it
// is).
struct FileParts {
  uint64_t tail = 0;          // The header's tail word.
  uint64_t ring = 0;          // First ring entry.
  uint64_t ring_end = 0;      // One past the last.
  uint64_t slot_headers = 0;  // First slot header.
  uint64_t slots_end = 0;     // One past the last payload.
};

FileParts PartsOf(const shm::ChannelOptions& options, const std::string& name) {
  FileParts parts;
  auto channel = shm::Channel::Open(options, name);
  EXPECT_TRUE(channel.ok()) << channel.status();
  if (!channel.ok()) return parts;
  using Access = shm::internal::ChannelAccess;
  const shm::Channel& c = **channel;
  const auto* base = reinterpret_cast<const std::byte*>(Access::header(c));
  auto at = [base](const void* p) {
    return static_cast<uint64_t>(reinterpret_cast<const std::byte*>(p) - base);
  };
  const shm::QueueParams& p = c.params();
  parts.tail = at(&Access::header(c)->tail);
  parts.ring = at(Access::ring_entry(c, 0));
  parts.ring_end = at(Access::ring_entry(c, p.queue_depth - 1)) + 8;
  parts.slot_headers = at(Access::slot_header(c, 0));
  parts.slots_end = at(Access::payload(c, p.pool_size() - 1)) + p.slot_size;
  return parts;
}

// Random bytes over [begin, end) of `path`, written through the file as `dd
// conv=notrunc` would.
void WriteGarbage(const std::string& path, uint64_t begin, uint64_t end,
                  std::mt19937_64* rng) {
  std::vector<uint64_t> words((end - begin + 7) / 8);
  for (uint64_t& w : words) w = (*rng)();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  EXPECT_EQ(::pwrite(fd, words.data(), end - begin, static_cast<off_t>(begin)),
            static_cast<ssize_t>(end - begin));
  ::close(fd);
}

void WriteZeros(const std::string& path, uint64_t begin, uint64_t end) {
  std::vector<char> zeros(end - begin, 0);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  EXPECT_EQ(::pwrite(fd, zeros.data(), zeros.size(), static_cast<off_t>(begin)),
            static_cast<ssize_t>(zeros.size()));
  ::close(fd);
}

// The pid of the launcher's node `node` of the stack under `root` (from the
// environment the launcher gives its nodes), or 0.
pid_t NodePid(const std::string& root, const std::string& node) {
  const std::string want_root = "TETHER_ROOT=" + root;
  const std::string want_node = "TETHER_NODE=" + node;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream environ(entry.path() / "environ");
    std::string var;
    bool root_matches = false, node_matches = false;
    while (std::getline(environ, var, '\0')) {
      root_matches |= var == want_root;
      node_matches |= var == want_node;
    }
    if (root_matches && node_matches) return std::stoi(pid);
  }
  return 0;
}

// CPU seconds `pid` has used (user + system), from /proc/<pid>/stat.
double CpuSeconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream fields(stat.substr(close + 2));
  std::string f;
  unsigned long long utime = 0, stime = 0;
  // Fields after the name start at 3 (state); utime is 14, stime 15.
  for (int i = 3; i <= 15 && fields >> f; ++i) {
    if (i == 14) utime = std::stoull(f);
    if (i == 15) stime = std::stoull(f);
  }
  return static_cast<double>(utime + stime) / ::sysconf(_SC_CLK_TCK);
}

// The monitor's final row for `channel`: sent, received, missed.
struct MonitorRow {
  long sent = -1, received = -1, missed = -1;
};
MonitorRow RowOf(const std::string& out, const std::string& channel) {
  std::regex row("\\[monitor\\] " + channel + R"(\s+(\d+)\s+(\d+)\s+(\d+))");
  std::smatch m;
  MonitorRow r;
  // The summary comes last: take the last match.
  for (auto it = std::sregex_iterator(out.begin(), out.end(), row);
       it != std::sregex_iterator(); ++it) {
    m = *it;
    r = {std::stol(m[1]), std::stol(m[2]), std::stol(m[3])};
  }
  return r;
}

// No node died of a signal (the launcher names it: "SIGBUS", "SIGSEGV").
void ExpectNoCrash(const std::string& out) {
  EXPECT_FALSE(std::regex_search(out, std::regex(R"(\nlaunch: [^\n]*SIG(BUS|SEGV|ABRT))")))
      << "a node crashed";
}

// The monitor's final SEND FAIL for `channel` (its summary's last column),
// or -1 when there is no such row.
long MonitorSendFailures(const std::string& out, const std::string& channel) {
  std::regex row("\\[monitor\\] " + channel +
                 R"((?:\s+[\d.]+){8}\s+(\d+)\n)");
  long failures = -1;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), row);
       it != std::sregex_iterator(); ++it) {
    failures = std::stol((*it)[1]);
  }
  return failures;
}

// The failed sends `node` counted, from its final line ("N failed sends").
long FailedSends(const std::string& out, const std::string& node) {
  std::smatch m;
  if (!std::regex_search(
          out, m, std::regex("\\[" + node + "\\] " + node + R"(: [^\n]* (\d+) failed sends)"))) {
    return -1;
  }
  return std::stol(m[1]);
}

// The launcher's final table says `node` stopped once, by itself, with
// exit code 0 (no crash, no restart, no SIGKILL after the stop timeout).
void ExpectStoppedCleanly(const std::string& out, const std::string& node) {
  EXPECT_TRUE(std::regex_search(
      out, std::regex("\n" + node + R"(\s+stopped\s+-\s+0\s+exit code 0)")))
      << node << " did not stop cleanly";
}

// After an attack on one channel: no node crashed, every node stopped
// cleanly, and `untouched` (a channel nobody attacked) flowed to the end.
void ExpectTheStackSurvived(const std::string& out, const std::string& untouched) {
  ExpectNoCrash(out);
  for (const char* node :
       {"sensors", "estimator", "controller", "actuator", "monitor"}) {
    ExpectStoppedCleanly(out, node);
  }
  const MonitorRow row = RowOf(out, untouched);
  // Nothing lost silently: every message was received or counted missed
  // (a monitor starved of CPU on a loaded machine may miss some, counted).
  EXPECT_GT(row.sent, 200) << untouched;
  EXPECT_EQ(row.received + row.missed, row.sent) << untouched;
}

// The demo stack under a root of its own, launched by the real launcher and
// stopped with SIGINT (as Ctrl-C stops it: every node stops and prints its
// summary, the launcher exits 0) `duration_s` seconds after it was seen
// running (WaitUntilRunning(), which Finish() calls if nobody did). So
// a test gets its whole budget after a slow start on a loaded machine,
// which a fixed --duration counted from the launch did not give it. The
// launcher's own --duration (120 s) only bounds a test that never stops it.
class LiveDemo {
 public:
  explicit LiveDemo(int duration_s)
      : workdir_(root_.root() + "-work"),
        where_(" --root " + root_.root() + " --instance demo"),
        budget_(std::chrono::seconds(duration_s)) {
    root_.options().instance = "demo";
    static int launches = 0;  // a tag of its own for each launch here
    tag_ = "live-demo-" + std::to_string(++launches);
    pid_ = tools::test::StartTether(
        {"launch", workdir_.path() + "/examples/config/example_stack.json",
         "--root", root_.root(), "--instance", "demo", "--duration", "120",
         "--workdir", workdir_.path()},
        tag_);
  }
  ~LiveDemo() {
    if (pid_ > 0) Finish();
  }

  // Waits until every node runs and their channels carry traffic (up to
  // 20 s, then a second more); the budget counts from then.
  void WaitUntilRunning() {
    for (int i = 0; i < 200; ++i) {
      bool all = true;
      for (const char* node :
           {"sensors", "estimator", "controller", "actuator", "monitor"}) {
        all &= NodePid(root_.root(), node) != 0;
      }
      if (all) break;
      std::this_thread::sleep_for(milliseconds(100));
    }
    std::this_thread::sleep_for(milliseconds(1000));
    running_at_ = std::chrono::steady_clock::now();
    waited_ = true;
  }

  // Waits out the budget, stops the stack and returns the launcher's
  // output (stdout, then stderr); its exit code in *status.
  std::string Finish(int* status = nullptr) {
    if (!waited_) WaitUntilRunning();
    std::this_thread::sleep_until(running_at_ + budget_);
    if (pid_ > 0) ::kill(pid_, SIGINT);
    const tools::test::Outcome o =
        tools::test::WaitTether(pid_, tag_, {.timeout_s = 60});
    pid_ = -1;
    if (status != nullptr) *status = o.code;
    return o.out + o.err;
  }

  std::string PathOf(const std::string& channel) const {
    return shm::Channel::PathFor(root_.options(), channel);
  }
  const shm::ChannelOptions& options() const { return root_.options(); }
  const std::string& root() const { return root_.root(); }
  const std::string& where() const { return where_; }

 private:
  shm::testing::ScopedRoot root_;
  DemoWorkdir workdir_;
  std::string where_;
  std::chrono::steady_clock::duration budget_;
  std::chrono::steady_clock::time_point running_at_;
  bool waited_ = false;
  std::string tag_;
  pid_t pid_ = -1;
};

// Reproducer 1: garbage in /robot/imu's ring. The estimator must notice,
// stop watching that channel (one line), go back to sleep instead of
// spinning, and stop on SIGTERM; the other channels keep flowing.
TEST(DemoHostile, ACorruptRingIsReportedAndTheReaderNeitherSpinsNorHangs) {
  LiveDemo demo(7);
  demo.WaitUntilRunning();
  const std::string imu = demo.PathOf("/robot/imu");
  const FileParts parts = PartsOf(demo.options(), "/robot/imu");
  std::mt19937_64 rng(1);
  // The publisher rewrites entries as it goes: keep writing for a while so
  // readers surely meet garbage.
  for (int i = 0; i < 150; ++i) {
    WriteGarbage(imu, parts.ring, parts.ring_end, &rng);
    std::this_thread::sleep_for(milliseconds(2));
  }
  std::this_thread::sleep_for(milliseconds(300));
  const pid_t estimator = NodePid(demo.root(), "estimator");
  ASSERT_NE(estimator, 0);
  const double before = CpuSeconds(estimator);
  std::this_thread::sleep_for(milliseconds(1500));
  const double used = CpuSeconds(estimator) - before;
  // A busy loop uses the whole 1.5 s; a sleeping 1 kHz node a few percent.
  EXPECT_LT(used, 0.5) << "the estimator spins on the corrupt channel";

  int status = 0;
  const std::string out = demo.Finish(&status);
  SCOPED_TRACE(out);
  EXPECT_THAT(out, HasSubstr("channel /robot/imu is corrupt"));
  ExpectTheStackSurvived(out, "/robot/joint_command");
  ExpectTheStackSurvived(out, "/plant/state");
}

// Reproducer 2: garbage over /robot/imu's slot headers and payloads, again
// and again, while sensors builds its messages in place there. The
// publisher must neither abort (a Cap'n Proto exception) nor fault.
TEST(DemoHostile, GarbageInSlotsNeverCrashesThePublisher) {
  LiveDemo demo(6);
  demo.WaitUntilRunning();
  const std::string imu = demo.PathOf("/robot/imu");
  const FileParts parts = PartsOf(demo.options(), "/robot/imu");
  std::mt19937_64 rng(2);
  for (int i = 0; i < 100; ++i) {
    WriteGarbage(imu, parts.slot_headers, parts.slots_end, &rng);
    std::this_thread::sleep_for(milliseconds(3));
  }
  int status = 0;
  const std::string out = demo.Finish(&status);
  SCOPED_TRACE(out);
  // The publisher's own loop says so, and counts the sends that failed.
  EXPECT_THAT(out, HasSubstr("loop sensors: channel /robot/imu is corrupt"));
  EXPECT_GT(FailedSends(out, "sensors"), 0);
  ExpectTheStackSurvived(out, "/plant/state");
}

// Reproducer 2b: a channel file truncated to nothing under its publisher
// and three readers: no SIGBUS anywhere, the corruption is reported.
TEST(DemoHostile, ATruncatedChannelFileSigbusesNobody) {
  LiveDemo demo(6);
  demo.WaitUntilRunning();
  ASSERT_EQ(::truncate(demo.PathOf("/robot/joint_state").c_str(), 0), 0);
  int status = 0;
  const std::string out = demo.Finish(&status);
  SCOPED_TRACE(out);
  // Every process on the channel says so, fetchers and the publisher too.
  // The first finding is the truncation, or (for a process whose next access
  // is a check of what it then reads: zeros) what that check found.
  for (const char* node : {"sensors", "estimator", "controller", "monitor"}) {
    EXPECT_THAT(out, HasSubstr(std::string("loop ") + node +
                               ": channel /robot/joint_state is corrupt ("));
  }
  EXPECT_THAT(out, HasSubstr("the channel file was truncated"));
  EXPECT_GT(FailedSends(out, "sensors"), 0);
  ExpectTheStackSurvived(out, "/robot/imu");
}

// Reproducer 2c: a process that may write /plant/state's reader-state file
// (docs/security.md) sets every pin word. No slot is free then, which never
// happens in a healthy channel, so the actuator's publisher clears the
// pins no reader can hold and sends on: no send fails (until 2026-12-06
// they all did, counted), and nobody crashes.
TEST(DemoHostile, EverySlotPinnedIsUndoneAndSendsGoOn) {
  LiveDemo demo(5);
  demo.WaitUntilRunning();
  {
    auto c = shm::Channel::Open(demo.options(), "/plant/state");
    ASSERT_TRUE(c.ok()) << c.status();
    for (uint64_t s = 0; s < (*c)->params().pool_size(); ++s) {
      shm::internal::ChannelAccess::pin_word(**c, s)->store(~uint64_t{0});
    }
  }
  int status = 0;
  const std::string out = demo.Finish(&status);
  SCOPED_TRACE(out);
  ExpectNoCrash(out);
  EXPECT_EQ(FailedSends(out, "actuator"), 0);
  EXPECT_EQ(MonitorSendFailures(out, "/plant/state"), 0);
  ExpectTheStackSurvived(out, "/plant/state");
  ExpectTheStackSurvived(out, "/robot/imu");
}

// Reproducer 5: a writer of /robot/velocity_command (teleoperation: any
// process allowed to write it, or a replay of a doctored log) sends
// VelocityCommands whose root pointer is 0xFFFFFFFFFFFFFFFC, then a valid
// one. The controller reads the channel with a fetcher in its phased loop,
// under checkAllocations: it must skip and report them (one line), not die
// of the Cap'n Proto exception's allocation, and take the valid one.
TEST(DemoHostile, ACorruptRootPointerIsSkippedByTheControllerNotFatal) {
  LiveDemo demo(6);
  demo.WaitUntilRunning();
  auto channel =
      transport::ChannelHandle::Open(demo.options(), "/robot/velocity_command");
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto pub = transport::RawPublisher::Create(channel->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  // The controller's fetcher reads messages sent after it exists.
  for (int i = 0; i < 200 && (*channel)->stats().pinning_readers < 1; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  ASSERT_GE((*channel)->stats().pinning_readers, 1);
  // One segment of 3 words: the root pointer and two Float64 fields.
  auto send = [&](uint64_t root) {
    const double v = 0.1;
    uint64_t words[4] = {uint64_t{3} << 32, root, 0, 0};
    std::memcpy(&words[2], &v, 8);
    std::memcpy(&words[3], &v, 8);
    std::span<std::byte> slot = (*pub)->Loan();
    ASSERT_GE(slot.size(), sizeof(words));
    std::memcpy(slot.data(), words, sizeof(words));
    ASSERT_EQ((*pub)->Send(sizeof(words)).status,
              transport::PublishStatus::kOk);
  };
  for (int i = 0; i < 20; ++i) {
    send(0xFFFFFFFFFFFFFFFCull);
    std::this_thread::sleep_for(milliseconds(50));
  }
  send(uint64_t{2} << 32);  // a struct of 2 data words right after it
  pub->reset();
  channel->reset();
  int status = 0;
  const std::string out = demo.Finish(&status);
  SCOPED_TRACE(out);
  EXPECT_THAT(out, HasSubstr("loop controller: channel "
                             "/robot/velocity_command: skipped a malformed "
                             "message"));
  EXPECT_THAT(out, Not(HasSubstr("heap allocation in a real-time scope")));
  ExpectTheStackSurvived(out, "/robot/joint_command");
}

// Reproducer 4: after a run, zeroed slot headers and a garbage tail. echo,
// stat and list must say "corrupt" and exit non-zero, not block or report
// zero messages as if the channel were empty.
TEST(DemoHostile, ToolsReportZeroedSlotHeadersAndAGarbageTail) {
  LiveDemo demo(2);
  int status = 0;
  const std::string out = demo.Finish(&status);
  ASSERT_EQ(status, 0) << out;

  const FileParts plant = PartsOf(demo.options(), "/plant/state");
  WriteZeros(demo.PathOf("/plant/state"), plant.slot_headers, plant.slots_end);
  const std::string echo = RunCommand(
      "timeout 20 tools/tether echo /plant/state --from-oldest --count 2" +
          demo.where() + " 2>&1",
      &status);
  EXPECT_NE(WEXITSTATUS(status), 124) << "echo blocked: " << echo;
  EXPECT_NE(status, 0) << echo;
  EXPECT_THAT(echo, HasSubstr("corrupt")) << echo;

  const FileParts imu = PartsOf(demo.options(), "/robot/imu");
  const uint64_t garbage = 6926907815881082933ull;
  {
    const int fd = ::open(demo.PathOf("/robot/imu").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, &garbage, 8, static_cast<off_t>(imu.tail)), 8);
    ::close(fd);
  }
  const std::string list =
      RunCommand("timeout 20 tools/tether list" + demo.where() + " 2>&1", &status);
  EXPECT_NE(status, 0) << list;
  EXPECT_THAT(list, HasSubstr("corrupt")) << list;
  // The impossible tail is the reported finding, never a message count.
  EXPECT_TRUE(std::regex_search(list, std::regex(R"(/robot/imu\s+CORRUPT: )")))
      << list;
  const std::string stat = RunCommand(
      "timeout 20 tools/tether stat /robot/imu --duration 1" + demo.where() +
          " 2>&1",
      &status);
  EXPECT_NE(status, 0) << stat;
  EXPECT_THAT(stat, HasSubstr("corrupt")) << stat;
}

// A pin bit of a reader nobody registered (index 6 of 8: a sweep clears
// only bits no reader can have), written into /plant/state's
// reader-state file after a run: the messages are intact, so list shows the
// channel with its counts and a warning, and echo and stat read it,
// warning, instead of refusing it as corrupt.
TEST(DemoHostile, AReaderStateFindingIsAWarningAndTheToolsReadOn) {
  LiveDemo demo(2);
  int status = 0;
  const std::string out = demo.Finish(&status);
  ASSERT_EQ(status, 0) << out;
  {
    auto c = shm::Channel::Open(demo.options(), "/plant/state");
    ASSERT_TRUE(c.ok()) << c.status();
    shm::internal::ChannelAccess::pin_word(**c, 0)->fetch_or(uint64_t{1} << 6);
  }
  const std::string list =
      RunCommand("timeout 20 tools/tether list" + demo.where() + " 2>&1", &status);
  EXPECT_EQ(status, 0) << list;
  EXPECT_THAT(list, Not(HasSubstr("CORRUPT"))) << list;
  EXPECT_TRUE(std::regex_search(
      list, std::regex(R"(/plant/state\s+\S*JointState\s+.*\n\s+warning: .*)"
                       R"(pinned by readers that are not registered)")))
      << list;
  const std::string json = RunCommand(
      "timeout 20 tools/tether list --json" + demo.where() + " 2>&1", &status);
  EXPECT_EQ(status, 0) << json;
  EXPECT_THAT(json, HasSubstr("\"reader_state_problem\":")) << json;
  const std::string echo = RunCommand(
      "timeout 20 tools/tether echo /plant/state --from-oldest --count 1" +
          demo.where() + " 2>&1",
      &status);
  EXPECT_EQ(status, 0) << echo;
  EXPECT_THAT(echo, HasSubstr("warning: ")) << echo;
  EXPECT_THAT(echo, HasSubstr("reading on")) << echo;
  EXPECT_THAT(echo, HasSubstr("sampleTimeNs")) << echo;
  const std::string stat = RunCommand(
      "timeout 20 tools/tether stat /plant/state --duration 1" + demo.where() +
          " 2>&1",
      &status);
  EXPECT_EQ(status, 0) << stat;
  EXPECT_THAT(stat, Not(HasSubstr("CORRUPT"))) << stat;
}

// Reproducer 3: a 1 MiB tmpfs as the root. The stack needs more: launch
// fails before creating anything, says how much is needed and free and how
// to make room, and leaves the filesystem empty. Needs root (mount).
TEST(DemoHostile, ATooSmallFilesystemFailsTheLaunchUpFrontAndLeavesNothing) {
  shm::testing::ScopedRoot scratch;
  const std::string mnt = scratch.root() + "-tmpfs";
  ASSERT_EQ(::mkdir(mnt.c_str(), 0755), 0);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=1M") != 0) {
    ::rmdir(mnt.c_str());
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                 << "): needs root outside a sandbox";
  }
  DemoWorkdir workdir(scratch.root() + "-work");
  for (const char* extra : {"", " --no-status-channel"}) {
    int status = 0;
    const std::string out = RunCommand(
        "timeout 60 tools/tether launch " + workdir.path() +
            "/examples/config/example_stack.json --root " + mnt +
            " --instance demo --duration 3 --workdir " + workdir.path() +
            extra + " 2>&1",
        &status);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1)
        << "status " << status << ": " << out;
    EXPECT_THAT(out, HasSubstr("need"));
    EXPECT_THAT(out, HasSubstr("is free there"));
    // The fix names the filesystem that is full, not /dev/shm.
    EXPECT_THAT(out, HasSubstr("mount -o remount,size=2G " + mnt));
    EXPECT_THAT(out, Not(HasSubstr("created")));
    EXPECT_TRUE(std::filesystem::is_empty(mnt))
        << "left behind in " << mnt << " after: " << out;
  }
  EXPECT_EQ(::umount(mnt.c_str()), 0);
  ::rmdir(mnt.c_str());
}

}  // namespace
}  // namespace tether::examples
