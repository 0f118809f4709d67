// Test helpers for log/: channels made the way a stack config makes them,
// messages of every shape (framing_test.capnp's Scalars and Sample: ints,
// floats, text, lists, nested structs, data blobs, recursion), and waiting
// for a logger to have seen what was sent.
#ifndef TETHER_TESTS_LOG_LOG_TEST_UTIL_H_
#define TETHER_TESTS_LOG_LOG_TEST_UTIL_H_

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "capnp/message.h"
#include "capnp/serialize.h"
#include "gtest/gtest.h"
#include "log/logger.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::log::testing {

inline constexpr char kScalarsType[] =
    "tests/transport/framing_test.capnp:Scalars";
inline constexpr char kSampleType[] =
    "tests/transport/framing_test.capnp:Sample";

inline void RegisterTestTypes(transport::SchemaRegistry& schemas) {
  schemas.Register<::Scalars>();
  schemas.Register<::Sample>();
}

struct ChannelShape {
  uint32_t max_size = 4096;
  uint32_t depth = 64;
  uint32_t publishers = 2;
  uint32_t pinned = 4;
  double frequency_hz = 1000;
};

// A channel entry as a validated stack config would have it.
inline std::unique_ptr<transport::ChannelHandle> MakeChannel(
    const shm::ChannelOptions& options,
    const transport::SchemaRegistry& schemas, const std::string& name,
    const std::string& type, const ChannelShape& shape = {}) {
  capnp::MallocMessageBuilder m;
  auto c = m.initRoot<transport::config::Channel>();
  c.setName(name);
  c.setType(type);
  c.setMaxSize(shape.max_size);
  c.setQueueDepth(shape.depth);
  c.setMaxPublishers(shape.publishers);
  c.setMaxPinned(shape.pinned);
  c.setFrequencyHz(shape.frequency_hz);
  auto h = transport::ChannelHandle::Create(options, c.asReader(), schemas);
  EXPECT_TRUE(h.ok()) << h.status();
  return h.ok() ? std::move(*h) : nullptr;
}

// The i-th test message of a shape that varies with i: Sample with text,
// lists, nested structs, a blob of i*37 % 700 bytes, and (every 5th) a
// child; or Scalars. Framed, whole words.
inline std::vector<std::byte> SampleMessage(int i) {
  capnp::MallocMessageBuilder m;
  auto s = m.initRoot<::Sample>();
  s.setStamp(1000u + i);
  s.setLabel("sample " + std::to_string(i));
  auto values = s.initValues(i % 9);
  for (unsigned k = 0; k < values.size(); ++k) values.set(k, 0.25f * k + i);
  auto joints = s.initJoints(i % 3);
  for (unsigned k = 0; k < joints.size(); ++k) {
    joints[k].setName("joint" + std::to_string(k));
    joints[k].setPosition(i * 0.001 + k);
    joints[k].setVelocity(-k * 1.5);
  }
  s.initInner().setName("inner");
  std::vector<kj::byte> blob((i * 37) % 700);
  for (size_t k = 0; k < blob.size(); ++k) blob[k] = static_cast<kj::byte>(k ^ i);
  s.setBlob(kj::arrayPtr(blob.data(), blob.size()));
  auto names = s.initNames(i % 4);
  for (unsigned k = 0; k < names.size(); ++k) names.set(k, "n");
  if (i % 5 == 0) s.initChild().setLabel("child");
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(m);
  std::vector<std::byte> out(flat.size() * 8);
  std::memcpy(out.data(), flat.begin(), out.size());
  return out;
}

inline std::vector<std::byte> ScalarsMessage(int i) {
  capnp::MallocMessageBuilder m;
  auto s = m.initRoot<::Scalars>();
  s.setI64(-1000 * i);
  s.setU8(static_cast<uint8_t>(i));
  s.setF64(0.5 * i);
  s.setFlag(i % 2 == 0);
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(m);
  std::vector<std::byte> out(flat.size() * 8);
  std::memcpy(out.data(), flat.begin(), out.size());
  return out;
}

// Publishes `framed` (aligned copy) and expects success.
inline void PublishBytes(transport::RawPublisher& pub,
                         const std::vector<std::byte>& framed,
                         const transport::SendTimes* times = nullptr) {
  std::vector<uint64_t> words((framed.size() + 7) / 8);
  std::memcpy(words.data(), framed.data(), framed.size());
  const transport::PublishResult r = pub.Publish(
      std::span<const std::byte>(reinterpret_cast<const std::byte*>(words.data()),
                                 framed.size()),
      times);
  EXPECT_EQ(r.status, transport::PublishStatus::kOk)
      << transport::ToString(r.status);
}

// `framed` with its root pointer (bytes 8-15, right after a one-segment
// table) overwritten with 0xFFFFFFFFFFFFFFFC: a struct far out of bounds.
// The framing stays valid; every typed reader must refuse it.
inline std::vector<std::byte> WithCorruptRoot(std::vector<std::byte> framed) {
  const uint64_t corrupt_root = 0xFFFFFFFFFFFFFFFCull;
  EXPECT_GE(framed.size(), 16u);
  std::memcpy(framed.data() + 8, &corrupt_root, sizeof(corrupt_root));
  return framed;
}

// Sends `framed` as it is, unchecked (Loan() and Send(), as any process
// with write access to the channel can), unlike Publish().
inline void SendUnchecked(transport::RawPublisher& pub,
                          const std::vector<std::byte>& framed) {
  std::span<std::byte> slot = pub.Loan();
  ASSERT_GE(slot.size(), framed.size());
  std::memcpy(slot.data(), framed.data(), framed.size());
  ASSERT_EQ(pub.Send(framed.size()).status, transport::PublishStatus::kOk);
}

// Polls `done` every millisecond for up to `seconds`.
inline bool WaitFor(const std::function<bool()>& done, double seconds = 10) {
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// A logger of the channels under `channels` into `path`, overwriting it:
// the options every test starts from.
inline LoggerOptions LogTo(const shm::ChannelOptions& channels,
                           const std::string& path) {
  LoggerOptions o;
  o.channels = channels;
  o.path = path;
  o.overwrite = true;
  return o;
}

inline std::string TempFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

}  // namespace tether::log::testing

#endif  // TETHER_TESTS_LOG_LOG_TEST_UTIL_H_
