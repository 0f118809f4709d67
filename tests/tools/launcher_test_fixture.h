// Test fixture for the in-process launcher tests (launcher_test.cc,
// launcher_config_test.cc): a launcher run on its own thread that records
// every status it reports, a fixture making launchers over a stack JSON in
// a temporary directory and a unique shm root, and status lookups.
#ifndef TETHER_TESTS_TOOLS_LAUNCHER_TEST_FIXTURE_H_
#define TETHER_TESTS_TOOLS_LAUNCHER_TEST_FIXTURE_H_

#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "examples/demo_schemas.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/launch_test_util.h"
#include "tools/launcher.h"
#include "transport/schema_registry.h"

namespace tether::tools::testing {

inline constexpr std::chrono::milliseconds kGenerous{10000};

inline const NodeStatus* FindNode(const StackStatus& status,
                                  const std::string& name) {
  for (const NodeStatus& n : status.nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

inline bool NodeIs(const StackStatus& status, const std::string& name,
                   NodeState state) {
  const NodeStatus* n = FindNode(status, name);
  return n != nullptr && n->state == state;
}

// The demo's types compiled in, as a program embedding the launcher would
// pass them (the tether command passes none: see
// StackSchemasGiveTheTypes... in launcher_config_test.cc).
inline std::unique_ptr<transport::SchemaRegistry> DemoTypes() {
  auto schemas = std::make_unique<transport::SchemaRegistry>();
  examples::RegisterDemoSchemas(schemas.get());
  return schemas;
}

// Runs a launcher on its own thread (which then is the nodes' parent
// thread) and records every status it reports.
class RunningLauncher {
 public:
  RunningLauncher(std::unique_ptr<Launcher> launcher, int stop_fd)
      : launcher_(std::move(launcher)), stop_fd_(stop_fd) {
    launcher_->set_on_change([this](const StackStatus& s) {
      std::lock_guard<std::mutex> lock(mu_);
      history_.push_back(s);
      cv_.notify_all();
    });
    thread_ = std::thread([this] {
      Launcher::Result result = launcher_->Run();
      std::lock_guard<std::mutex> lock(mu_);
      result_ = std::move(result);
      done_ = true;
      cv_.notify_all();
    });
  }
  ~RunningLauncher() {
    if (thread_.joinable()) Stop();
  }

  // Waits until the latest status satisfies `pred`.
  bool WaitFor(const std::function<bool(const StackStatus&)>& pred,
               std::chrono::milliseconds timeout = kGenerous) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return !history_.empty() && pred(history_.back());
    });
  }
  StackStatus Last() {
    std::lock_guard<std::mutex> lock(mu_);
    return history_.empty() ? StackStatus{} : history_.back();
  }
  std::vector<StackStatus> History() {
    std::lock_guard<std::mutex> lock(mu_);
    return history_;
  }
  // Requests a stop (as Ctrl-C would) and waits for Run() to return.
  Launcher::Result Stop() {
    const uint64_t one = 1;
    EXPECT_EQ(::write(stop_fd_, &one, sizeof(one)), 8);
    return Join();
  }
  // Waits for Run() to return by itself.
  Launcher::Result Join() {
    if (thread_.joinable()) thread_.join();
    return result_;
  }

 private:
  std::unique_ptr<Launcher> launcher_;
  const int stop_fd_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<StackStatus> history_;
  Launcher::Result result_;
  bool done_ = false;
  std::thread thread_;
};

class LauncherTest : public ::testing::Test {
 protected:
  LauncherTest() : dir_(MakeTempDir()) {
    stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  }
  ~LauncherTest() override { ::close(stop_fd_); }

  LaunchOptions Options(const std::string& stack_json) {
    const std::string path = dir_ + "/stack.json";
    WriteFile(path, stack_json);
    LaunchOptions options;
    options.stack_path = path;
    options.channels = root_.options();
    options.working_directory = dir_;
    options.base_env = {"PATH=/usr/bin:/bin", "LANG=C"};
    options.kill_timeout = std::chrono::milliseconds(1000);
    options.stop_fd = stop_fd_;
    return options;
  }

  absl::StatusOr<std::unique_ptr<Launcher>> Create(
      LaunchOptions options,
      std::unique_ptr<transport::SchemaRegistry> schemas = DemoTypes()) {
    return Launcher::Create(std::move(options), std::move(schemas), out_, err_);
  }

  std::unique_ptr<RunningLauncher> Start(const std::string& stack_json) {
    return StartWith(Options(stack_json));
  }
  std::unique_ptr<RunningLauncher> StartWith(LaunchOptions options) {
    absl::StatusOr<std::unique_ptr<Launcher>> launcher =
        Create(std::move(options));
    EXPECT_TRUE(launcher.ok()) << launcher.status();
    if (!launcher.ok()) return nullptr;
    return std::make_unique<RunningLauncher>(std::move(*launcher), stop_fd_);
  }

  std::string File(const std::string& name) const { return dir_ + "/" + name; }

  shm::testing::ScopedRoot root_;
  std::string dir_;
  int stop_fd_ = -1;
  std::ostringstream out_;
  std::ostringstream err_;
};

}  // namespace tether::tools::testing

#endif  // TETHER_TESTS_TOOLS_LAUNCHER_TEST_FIXTURE_H_
