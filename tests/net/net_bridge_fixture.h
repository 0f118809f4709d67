// Test helper: the fixture of the net bridge tests that run two hosts
// (tests/net/two_hosts.h), one real net_bridge process in each, pinned to
// its veth end with unicast discovery, so DDS traffic crosses only that
// veth. Each host's tether channels are their own instance under one
// ScopedRoot (unique per test, so test binaries run in parallel never
// share channels); tests publish into host a's instance and subscribe in
// host b's. Also a collector of one channel's messages and the framed
// Sample messages the tests send. Every wait is bounded.
#ifndef TETHER_TESTS_NET_NET_BRIDGE_FIXTURE_H_
#define TETHER_TESTS_NET_NET_BRIDGE_FIXTURE_H_

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "net/bridge_status.capnp.h"
#include "shm/channel.h"
#include "tests/net/two_hosts.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::net::testing {

inline constexpr std::chrono::milliseconds kLong{20000};
inline constexpr uint32_t kMaxSize = 70 * 1024;

// The net_bridge binary in the test's runfiles.
std::string BridgePath();
// $TEST_TMPDIR, or /tmp.
std::string TmpDir();
// The whole file at `path` ("" if it cannot be read).
std::string ReadFile(const std::string& path);

// A framed Sample: stamp = index, a blob of `size` bytes derived from it
// (00 and ff included), one segment.
std::vector<std::byte> MakeMessage(uint64_t index, size_t size);
// The stamp of a framed Sample.
uint64_t StampOf(std::span<const std::byte> bytes);

// Collects every message of one channel on its own thread.
class Collector {
 public:
  explicit Collector(std::unique_ptr<transport::ChannelHandle> channel);
  ~Collector();
  size_t count();
  bool Has(uint64_t stamp);
  // (stamp, bytes) in arrival order.
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> Received();
  uint64_t missed() const { return missed_; }

 private:
  void Loop();

  std::unique_ptr<transport::ChannelHandle> channel_;
  std::unique_ptr<transport::RawSubscriber> sub_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> missed_{0};
  std::mutex mu_;
  std::vector<std::pair<uint64_t, std::vector<std::byte>>> received_;
  std::set<uint64_t> stamps_;
  std::thread thread_;
};

std::string SampleType();
std::string ScalarsType();

struct ChannelSpec {
  std::string name;
  std::string direction;    // "out" / "in"
  std::string reliability;  // "" = default
  uint32_t history_depth = 0;
};

// Two hosts (skipped when they cannot be made, e.g. not root), the
// instances "a" and "b" of one ScopedRoot, and the bridges a test starts.
// TearDown prints the bridges' logs if the test failed, then stops them
// and deletes the namespaces.
class NetBridgeTest : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;

  // Creates `name` in host `host`'s instance.
  std::unique_ptr<transport::ChannelHandle> MakeChannel(
      int host, const std::string& name, const std::string& type,
      uint32_t depth = 1024, uint32_t publishers = 2);

  // Starts the bridge of `host` ("a" or "b", or `named`) with these
  // channels; `loopback`: on the host's lo alone, no peers (bridges of one
  // host find each other).
  void StartBridge(int host, const std::vector<ChannelSpec>& channels,
                   const std::string& named = "", bool loopback = false);

  std::optional<ChannelLine> Status(int host, const std::string& channel,
                                    status::Direction direction);

  // Both ends of `channel` (a out -> b in) matched.
  bool Linked(const std::string& channel);

  std::unique_ptr<transport::ChannelHandle> Open(int host,
                                                 const std::string& name);

  // Publishes messages [from, to) on `pub`, one every `gap`; returns what
  // was sent by stamp.
  void Publish(transport::RawPublisher& pub, uint64_t from, uint64_t to,
               std::map<uint64_t, std::vector<std::byte>>& sent,
               std::chrono::microseconds gap = std::chrono::microseconds(1000));

  // SIGKILLs host `host`'s bridge (no chance to say anything) and waits
  // until it is gone. False if it does not exit within kLong.
  bool KillBridge(int host);

  // Publishes one message at a time, from *next on, until `got` holds more
  // than `count` (after a link or a bridge came up, the first messages may
  // not cross). False if that takes kLong.
  bool PublishUntilMoreThan(transport::RawPublisher& pub, uint64_t* next,
                            std::map<uint64_t, std::vector<std::byte>>& sent,
                            Collector& got, size_t count);

  // Host a forwards /robot/scan (made here, as `out` says) to host b: b's
  // copy once both bridges are linked, or null (a test failure).
  std::unique_ptr<transport::ChannelHandle> ForwardScan(
      std::unique_ptr<transport::ChannelHandle>* a, const ChannelSpec& out,
      uint32_t depth = 1024,
      const std::function<void()>& before_bridges = nullptr);

  shm::testing::ScopedRoot root_;
  shm::ChannelOptions options_[2];
  transport::SchemaRegistry schemas_;
  std::unique_ptr<TwoHosts> hosts_;
  pid_t pid_[2] = {0, 0};
  std::vector<std::string> logs_;
};

}  // namespace tether::net::testing

#endif  // TETHER_TESTS_NET_NET_BRIDGE_FIXTURE_H_
