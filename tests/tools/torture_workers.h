// Scaffolding of the torture test (torture_test.cc): the stacks' channel
// names, the counts its fork children keep in shared memory, its workers
// (a pattern publisher, stack B's checking reader, the launcher's relay
// node), the stack config the launcher runs, the launcher's children from
// /proc, and the writer of random bytes into a channel's data file.
#ifndef TETHER_TESTS_TOOLS_TORTURE_WORKERS_H_
#define TETHER_TESTS_TOOLS_TORTURE_WORKERS_H_

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <new>
#include <random>
#include <span>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "loop/event_loop.h"
#include "loop/node_main.h"
#include "shm/channel.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"
#include "tests/shm/stress_util.h"
#include "tests/shm/stress_workers.h"
#include "tests/tools/launch_test_util.h"
#include "util/json_writer.h"

namespace tether::torture {

namespace st = shm::testing;
using Clock = std::chrono::steady_clock;

inline constexpr int kSources = 4;
inline constexpr int kNodes = 3;
inline constexpr const char* kSourceNames[kSources] = {"/t/imu", "/t/odom",
                                                      "/t/cmd", "/t/state"};
inline constexpr const char* kNodeOutputs[kNodes] = {
    "/t/relay_imu", "/t/relay_cmd", "/t/relay_state"};
inline constexpr int kNodeInputs[kNodes] = {0, 2, 3};

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
inline bool ReapBy(pid_t pid, Clock::time_point deadline, int* status) {
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
inline int PublisherLoop(const shm::ChannelOptions& options, const std::string& name,
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
inline int TolerantReader(const shm::ChannelOptions& options, const std::string& name,
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
inline int TortureNode(const std::string& in, const std::string& out) {
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

inline std::string SelfPath() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
}

// The launcher's children (its nodes), from /proc.
inline std::vector<pid_t> ChildrenOf(pid_t pid) {
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

inline std::string StackConfig() {
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
inline const char* Corrupt(const std::string& path, std::mt19937_64& rng) {
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

}  // namespace tether::torture

#endif  // TETHER_TESTS_TOOLS_TORTURE_WORKERS_H_
