// SchemaRegistry::AddCodeGeneratorRequest on schema blobs from outside (a
// channel's metadata, a log, a remote bridge): a valid blob loads; blobs
// that Cap'n Proto 0.9.2's SchemaLoader would accept and then misuse are
// refused with an error naming the field.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "capnp/message.h"
#include "capnp/schema.capnp.h"
#include "capnp/serialize.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/schema_registry.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;

// Scalars' blob as a channel carries it, edited by `edit`.
std::vector<std::byte> ScalarsBlob(
    const std::function<void(capnp::schema::Node::Builder)>& edit) {
  SchemaRegistry source;
  source.Register<::Scalars>();
  auto blob = source.CodeGeneratorRequestFor(capnp::typeId<::Scalars>());
  EXPECT_TRUE(blob.ok()) << blob.status();
  kj::ArrayPtr<const capnp::word> words(
      reinterpret_cast<const capnp::word*>(blob->data()),
      blob->size() / sizeof(capnp::word));
  capnp::FlatArrayMessageReader reader(words);
  capnp::MallocMessageBuilder copy;
  copy.setRoot(reader.getRoot<capnp::schema::CodeGeneratorRequest>());
  for (auto node :
       copy.getRoot<capnp::schema::CodeGeneratorRequest>().getNodes()) {
    if (node.getId() == capnp::typeId<::Scalars>()) edit(node);
  }
  kj::Array<capnp::word> out = capnp::messageToFlatArray(copy);
  const auto bytes = out.asBytes();
  return {reinterpret_cast<const std::byte*>(bytes.begin()),
          reinterpret_cast<const std::byte*>(bytes.end())};
}

TEST(SchemaRegistry, ChannelBlobLoadsItsType) {
  const std::vector<std::byte> blob = ScalarsBlob([](auto) {});
  SchemaRegistry r;
  ASSERT_TRUE(r.AddCodeGeneratorRequest(blob, capnp::typeId<::Scalars>()).ok());
  EXPECT_TRUE(r.Find(capnp::typeId<::Scalars>()).has_value());
}

TEST(SchemaRegistry, FieldOffsetThatOverflowsThirtyTwoBitsIsRefused) {
  // 64 bits x (0x4000000 + 1) wraps to 64 in 32-bit arithmetic, which
  // Cap'n Proto 0.9.2's own check lets through.
  const std::vector<std::byte> blob =
      ScalarsBlob([](capnp::schema::Node::Builder node) {
        node.getStruct().getFields()[0].getSlot().setOffset(0x4000000);
      });
  SchemaRegistry r;
  const absl::Status s =
      r.AddCodeGeneratorRequest(blob, capnp::typeId<::Scalars>());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("field i64"));
  EXPECT_THAT(s.message(), HasSubstr("outside its struct"));
  EXPECT_FALSE(r.Find(capnp::typeId<::Scalars>()).has_value());
}

TEST(SchemaRegistry, UnionCountThatDisagreesWithTheFieldsIsRefused) {
  const std::vector<std::byte> blob =
      ScalarsBlob([](capnp::schema::Node::Builder node) {
        node.getStruct().setDiscriminantCount(3);
      });
  SchemaRegistry r;
  const absl::Status s =
      r.AddCodeGeneratorRequest(blob, capnp::typeId<::Scalars>());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("0 union fields but says 3"));
}

}  // namespace
}  // namespace tether::transport
