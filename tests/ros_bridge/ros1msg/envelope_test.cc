#include "ros_bridge/ros1msg/envelope.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tools/package_decoder.h"

namespace tether::ros1msg {
namespace {

TEST(Envelope, BuildsInASlotAndDecodesToJsonWithoutRos) {
  std::vector<uint64_t> slot(512, 0);
  std::span<std::byte> bytes(reinterpret_cast<std::byte*>(slot.data()),
                             slot.size() * 8);
  EnvelopeHeader h;
  h.type = "acme_msgs/Blob";  // a type no package defines
  h.md5sum = "0123456789abcdef0123456789abcdef";
  h.definition = "string name\nuint8[] blob\n";
  h.latching = true;
  h.callerid = "/talker";
  h.topic = "/blob";
  h.receive_time_ns = 1700000000123456789;
  h.origin_graph = "127.0.0.1:11911";
  h.origin_bridge = "/tether_bridge";
  const uint8_t ros[] = {2, 0, 0, 0, 'h', 'i', 3, 0, 0, 0, 0, 0xff, 7};
  transport::BuildArena arena(bytes.size());
  transport::FinishResult r = BuildEnvelope(
      &arena, bytes, "/blob", h, sizeof(ros),
      [&](std::span<uint8_t> out) { std::memcpy(out.data(), ros, sizeof(ros)); });
  ASSERT_TRUE(r.ok()) << r.ErrorMessage();

  EnvelopeView v;
  const std::span<const std::byte> framed = bytes.subspan(r.offset, r.size);
  ASSERT_TRUE(ReadEnvelope(framed, &v).ok());
  EXPECT_EQ(v.header.type, "acme_msgs/Blob");
  EXPECT_TRUE(v.header.latching);
  EXPECT_EQ(v.header.origin_graph, "127.0.0.1:11911");
  ASSERT_EQ(v.data.size(), sizeof(ros));
  EXPECT_EQ(std::memcmp(v.data.data(), ros, sizeof(ros)), 0);

  EnvelopeDecoder decoder;
  auto json = decoder.ToJson(framed);
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_EQ(*json,
            "{\"type\":\"acme_msgs/Blob\",\"md5sum\":"
            "\"0123456789abcdef0123456789abcdef\",\"topic\":\"/blob\","
            "\"callerid\":\"/talker\",\"latching\":true,"
            "\"receive_time_ns\":1700000000123456789,"
            "\"origin\":{\"graph\":\"127.0.0.1:11911\",\"bridge\":"
            "\"/tether_bridge\"},\"message\":{\"name\":\"hi\",\"blob\":[0,255,"
            "7]}}");
}

// tools/package_decoder.cc names this id (the CLI may not link ros1msg to
// ask): a change of envelope.capnp that changes it must change both.
TEST(Envelope, TypeIdIsTheOneTheCliRecognises) {
  const tools::PackageDecoder* d = tools::PackageDecoderFor(EnvelopeTypeId());
  ASSERT_NE(d, nullptr) << "tools/package_decoder.cc does not know id 0x"
                        << std::hex << EnvelopeTypeId();
  EXPECT_EQ(d->path, "ros_bridge/ros_json");
}

TEST(Envelope, TooLargeForTheSlotIsOverflowNotCorruption) {
  std::vector<uint64_t> slot(16, 0);
  std::span<std::byte> bytes(reinterpret_cast<std::byte*>(slot.data()),
                             slot.size() * 8);
  EnvelopeHeader h;
  h.type = "std_msgs/String";
  bool filled = false;
  transport::BuildArena arena(bytes.size());
  transport::FinishResult r = BuildEnvelope(
      &arena, bytes, "/x", h, 4096, [&](std::span<uint8_t>) { filled = true; });
  EXPECT_EQ(r.status, transport::FramingStatus::kOverflow);
  EXPECT_FALSE(filled);
}

TEST(Envelope, GarbageIsRejected) {
  std::vector<uint64_t> junk(8, 0xdeadbeefdeadbeefull);
  EnvelopeView v;
  EXPECT_FALSE(ReadEnvelope({reinterpret_cast<const std::byte*>(junk.data()),
                             junk.size() * 8},
                            &v)
                   .ok());
}

}  // namespace
}  // namespace tether::ros1msg
