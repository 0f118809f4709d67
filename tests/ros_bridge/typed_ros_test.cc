// The typed twins against ROS itself: the MD5 sums and definitions in
// ros1msg's table are ROS's, and messages serialized by ROS (compiled
// roscpp types) convert to Cap'n Proto and back to the same bytes.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "capnp/message.h"
#include "ros_bridge/ros1msg/sensor_msgs.capnp.h"
#include "ros_bridge/ros1msg/typed.h"
#include "tests/ros_bridge/ros_samples.h"

namespace tether::ros1msg {
namespace {

using ros_bridge::testing::RosSample;
using ros_bridge::testing::RosSamples;

TEST(TypedTwinsAgainstRos, TableHasRosMd5SumsAndDefinitions) {
  for (const RosSample& s : RosSamples()) {
    const CommonType* t = FindCommonType(s.type);
    ASSERT_NE(t, nullptr) << s.type;
    EXPECT_EQ(t->md5sum, s.md5sum) << s.type;
    EXPECT_EQ(t->definition, s.definition) << s.type;
  }
}

TEST(TypedTwinsAgainstRos, RosSerializedMessagesRoundTripBitForBit) {
  for (const RosSample& s : RosSamples()) {
    const CommonType* t = FindCommonType(s.type);
    ASSERT_NE(t, nullptr) << s.type;
    capnp::MallocMessageBuilder message;
    auto root = message.getRoot<capnp::DynamicStruct>(t->schema);
    ASSERT_TRUE(RosToCapnp(*t->parsed, s.bytes, root).ok()) << s.type;
    std::vector<uint8_t> back;
    ASSERT_TRUE(CapnpToRos(*t->parsed, root.asReader(), &back).ok()) << s.type;
    EXPECT_EQ(back, s.bytes) << s.type;
  }
}

TEST(TypedTwinsAgainstRos, JointStateFromRosReadsAsATypedMessage) {
  for (const RosSample& s : RosSamples()) {
    if (s.type != "sensor_msgs/JointState") continue;
    capnp::MallocMessageBuilder message;
    auto root = message.initRoot<sensor_msgs::JointState>();
    ASSERT_TRUE(RosToCapnp(*FindCommonType(s.type)->parsed, s.bytes,
                           capnp::toDynamic(root))
                    .ok());
    auto r = root.asReader();
    EXPECT_EQ(r.getHeader().getFrameId(), "base");
    EXPECT_EQ(r.getHeader().getStamp().getSec(), 1700000000u);
    EXPECT_EQ(r.getHeader().getStamp().getNsec(), 123u);
    ASSERT_EQ(r.getName().size(), 2u);
    EXPECT_EQ(r.getName()[1], "right_wheel");
    EXPECT_EQ(r.getPosition()[1], -2.5);
    EXPECT_TRUE(std::isnan(r.getVelocity()[0]));
    EXPECT_TRUE(std::signbit(r.getVelocity()[1]));
    return;
  }
  FAIL() << "no JointState sample";
}

}  // namespace
}  // namespace tether::ros1msg
