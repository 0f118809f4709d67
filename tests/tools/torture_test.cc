// Torture: a demo-sized stack under load while its processes are SIGKILLed
// 10,000 times (--kills=N), and a second stack whose channels get random
// bytes written into their shared memory meanwhile.
//
// Stack A, started by the real `tether launch`: four source channels, each
// with two publisher processes, a pinned reader that is killed and
// replaced, and a checker reader that is never killed; three event-loop
// nodes of the launcher (this binary in --torture-node mode: a raw watcher
// on a source channel, a raw sender on its own channel) which the launcher
// restarts after each kill; a checker on each node's channel. Kills pick
// publishers, pinned readers and the launcher's nodes at random.
//
// Stack B, another instance: four channels, each with a publisher and a
// pinned checking reader that stop at the first error tether reports. A
// thread writes random bytes into the data files of three of them (the
// validated header fields, the tail, ring entries, slot states, publisher
// registrations: the words tether's protocol reads), the fourth is left
// alone.
//
// Afterwards: no process is stuck (each stops within a deadline), every
// stack-A channel and B's untouched channel audit clean (every slot
// accounted for, nothing loaned or pinned once swept, CheckConsistency OK),
// every checker's count adds up exactly (delivered + counted missed = every
// index committed since it started, order and payload intact), what the
// publishers counted as sent is what was committed (less at most one per
// killed publisher: killed between commit and count), and every corrupted
// channel whose readers saw anything wrong was reported by tether (a reader
// or publisher got kCorrupt/kNoLoan, or the channel fails its audit);
// damage nobody reported fails the test. Prints the figures.
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "loop/event_loop.h"
#include "loop/node_main.h"
#include "shm/channel.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_audit.h"
#include "tests/shm/shm_test_util.h"
#include "tests/shm/stress_util.h"
#include "tests/shm/stress_workers.h"
#include "tests/tools/launch_test_util.h"
#include "tests/tools/run_tether.h"

namespace tether {
namespace {

namespace st = shm::testing;
using Clock = std::chrono::steady_clock;

int g_kills = 10'000;

constexpr int kSources = 4;
constexpr int kNodes = 3;
const char* const kSourceNames[kSources] = {"/t/imu", "/t/odom", "/t/cmd",
                                            "/t/state"};
const char* const kNodeOutputs[kNodes] = {"/t/relay_imu", "/t/relay_cmd",
                                          "/t/relay_state"};
const int kNodeInputs[kNodes] = {0, 2, 3};

// Counts kept by this test's own workers (fork children), in shared memory.
struct ChannelBoard {
  std::atomic<uint64_t> sent{0};         // sends that returned kOk
  std::atomic<uint64_t> publisher_kills{0};
  std::atomic<int> reported{0};          // tether said kCorrupt / kNoLoan
  std::atomic<int> damage{0};            // a checker saw bad data or order
  std::atomic<int> reader_done{0};
  std::atomic<int> publisher_done{0};
  // Bumped every loop round: a worker whose beat stops is stuck in tether.
  std::atomic<uint64_t> reader_beat{0}, publisher_beat{0};
  std::atomic<uint64_t> received{0}, missed{0}, start{0}, end{0};
  char what[200] = {};
};

struct Board {
  std::atomic<int> stop{0};
  std::atomic<int> drain{0};
  std::atomic<uint32_t> next_id{1};
  ChannelBoard a[kSources];
  ChannelBoard b[kSources];

