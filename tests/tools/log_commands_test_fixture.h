// Test fixture for the log command tests through the real `tether` binary
// (log_commands_binary_test.cc, log_commands_faults_binary_test.cc): a
// unique shm root with a /cli/samples channel, --root/--instance words for
// a root, and a recording of /cli/samples made while messages are sent.
#ifndef TETHER_TESTS_TOOLS_LOG_COMMANDS_TEST_FIXTURE_H_
#define TETHER_TESTS_TOOLS_LOG_COMMANDS_TEST_FIXTURE_H_

#include <signal.h>
#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/run_tether.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::tools::test {

class LogCommandsTest : public ::testing::Test {
 protected:
  LogCommandsTest() {
    log::testing::RegisterTestTypes(schemas_);
    samples_ = log::testing::MakeChannel(root_.options(), schemas_,
                                         "/cli/samples",
                                         log::testing::kSampleType,
                                         {.max_size = 4096, .depth = 1024});
  }
  std::vector<std::string> Where(const shm::testing::ScopedRoot& root) {
    return {"--root", root.root(), "--instance", root.options().instance};
  }
  // Records /cli/samples while `count` messages are sent (`pause_us` apart),
  // with `extra` recorder arguments. The recorder is stopped with SIGINT
  // once every message is sent and it is recording (its stop handler is in
  // then), and its stop drains once more: so it has them all however slow
  // the machine is (the queue holds 1024; it reads from the oldest, so it
  // may start before or after the first send). No --duration: a fixed one
  // could end before a loaded machine had sent them all. run.timeout_s
  // (default 60 s here) bounds a recorder that hangs.
  Outcome Record(const std::string& out, int count,
                 const std::vector<std::string>& extra = {},
                 RunOptions run = {}, int pause_us = 1000) {
    if (run.timeout_s == 0) run.timeout_s = 60;
    std::vector<std::string> args = {"record", "--out", out, "--force",
                                     "--from-oldest", "--period", "5"};
    for (const std::string& w : Where(root_)) args.push_back(w);
    for (const std::string& e : extra) args.push_back(e);
    // Unique in the binary: every test of it shares TEST_TMPDIR, and a tag
    // reused would let the wait below read an earlier run's "recording".
    static int records = 0;
    const std::string tag = "record-" + std::to_string(++records);
    const pid_t pid = StartTether(args, tag, run);
    if (pid <= 0) return {};  // StartTether said why (a test failure)
    std::thread publisher([&] {
      auto pub = transport::RawPublisher::Create(samples_.get());
      for (int i = 0; i < count; ++i) {
        log::testing::PublishBytes(**pub, log::testing::SampleMessage(i));
        std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      }
    });
    publisher.join();
    // A recorder that failed before it said so has exited already: the
    // signal then goes to an unreaped child and its outcome says why.
    (void)log::testing::WaitFor([&] {
      return StartedStderr(tag).find("recording ") != std::string::npos;
    }, 30);
    ::kill(pid, SIGINT);
    return WaitTether(pid, tag, run);
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::ChannelHandle> samples_;
};

}  // namespace tether::tools::test

#endif  // TETHER_TESTS_TOOLS_LOG_COMMANDS_TEST_FIXTURE_H_
