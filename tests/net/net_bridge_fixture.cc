#include "tests/net/net_bridge_fixture.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/config.capnp.h"

namespace tether::net::testing {

std::string BridgePath() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  if (srcdir == nullptr || workspace == nullptr) return "net/net_bridge";
  return absl::StrCat(srcdir, "/", workspace, "/net/net_bridge");
}

std::string TmpDir() {
  const char* t = std::getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::byte> MakeMessage(uint64_t index, size_t size) {
  // One segment: the stream framing tether channels carry.
  capnp::MallocMessageBuilder message(static_cast<unsigned>(size / 8 + 64));
  auto root = message.initRoot<Sample>();
  root.setStamp(index);
  auto blob = root.initBlob(static_cast<unsigned>(size));
  for (size_t i = 0; i < size; ++i) {
    blob[i] = static_cast<uint8_t>((index * 31 + i * 7) ^ (i >> 8));
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto* b = reinterpret_cast<const std::byte*>(flat.begin());
  return std::vector<std::byte>(b, b + flat.size() * sizeof(capnp::word));
}

uint64_t StampOf(std::span<const std::byte> bytes) {
  std::vector<capnp::word> words((bytes.size() + 7) / 8);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(kj::arrayPtr(words.data(), words.size()));
  return reader.getRoot<Sample>().getStamp();
}

Collector::Collector(std::unique_ptr<transport::ChannelHandle> channel)
    : channel_(std::move(channel)) {
  auto sub = transport::RawSubscriber::Create(channel_.get());
  EXPECT_TRUE(sub.ok()) << sub.status();
  sub_ = std::move(*sub);
  thread_ = std::thread([this] { Loop(); });
}

Collector::~Collector() {
  done_ = true;
  thread_.join();
}

size_t Collector::count() {
  std::lock_guard lock(mu_);
  return received_.size();
}

bool Collector::Has(uint64_t stamp) {
  std::lock_guard lock(mu_);
  return stamps_.contains(stamp);
}

std::vector<std::pair<uint64_t, std::vector<std::byte>>> Collector::Received() {
  std::lock_guard lock(mu_);
  return received_;
}

void Collector::Loop() {
  while (!done_) {
    transport::RawMessage m;
    const transport::ReceiveStatus s = sub_->Next(&m);
    if (s != transport::ReceiveStatus::kOk) {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      continue;
    }
    missed_ += m.context.missed;
    std::vector<std::byte> bytes(m.bytes.begin(), m.bytes.end());
    const uint64_t stamp = StampOf(bytes);
    sub_->Release();
    std::lock_guard lock(mu_);
    stamps_.insert(stamp);
    received_.emplace_back(stamp, std::move(bytes));
  }
}

std::string SampleType() { return "tests/transport/framing_test.capnp:Sample"; }
std::string ScalarsType() {
  return "tests/transport/framing_test.capnp:Scalars";
}

void NetBridgeTest::SetUp() {
  absl::StatusOr<std::unique_ptr<TwoHosts>> h = TwoHosts::Create();
  if (!h.ok()) GTEST_SKIP() << h.status();
  hosts_ = std::move(*h);
  for (int i = 0; i < 2; ++i) {
    options_[i] = root_.options();
    options_[i].instance = i == 0 ? "a" : "b";
  }
  schemas_.Register<Sample>();
  schemas_.Register<Scalars>();
}

void NetBridgeTest::TearDown() {
  if (HasFailure() && hosts_ != nullptr) {
    for (const std::string& log : logs_) {
      std::cerr << "--- " << log << " ---\n" << ReadFile(log);
    }
  }
  hosts_.reset();  // stops the bridges, deletes the namespaces
}

std::unique_ptr<transport::ChannelHandle> NetBridgeTest::MakeChannel(
    int host, const std::string& name, const std::string& type,
    uint32_t depth, uint32_t publishers) {
  capnp::MallocMessageBuilder message;
  auto c = message.initRoot<transport::config::Channel>();
  c.setName(name);
  c.setType(type);
  c.setMaxSize(kMaxSize);
  c.setFrequencyHz(1000);
  c.setQueueDepth(depth);
  c.setMaxPublishers(publishers);
  c.setMaxPinned(4);
  auto h = transport::ChannelHandle::Create(options_[host], c.asReader(),
                                            schemas_);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? std::move(*h) : nullptr;
}

void NetBridgeTest::StartBridge(int host,
                                const std::vector<ChannelSpec>& channels,
                                const std::string& named, bool loopback) {
  const std::string name = !named.empty() ? named : host == 0 ? "a" : "b";
  std::string list;
  for (const ChannelSpec& c : channels) {
    absl::StrAppend(&list, list.empty() ? "" : ", ", "{\"name\": \"",
                    c.name, "\", \"direction\": \"", c.direction, "\"");
    if (!c.reliability.empty()) {
      absl::StrAppend(&list, ", \"reliability\": \"", c.reliability, "\"");
    }
    if (c.history_depth != 0) {
      absl::StrAppend(&list, ", \"historyDepth\": ", c.history_depth);
    }
    list += "}";
  }
  const std::string link =
      loopback ? std::string("\"interface\": \"lo\", ")
               : absl::StrCat("\"interface\": \"", hosts_->interface(host),
                              "\", \"peers\": [\"", hosts_->address(1 - host),
                              "\"], ");
  const std::string config = absl::StrCat(
      "{\"name\": \"", name, "\", \"domain\": 7, \"partition\": \"test\", ",
      link, "\"leaseSeconds\": 1, ",
      "\"announceSeconds\": 0.2, \"channels\": [", list, "]}");
  const std::string path =
      absl::StrCat(TmpDir(), "/bridge-", name, "-", ::getpid(), ".json");
  std::ofstream(path) << config;
  const std::string log =
      absl::StrCat(TmpDir(), "/bridge-", name, "-", ::getpid(), ".log");
  logs_.push_back(log);
  pid_[host] = hosts_->Spawn(
      host,
      {BridgePath(), "--config", path, "--root", root_.root(), "--instance",
       options_[host].instance, "--status-interval", "0.1",
       "--print-interval", "0"},
      log);
  ASSERT_GT(pid_[host], 0);
}

std::optional<ChannelLine> NetBridgeTest::Status(int host,
                                                 const std::string& channel,
                                                 status::Direction direction) {
  return ReadChannelStatus(options_[host], host == 0 ? "a" : "b", channel,
                           direction);
}

bool NetBridgeTest::Linked(const std::string& channel) {
  auto out = Status(0, channel, status::Direction::OUT);
  auto in = Status(1, channel, status::Direction::IN);
  return out && in && out->peers > 0 && in->peers > 0 &&
         in->state == status::State::ACTIVE;
}

std::unique_ptr<transport::ChannelHandle> NetBridgeTest::Open(
    int host, const std::string& name) {
  auto h = transport::ChannelHandle::Open(options_[host], name);
  return h.ok() ? std::move(*h) : nullptr;
}

void NetBridgeTest::Publish(transport::RawPublisher& pub, uint64_t from,
                            uint64_t to,
                            std::map<uint64_t, std::vector<std::byte>>& sent,
                            std::chrono::microseconds gap) {
  for (uint64_t i = from; i < to; ++i) {
    const size_t size = i % 10 == 3 ? 64 * 1024 : (i % 2 ? 1024 : 64);
    std::vector<std::byte> m = MakeMessage(i, size);
    ASSERT_EQ(pub.Publish(m).status, transport::PublishStatus::kOk);
    sent[i] = std::move(m);
    std::this_thread::sleep_for(gap);
  }
}

bool NetBridgeTest::KillBridge(int host) {
  if (::kill(pid_[host], SIGKILL) != 0) return false;
  return WaitFor([&] { return hosts_->Exited(pid_[host]).has_value(); },
                 kLong);
}

bool NetBridgeTest::PublishUntilMoreThan(
    transport::RawPublisher& pub, uint64_t* next,
    std::map<uint64_t, std::vector<std::byte>>& sent, Collector& got,
    size_t count) {
  return WaitFor(
      [&] {
        Publish(pub, *next, *next + 1, sent);
        ++*next;
        return got.count() > count;
      },
      kLong);
}

std::unique_ptr<transport::ChannelHandle> NetBridgeTest::ForwardScan(
    std::unique_ptr<transport::ChannelHandle>* a, const ChannelSpec& out,
    uint32_t depth, const std::function<void()>& before_bridges) {
  *a = MakeChannel(0, "/robot/scan", SampleType(), depth);
  if (*a == nullptr) return nullptr;
  if (before_bridges) before_bridges();
  StartBridge(1, {{"/robot/scan", "in"}});
  StartBridge(0, {out});
  std::unique_ptr<transport::ChannelHandle> b;
  EXPECT_TRUE(WaitFor(
      [&] { return (b = Open(1, "/robot/scan")) != nullptr; }, kLong));
  EXPECT_TRUE(WaitFor([&] { return Linked("/robot/scan"); }, kLong));
  return b;
}

}  // namespace tether::net::testing
