// Test helpers for the real-time replay tests (realtime_replay*_test): a
// recorded source log with what a reader of it saw (the RealtimeReplayTest
// fixture records it once per suite), reading a replayed channel back, and
// MCAP logs written by hand as another writer (or damage) may leave one.
#ifndef TETHER_TESTS_LOG_REPLAY_TEST_UTIL_H_
#define TETHER_TESTS_LOG_REPLAY_TEST_UTIL_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/logger.h"
#include "log/mcap_writer.h"
#include "log/realtime_replay.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::log::testing {

struct Sent {
  std::vector<std::byte> data;
  transport::MessageContext context;
};

// Records `count` Sample messages on /a and Scalars on /b, 1 ms apart, and
// returns what a reader of /a saw.
inline std::vector<Sent> MakeLog(const std::string& path, int count) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(root.options(), schemas, "/a", kSampleType,
                       {.max_size = 4096, .depth = 512, .publishers = 1});
  // As deep as /a: the logger drains both every 2 ms, and a loaded machine
  // can starve it for longer than 64 sends.
  auto b = MakeChannel(root.options(), schemas, "/b", kScalarsType,
                       {.max_size = 128, .depth = 512});
  LoggerOptions o = LogTo(root.options(), path);
  o.period = std::chrono::milliseconds(2);
  auto logger = Logger::Start(o);
  EXPECT_TRUE(logger.ok());
  auto pa = transport::RawPublisher::Create(a.get());
  auto pb = transport::RawPublisher::Create(b.get());
  auto watch = transport::RawSubscriber::Create(a.get());
  std::vector<Sent> sent;
  for (int i = 0; i < count; ++i) {
    PublishBytes(**pa, SampleMessage(i));
    PublishBytes(**pb, ScalarsMessage(i));
    transport::RawMessage m;
    EXPECT_EQ((*watch)->Next(&m), transport::ReceiveStatus::kOk);
    sent.push_back({std::vector<std::byte>(m.bytes.begin(), m.bytes.end()), m.context});
    (*watch)->Release();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 2u * count; }));
  EXPECT_TRUE((*logger)->Stop().ok());
  return sent;
}

class RealtimeReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = new std::string(TempFile("replay-source.mcap"));
    sent_ = new std::vector<Sent>(MakeLog(*path_, 100));
  }
  static void TearDownTestSuite() {
    delete path_;
    delete sent_;
  }
  RealtimeReplayOptions Options() {
    RealtimeReplayOptions o;
    o.channels = root_.options();
    o.rate = 20;
    return o;
  }
  static std::string* path_;
  static std::vector<Sent>* sent_;
  shm::testing::ScopedRoot root_;
};
inline std::string* RealtimeReplayTest::path_ = nullptr;
inline std::vector<Sent>* RealtimeReplayTest::sent_ = nullptr;

// Reads everything on `name` from the oldest message (unpinned copies).
inline std::vector<Sent> Drain(const shm::ChannelOptions& options,
                               const std::string& name) {
  std::vector<Sent> out;
  auto h = transport::ChannelHandle::Open(options, name);
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return out;
  auto sub = transport::RawSubscriber::Create(h->get(), {.pin = false, .from_oldest = true});
  transport::RawMessage m;
  while ((*sub)->Next(&m) == transport::ReceiveStatus::kOk) {
    out.push_back({std::vector<std::byte>(m.bytes.begin(), m.bytes.end()), m.context});
  }
  return out;
}

// Writes an MCAP log by hand, as another writer (or damage) may leave one:
// `channels` (name, metadata), all of `d`'s schema, and one Scalars message
// for each entry of `order` (an index into `channels`), 1 us apart or at
// `times` (ns, one per entry), in chunks of `chunk_size` bytes.
inline void WriteLogByHand(
    const std::string& path, const ChannelDescription& d,
    const std::vector<std::pair<std::string, mcap::KeyValueMap>>& channels,
    const std::vector<size_t>& order, const std::vector<uint64_t>& times = {},
    uint64_t chunk_size = 1 << 20) {
  McapWriterOptions wo;
  wo.overwrite = true;
  wo.chunk_size = chunk_size;
  auto w = McapWriter::Create(path, wo);
  ASSERT_TRUE(w.ok()) << w.status();
  auto schema = (*w)->AddSchema(d.type_name, "capnproto", d.schema);
  ASSERT_TRUE(schema.ok());
  std::vector<uint16_t> ids;
  for (const auto& [name, meta] : channels) {
    auto id = (*w)->AddChannel(*schema, name, "capnproto", meta);
    ASSERT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  const std::vector<std::byte> m = ScalarsMessage(1);
  for (size_t i = 0; i < order.size(); ++i) {
    const uint64_t t = times.empty() ? 1000 * (i + 1) : times[i];
    ASSERT_TRUE((*w)->WriteMessage({ids[order[i]], 0, t, t, m}, {}).ok());
  }
  ASSERT_TRUE((*w)->Close().ok());
}

// WriteLogByHand of two Scalars channels with tether's metadata: /a three
// times, then /b, at `times` (four), in chunks of `chunk_size` bytes.
inline void WriteABLog(const std::string& path,
                       const std::vector<uint64_t>& times,
                       uint64_t chunk_size = 1 << 20) {
  shm::testing::ScopedRoot source;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(source.options(), schemas, "/a", kScalarsType);
  auto b = MakeChannel(source.options(), schemas, "/b", kScalarsType);
  const ChannelDescription da = DescribeChannel(*a);
  WriteLogByHand(path, da,
                 {{"/a", ChannelMetadata(da)},
                  {"/b", ChannelMetadata(DescribeChannel(*b))}},
                 {0, 0, 0, 1}, times, chunk_size);
}

}  // namespace tether::log::testing

#endif  // TETHER_TESTS_LOG_REPLAY_TEST_UTIL_H_