  static Board* Create() {
    void* m = ::mmap(nullptr, sizeof(Board), PROT_READ | PROT_WRITE,
                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? nullptr : new (m) Board();
  }
};

using st::KillAndReap;
using st::Spawn;

// Waits for `pid` until `deadline`; false (and kills it) if it is stuck.
bool ReapBy(pid_t pid, Clock::time_point deadline, int* status) {
  while (Clock::now() < deadline) {
    const pid_t r = ::waitpid(pid, status, WNOHANG);
    if (r == pid) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  KillAndReap(pid);
  return false;
}

// A publisher of pattern messages with a fresh id; counts into `cb`.
// With `tolerant`, an error tether reports is recorded and ends it (stack
// B); otherwise it is a failure (stack A must never see one).
int PublisherLoop(const shm::ChannelOptions& options, const std::string& name,
                  Board* board, ChannelBoard* cb, bool tolerant) {
  // Stack B's publisher says when it stopped by itself, at whatever step:
  // refused at Create (a channel found corrupt at open) counts as much as
  // a failed send.
  struct Done {
    ChannelBoard* cb;
    ~Done() { cb->publisher_done = 1; }
  } done{cb};
  const uint32_t id = board->next_id.fetch_add(1);
  auto c = shm::Channel::Open(options, name);
  if (!c.ok()) return tolerant ? (cb->reported = 1, 0) : 10;
  auto pub = shm::Publisher::Create(c->get());
  if (!pub.ok()) return tolerant ? (cb->reported = 1, 0) : 11;
  std::mt19937 rng(id);
  const size_t max = (*c)->params().slot_size;
  for (uint64_t seq = 0; !board->stop.load(std::memory_order_relaxed); ++seq) {
    cb->publisher_beat.fetch_add(1, std::memory_order_relaxed);
    auto loan = (*pub)->Loan();
    if (loan.empty()) return tolerant ? (cb->reported = 1, 0) : 12;
    const size_t n = st::WritePattern(
        loan, id, seq,
        sizeof(st::PatternHeader) + rng() % (max - sizeof(st::PatternHeader)));
    // With the origin the readers' checkers expect (stress_util.h).
    const shm::SendResult r = st::SendWithStressOrigin(**pub, n, id, seq);
    if (r.status != shm::SendStatus::kOk) {
      return tolerant ? (cb->reported = 1, 0) : 13;
    }
    cb->sent.fetch_add(1, std::memory_order_relaxed);
    if (rng() % 64 == 0) {
      timespec ts{0, static_cast<long>(rng() % 100'000)};
      ::nanosleep(&ts, nullptr);
    }
  }
  return 0;
}

// Stack B's reader: pinned, from the oldest, checks order, accounting and
// payloads; stops at the first error tether reports (recorded) or the
// first damage it sees itself (recorded: unreported unless tether also
// reports it).
int TolerantReader(const shm::ChannelOptions& options, const std::string& name,
                   Board* board, ChannelBoard* cb) {
  auto c = shm::Channel::Open(options, name);
  if (!c.ok()) return cb->reported = 1, cb->reader_done = 1, 0;
  auto reader = shm::Reader::Create(
      c->get(), {.pin = true, .start = shm::ReaderOptions::Start::kOldest});
  if (!reader.ok()) return cb->reported = 1, cb->reader_done = 1, 0;
  st::StreamChecker checker((*reader)->next_index());
  cb->start = (*reader)->next_index();
  shm::MessageView v;
  std::string error;
  for (;;) {
    cb->reader_beat.fetch_add(1, std::memory_order_relaxed);
    const bool draining = board->drain.load();
    const shm::ReadStatus s = (*reader)->Next(&v);
    if (s == shm::ReadStatus::kCorrupt) {
      cb->reported = 1;
      break;
    }
    if (s == shm::ReadStatus::kNothingNew) {
      if (draining) break;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    if (!checker.Observe(v, /*check_data=*/true, &error)) {
      cb->damage = 1;
      std::snprintf(cb->what, sizeof(cb->what), "%s", error.c_str());
      break;
    }
  }
  cb->received = checker.received();
  cb->missed = checker.missed();
  cb->end = checker.next_expected();
  cb->reader_done = 1;
  return 0;
}

// The launcher's node: forwards every message of `in` as a pattern message
// on `out` (publisher id 1,000,000 + pid: unique per incarnation).
int TortureNode(const std::string& in, const std::string& out) {
  const transport::NodeEnvironment env =
      loop::NodeEnvironmentFromProcess("torture_node", "");
  auto main = loop::NodeMain::Start(env, {});
  if (!main.ok()) return loop::FailNode(env.node_name, main.status());
  loop::EventLoop* l = (*main)->loop();
  auto sender = l->MakeRawSender(out);
  if (!sender.ok()) return loop::FailNode(env.node_name, sender.status());
  transport::RawPublisher* s = sender->get();
  const uint32_t id = 1'000'000u + static_cast<uint32_t>(::getpid());
  auto watcher = l->MakeRawWatcher(in, [s, id](const transport::RawMessage& m) {
    std::span<std::byte> loan = s->Loan();
    if (loan.empty()) return;
    const uint64_t seq = s->messages_sent();
    const size_t n = st::WritePattern(
        loan, id, seq, sizeof(st::PatternHeader) + m.bytes.size() % 256);
    shm::SendTimes times;  // clocks from commit; the origin checkers expect
    times.origin = st::StressOrigin(id, seq);
    (void)s->Send(n, &times);
  });
  if (!watcher.ok()) return loop::FailNode(env.node_name, watcher.status());
  const int rc = (*main)->Run();
  sender->reset();
  return rc;
}

std::string SelfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The launcher's children (its nodes), from /proc.
std::vector<pid_t> ChildrenOf(pid_t pid) {
  std::vector<pid_t> out;
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  DIR* d = ::opendir(tasks.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::istringstream in(
        tools::testing::ReadFile(tasks + "/" + e->d_name + "/children"));
    pid_t child;
    while (in >> child) out.push_back(child);
  }
  ::closedir(d);
  return out;
}

std::string StackConfig() {
  std::vector<std::string> channels;
  auto channel = [&](const std::string& name, int depth, int size) {
    channels.push_back(
        "{\"name\": \"" + name +
        "\", \"type\": \"examples/demo.capnp:ImuSample\", \"maxSize\": " +
        std::to_string(size) + ", \"frequencyHz\": 1000, \"queueDepth\": " +
        std::to_string(depth) +
        ", \"maxPublishers\": 4, \"maxPinned\": 8}");
  };
  const int depths[kSources] = {64, 32, 16, 64};
  const int sizes[kSources] = {512, 256, 1024, 2048};
  for (int i = 0; i < kSources; ++i) channel(kSourceNames[i], depths[i], sizes[i]);
  for (int i = 0; i < kNodes; ++i) channel(kNodeOutputs[i], 32, 512);
  std::vector<std::string> nodes;
  for (int i = 0; i < kNodes; ++i) {
    nodes.push_back("{\"name\": \"relay" + std::to_string(i) +
                    "\", \"command\": " + util::JsonQuote(SelfPath()) +
                    ", \"args\": [\"--torture-node\", \"" +
                    kSourceNames[kNodeInputs[i]] + "\", \"" + kNodeOutputs[i] +
                    "\"], \"restart\": {\"policy\": \"always\", "
                    "\"backoffMs\": 1, \"maxBackoffMs\": 4, "
                    "\"maxRestarts\": 0}}");
  }
  std::string out = "{\"channels\": [";
  for (size_t i = 0; i < channels.size(); ++i) out += (i ? ", " : "") + channels[i];
  out += "], \"nodes\": [";
  for (size_t i = 0; i < nodes.size(); ++i) out += (i ? ", " : "") + nodes[i];
  return tools::testing::WithDemoSchema(out + "]}");
}

// One corruption: 1..8 random bytes at a random place among the words the
// protocol reads in `path`'s data file. Returns what it hit.
const char* Corrupt(const std::string& path, std::mt19937_64& rng) {
  namespace in = shm::internal;
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  in::ChannelHeader h;
  if (::pread(fd, &h, sizeof(h), 0) != static_cast<ssize_t>(sizeof(h))) {
    ::close(fd);
    return nullptr;
  }
  shm::QueueParams p{.slot_size = h.slot_size, .queue_depth = h.queue_depth,
                     .max_publishers = h.max_publishers,
                     .max_pinned = h.max_pinned};
  // Sizes from the header, which an earlier round may have damaged: stay
  // inside the file whatever they say.
  const in::Layout l = in::Layout::For(p, h.metadata_size);
  const off_t file_size = ::lseek(fd, 0, SEEK_END);
  uint64_t begin = 0, len = 0;
  const char* what = "";
  switch (rng() % 5) {
    case 0:
      what = "header";
      if (rng() % 2) {
        begin = 0, len = offsetof(in::ChannelHeader, creator_pid);
      } else {
        begin = offsetof(in::ChannelHeader, nonce), len = 16;
      }
      break;
    case 1:
      what = "tail";
      begin = offsetof(in::ChannelHeader, tail), len = 8;
      break;
    case 2:
      what = "ring";
      begin = l.ring, len = uint64_t{p.queue_depth} * 8;
      break;
    case 3:
      what = "slot state";
      begin = l.slot_headers + (rng() % std::max<uint64_t>(p.pool_size(), 1)) *
                                   sizeof(in::SlotHeader);
      len = 8;
      break;
    default:
      what = "publisher registration";
      begin = l.publishers +
              (rng() % std::max<uint32_t>(p.max_publishers, 1)) *
                  sizeof(in::PublisherEntry);
      len = 8;
      break;
  }
  if (len == 0 || begin + len > static_cast<uint64_t>(file_size)) {
    ::close(fd);
    return nullptr;
  }
  const uint64_t n = 1 + rng() % std::min<uint64_t>(8, len);
  const uint64_t at = begin + rng() % (len - n + 1);
  uint8_t bytes[8];
  for (uint64_t i = 0; i < n; ++i) bytes[i] = static_cast<uint8_t>(rng());
  const bool ok = ::pwrite(fd, bytes, n, at) == static_cast<ssize_t>(n);
  ::close(fd);
  return ok ? what : nullptr;
}

TEST(Torture, KilledProcessesAndCorruptedChannelsLeaveNothingSilent) {
  st::ScopedRoot root_a, root_b;
  root_a.options().instance = "torture";
  root_b.options().instance = "torture_b";
  Board* board = Board::Create();
  ASSERT_NE(board, nullptr);
  const std::string dir = tools::testing::MakeTempDir();
  tools::testing::WriteFile(dir + "/stack.json", StackConfig());

  // Stack A: the launcher creates the channels and runs the nodes.
  const pid_t launcher = Spawn([&] {
    const std::string tether = tools::test::TetherPath();
    const std::string out = dir + "/launcher.log";
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(tether.c_str(), tether.c_str(), "launch",
            (dir + "/stack.json").c_str(), "--root", root_a.root().c_str(),
            "--instance", "torture", static_cast<char*>(nullptr));
    return 127;
  });
  ASSERT_GT(launcher, 0);
  ASSERT_TRUE(tools::testing::WaitUntil(
      [&] { return ChildrenOf(launcher).size() == kNodes; },
      std::chrono::seconds(30)))
      << tools::testing::ReadFile(dir + "/launcher.log");
  const shm::ChannelOptions& a = root_a.options();

  // Checkers first (never killed): they account for everything after.
  st::SharedBoard* checks = st::SharedBoard::Create();
  ASSERT_NE(checks, nullptr);
  std::vector<pid_t> checkers;
  std::vector<std::string> checked;
  for (int i = 0; i < kSources; ++i) checked.push_back(kSourceNames[i]);
  for (int i = 0; i < kNodes; ++i) checked.push_back(kNodeOutputs[i]);
  for (size_t i = 0; i < checked.size(); ++i) {
    checkers.push_back(Spawn([&, i] {
      return st::ReaderMain(a, checked[i], static_cast<int>(i), -1,
                            /*sleepy=*/i % 2 == 0, /*slow=*/false, checks,
                            static_cast<uint32_t>(100 + i));
    }));
  }
  ASSERT_TRUE(tools::testing::WaitUntil(
      [&] { return checks->ready.load() == static_cast<int>(checked.size()) ||
                   checks->errors.load() != 0; },
      std::chrono::seconds(10)));
  ASSERT_EQ(checks->errors.load(), 0) << checks->first_error;

  // Killable workers on stack A: two publishers and one pinned reader per
  // source channel (killed readers report into slots 16+).
  std::vector<pid_t> publishers(2 * kSources), readers(kSources);
  auto start_publisher = [&](int k) {
    const int ch = k / 2;
    publishers[k] = Spawn([&, ch] {
      return PublisherLoop(a, kSourceNames[ch], board, &board->a[ch], false);
    });
  };
  auto start_reader = [&](int ch) {
    readers[ch] = Spawn([&, ch] {
      return st::ReaderMain(a, kSourceNames[ch], 16 + ch, -1, ch % 2 == 1,
                            /*slow=*/true, checks,
                            static_cast<uint32_t>(::getpid()));
    });
  };
  for (int k = 0; k < 2 * kSources; ++k) start_publisher(k);
  for (int ch = 0; ch < kSources; ++ch) start_reader(ch);

  // Stack B: per channel a publisher and a checking reader. A channel
  // found corrupt (a worker was told so, or its audit fails) is counted,
  // removed and made again with new workers; damage a checker saw that
  // tether did not report fails the test.
  const shm::ChannelOptions& b = root_b.options();
  const shm::QueueParams b_params{.slot_size = 256, .queue_depth = 16,
                                  .max_publishers = 2, .max_pinned = 2};
  std::vector<std::string> b_paths(kSources);
  std::vector<pid_t> b_reader(kSources), b_publisher(kSources);
  std::vector<int> pending(kSources, 0);  // corruptions since made
  // Detections: a worker's call said so (kCorrupt, kNoLoan, a failed
  // open), or only the audit (CheckConsistency, what tools run) found it.
  int corruptions = 0, detections = 0, told_by_call = 0, b_stuck = 0;
  std::map<std::string, int> hit;
  auto make_b = [&](int i) {
    auto c = shm::Channel::OpenOrCreate(b, kSourceNames[i], b_params);
    if (!c.ok()) return false;
    b_paths[i] = (*c)->path();
    ChannelBoard* cb = &board->b[i];
    cb->~ChannelBoard();
    new (cb) ChannelBoard();
    b_reader[i] = Spawn([&, i] {
      return TolerantReader(b, kSourceNames[i], board, &board->b[i]);
    });
    b_publisher[i] = Spawn([&, i] {
      return PublisherLoop(b, kSourceNames[i], board, &board->b[i], true);
    });
    pending[i] = 0;
    return true;
  };
  for (int i = 0; i < kSources; ++i) ASSERT_TRUE(make_b(i));
  // Whether tether has reported channel i's corruption.
  auto reported_b = [&](int i) {
    if (board->b[i].reported.load() != 0) return true;
    auto c = shm::Channel::Open(b, kSourceNames[i]);
    return !c.ok() || (*c)->corrupt() || !(*c)->CheckConsistency().ok();
  };
  std::mt19937_64 corrupt_rng(12345);
  auto corrupt_step = [&] {
    const int ch = static_cast<int>(corrupt_rng() % (kSources - 1));
    if (pending[ch] > 0 && reported_b(ch)) {
      ++detections;
      if (board->b[ch].reported.load() != 0) ++told_by_call;
      // Workers still running must still be making progress (not stuck
      // inside a tether call on the corrupt memory); then they go.
      ChannelBoard& cb = board->b[ch];
      const uint64_t r0 = cb.reader_beat.load(), p0 = cb.publisher_beat.load();
      const bool moving = tools::testing::WaitUntil(
          [&] {
            return (cb.reader_done.load() || cb.reader_beat.load() != r0) &&
                   (cb.publisher_done.load() || cb.publisher_beat.load() != p0);
          },
          std::chrono::seconds(5));
      if (!moving) {
        ++b_stuck;
        ADD_FAILURE() << kSourceNames[ch] << ": a stack-B worker is stuck";
      }
      KillAndReap(b_reader[ch]);
      KillAndReap(b_publisher[ch]);
      EXPECT_EQ(board->b[ch].damage.load(), 0)
          << "reported, but only after damage was seen: " << board->b[ch].what;
      (void)shm::Channel::Remove(b, kSourceNames[ch]);
      EXPECT_TRUE(make_b(ch));
      return;
    }
    EXPECT_EQ(board->b[ch].damage.load(), 0)
        << "damage tether did not report: " << board->b[ch].what;
    if (const char* what = Corrupt(b_paths[ch], corrupt_rng)) {
      ++hit[what];
      ++corruptions;
      ++pending[ch];
    }
  };

  // The kills.
  std::mt19937 rng(2026);
  int kills = 0, publisher_kills = 0, reader_kills = 0, node_kills = 0;
  const auto started = Clock::now();
  while (kills < g_kills && checks->errors.load() == 0) {
    const int kind = static_cast<int>(rng() % 100);
    if (kind < 35) {
      const int k = static_cast<int>(rng() % publishers.size());
      KillAndReap(publishers[k]);
      board->a[k / 2].publisher_kills.fetch_add(1);
      start_publisher(k);
      ++publisher_kills;
    } else if (kind < 65) {
      const int ch = static_cast<int>(rng() % readers.size());
      KillAndReap(readers[ch]);
      start_reader(ch);
      ++reader_kills;
    } else {
      const std::vector<pid_t> nodes = ChildrenOf(launcher);
      if (nodes.empty()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;  // all restarting
      }
      ::kill(nodes[rng() % nodes.size()], SIGKILL);  // the launcher reaps
      ++node_kills;
    }
    ++kills;
    if (kills % 3 == 0) corrupt_step();
    if (kills % 1000 == 0) {
      std::printf("torture: %d kills in %.1f s\n", kills,
                  std::chrono::duration<double>(Clock::now() - started).count());
      std::fflush(stdout);
    }
    timespec ts{0, static_cast<long>(rng() % 1'000'000)};
    ::nanosleep(&ts, nullptr);
  }
  const double kill_seconds =
      std::chrono::duration<double>(Clock::now() - started).count();

  // Stop everything; whatever does not stop in time is stuck.
  int stuck = 0, status = 0;
  board->stop = 1;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  for (pid_t p : publishers) {
    if (!ReapBy(p, deadline, &status)) ++stuck;
    else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  ::kill(launcher, SIGTERM);
  if (!ReapBy(launcher, deadline, &status)) ++stuck;
  else EXPECT_TRUE(WIFEXITED(status)) << status;
  for (pid_t p : readers) KillAndReap(p);
  board->drain = 1;
  checks->drain = 1;
  for (pid_t p : checkers) {
    if (!ReapBy(p, deadline, &status)) ++stuck;
    else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  for (int i = 0; i < kSources; ++i) {
    for (pid_t p : {b_reader[i], b_publisher[i]}) {
      if (!ReapBy(p, deadline, &status)) ++stuck;
      else EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }
  }
  stuck += b_stuck;
  EXPECT_EQ(stuck, 0) << "processes that did not stop within 20 s";
  EXPECT_EQ(checks->errors.load(), 0) << checks->first_error;
  EXPECT_GE(kills, g_kills);

  // Stack A: every channel audits clean and every count adds up.
  uint64_t messages = 0;
  for (size_t i = 0; i < checked.size(); ++i) {
    SCOPED_TRACE(checked[i]);
    auto c = shm::Channel::Open(a, checked[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    (void)(*c)->Sweep();
    const st::AuditResult audit = st::Audit(c->get(), /*expect_idle=*/true);
    EXPECT_TRUE(audit.ok()) << audit.ToString();
    EXPECT_TRUE((*c)->CheckConsistency().ok()) << (*c)->CheckConsistency();
    const uint64_t total = (*c)->Stats().next_queue_index;
    const st::ReaderReport& rep = checks->readers[i];
    EXPECT_EQ(rep.done.load(), 1);
    EXPECT_EQ(rep.end.load(), total);
    EXPECT_EQ(rep.start.load() + rep.received.load() + rep.missed.load(),
              total);
    if (i < kSources) {
      const ChannelBoard& cb = board->a[i];
      EXPECT_LE(cb.sent.load(), total);
      EXPECT_LE(total, cb.sent.load() + cb.publisher_kills.load());
      EXPECT_GT(total, 0u);
    }
    messages += total;
    std::printf("torture: %-16s %8llu messages, checker got %llu, missed %llu\n",
                checked[i].c_str(), static_cast<unsigned long long>(total),
                static_cast<unsigned long long>(rep.received.load()),
                static_cast<unsigned long long>(rep.missed.load()));
  }

  // Stack B: each channel as it was left is reported or intact (every
  // count adds up, audit clean); the untouched one is intact.
  int reported_at_end = 0, intact_at_end = 0;
  for (int i = 0; i < kSources; ++i) {
    SCOPED_TRACE(kSourceNames[i]);
    const ChannelBoard& cb = board->b[i];
    if (reported_b(i)) {
      EXPECT_GT(pending[i], 0) << "an untouched channel reported";
      EXPECT_EQ(cb.damage.load(), 0) << cb.what;
      ++reported_at_end;
      continue;
    }
    EXPECT_EQ(cb.damage.load(), 0) << "damage tether did not report: " << cb.what;
    EXPECT_EQ(cb.reader_done.load(), 1);
    auto c = shm::Channel::Open(b, kSourceNames[i]);
    ASSERT_TRUE(c.ok()) << c.status();
    (void)(*c)->Sweep();
    EXPECT_EQ(cb.end.load(), (*c)->Stats().next_queue_index);
    EXPECT_EQ(cb.start.load() + cb.received.load() + cb.missed.load(),
              cb.end.load());
    const st::AuditResult audit = st::Audit(c->get(), /*expect_idle=*/true);
    EXPECT_TRUE(audit.ok()) << audit.ToString();
    ++intact_at_end;
  }
  std::printf(
      "torture: %d kills (%d publishers, %d pinned readers, %d launcher "
      "nodes) in %.1f s; %llu messages on stack A's %zu channels; %d "
      "stuck\n",
      kills, publisher_kills, reader_kills, node_kills, kill_seconds,
      static_cast<unsigned long long>(messages), checked.size(), stuck);
  std::printf("torture: %d corruptions written into stack B (", corruptions);
  for (const auto& [what, n] : hit) std::printf(" %s %d", what.c_str(), n);
  std::printf(" ); tether reported a corrupt channel %d times (%d to a "
              "worker's call, %d by its audit; re-created each time); at the "
              "end %d reported, %d intact\n",
              detections, told_by_call, detections - told_by_call,
              reported_at_end, intact_at_end);
  EXPECT_GT(detections, 0);
}

}  // namespace
}  // namespace tether

int main(int argc, char** argv) {
  if (argc == 4 && std::strcmp(argv[1], "--torture-node") == 0) {
    return tether::TortureNode(argv[2], argv[3]);
  }
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--kills=", 8) == 0) {
      tether::g_kills = std::atoi(argv[i] + 8);
    }
  }
  return RUN_ALL_TESTS();
}
