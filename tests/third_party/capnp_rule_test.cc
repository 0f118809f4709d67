// Proves the capnp_cc_library rule end to end: a schema (importing another)
// compiled by Debian's capnp under Bazel, built in place in a fixed buffer and
// read back with standard stream framing.
#include <cstring>
#include <vector>

#include "capnp/message.h"
#include "capnp/schema.h"
#include "capnp/serialize.h"
#include "gtest/gtest.h"
#include "tests/third_party/capnp_rule_test.capnp.h"

namespace {

TEST(CapnpCcLibrary, GeneratedTypesRoundTripThroughAFixedBuffer) {
  std::vector<capnp::word> buffer(128);
  std::memset(buffer.data(), 0, buffer.size() * sizeof(capnp::word));
  capnp::FlatMessageBuilder builder(kj::arrayPtr(buffer.data(), buffer.size()));
  auto pose = builder.initRoot<Pose>();
  pose.setX(1.5);
  pose.setY(-2.25);
  pose.setTheta(0.125);
  pose.setFrame("odom");
  pose.initStamp().setMonotonicNs(123456789);
  pose.getStamp().setSequence(42);
  auto cov = pose.initCovariance(3);
  cov.set(0, 0.5f);
  cov.set(2, 2.0f);

  kj::Array<capnp::word> flat = capnp::messageToFlatArray(builder);
  capnp::FlatArrayMessageReader reader(flat);
  Pose::Reader read = reader.getRoot<Pose>();
  EXPECT_DOUBLE_EQ(read.getX(), 1.5);
  EXPECT_DOUBLE_EQ(read.getY(), -2.25);
  EXPECT_DOUBLE_EQ(read.getTheta(), 0.125);
  EXPECT_STREQ(read.getFrame().cStr(), "odom");
  EXPECT_EQ(read.getStamp().getMonotonicNs(), 123456789);
  EXPECT_EQ(read.getStamp().getSequence(), 42u);
  ASSERT_EQ(read.getCovariance().size(), 3u);
  EXPECT_FLOAT_EQ(read.getCovariance()[2], 2.0f);
}

TEST(CapnpCcLibrary, SchemaIdsComeFromTheSchemaFile) {
  // The type id is what channels carry to reject a typed endpoint of the
  // wrong type; it must be stable and distinct per struct.
  EXPECT_NE(capnp::typeId<Pose>(), capnp::typeId<Stamp>());
  EXPECT_EQ(capnp::Schema::from<Pose>().getProto().getDisplayName(),
            "tests/third_party/capnp_rule_test.capnp:Pose");
}

}  // namespace
