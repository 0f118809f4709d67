// An event loop running as another user that may read a stack's channels but
// not write their reader state (a visualiser or logger as user nobody): it
// subscribes as a guest on its own — a note says why, its watcher gets
// private copies and its loop polls — receives every message, and affects
// nobody: it holds no pin, registers no sleeper, and the publisher makes no
// wake syscall for it. Root drops to nobody in a forked child, so this runs
// outside Bazel's sandbox (tag no-sandbox); as non-root it is skipped.
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "gtest/gtest.h"
#include "loop/uring_event_loop.h"
#include "tests/shm/multi_user_test.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/child_process.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::loop {
namespace {

using ::tether::testing::ChildProcess;

constexpr int kMessages = 400;

// Others may read both files, write neither: nobody is a guest.
constexpr char kStack[] = R"({
  "channels": [
    {"name": "/state", "type": "tests/transport/framing_test.capnp:Scalars",
     "maxSize": 256, "queueDepth": 1024, "maxPinned": 2,
     "mode": "0644", "readerMode": "0644"}
  ]
})";

TEST(GuestLoop, ReaderWithoutReaderStateWriteReceivesEverythingAndCostsNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to drop to nobody";
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  schemas.Register<Scalars>();
  auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                             schemas.known_types());
  ASSERT_TRUE(stack.ok()) << stack.status();
  auto set = transport::ChannelSet::Create(root.options(), *stack, schemas);
  ASSERT_TRUE(set.ok()) << set.status();
  auto channel = (*set)->Find("/state");
  ASSERT_TRUE(channel.ok());
  auto pub = transport::Publisher<Scalars>::Create(*channel);
  ASSERT_TRUE(pub.ok());

  const std::string note_path = root.root() + "-note.txt";
  ChildProcess child([&](const ChildProcess::Voice& voice) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(testing::kNogroup) != 0 ||
        ::setuid(testing::kNobody) != 0) {
      return 100;
    }
    // The loop's note goes to stderr: keep it for the parent to read.
    if (std::freopen(note_path.c_str(), "w", stderr) == nullptr) return 101;
    transport::SchemaRegistry s;
    s.Register<Scalars>();
    auto guest_set = transport::ChannelSet::Create(root.options(), *stack, s);
    if (!guest_set.ok()) {
      std::fprintf(stderr, "open: %s\n",
                   std::string(guest_set.status().message()).c_str());
      return 1;
    }
    auto loop = UringEventLoop::Create("viz", guest_set->get(), {});
    if (!loop.ok()) return 2;
    int64_t expected = 0;
    uint64_t missed = 0, out_of_order = 0;
    auto w = (*loop)->MakeWatcher<Scalars>(
        "/state", [&](Scalars::Reader m, const MessageContext& c) {
          if (m.getI64() != expected) ++out_of_order;
          expected = m.getI64() + 1;
          missed += c.missed;
          if (expected == kMessages) (*loop)->Exit();
        });
    if (!w.ok()) {
      std::fprintf(stderr, "watch: %s\n", std::string(w.status().message()).c_str());
      return 3;
    }
    (*loop)->AddTimer([&] { (*loop)->Exit(); })
        ->Schedule((*loop)->monotonic_now() + std::chrono::seconds(20));
    voice.Say();
    (*loop)->Run();
    std::fprintf(stderr, "got %lld missed %llu out_of_order %llu\n",
                 static_cast<long long>(expected),
                 static_cast<unsigned long long>(missed),
                 static_cast<unsigned long long>(out_of_order));
    std::fflush(stderr);
    return expected == kMessages && missed == 0 && out_of_order == 0 ? 0 : 4;
  });
  ASSERT_TRUE(child.Heard().has_value())
      << "the guest did not start (step " << child.ExitCode() << ")";
  uint32_t max_sleepers = 0, max_registered = 0, max_pinning = 0;
  for (int i = 0; i < kMessages; ++i) {
    auto loan = (*pub)->MakeLoan();
    loan.root().setI64(i);
    ASSERT_EQ((*pub)->Send(std::move(loan)).status,
              transport::PublishStatus::kOk);
    const shm::ChannelStats st = (*channel)->stats();
    max_sleepers = std::max(max_sleepers, st.sleepers);
    max_registered = std::max<uint32_t>(max_registered, st.registered_sleepers);
    max_pinning = std::max<uint32_t>(max_pinning, st.pinning_readers);
    ::usleep(500);  // mostly long enough for the guest to poll in between
  }
  const int status = child.Wait();
  std::ifstream note_file(note_path);
  const std::string note((std::istreambuf_iterator<char>(note_file)),
                         std::istreambuf_iterator<char>());
  std::remove(note_path.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << note;
  EXPECT_EQ(WEXITSTATUS(status), 0) << note;
  EXPECT_NE(note.find("reads as a guest"), std::string::npos) << note;
  EXPECT_NE(note.find("@readers."), std::string::npos) << note;
  // It affected nobody: no sleeper, no registration, no pin.
  EXPECT_EQ(max_sleepers, 0u);
  EXPECT_EQ(max_registered, 0u);
  EXPECT_EQ(max_pinning, 0u);
}

}  // namespace
}  // namespace tether::loop
