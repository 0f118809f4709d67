#include "ros_bridge/ros1msg/typed.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "capnp/message.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "ros_bridge/ros1msg/sensor_msgs.capnp.h"

namespace tether::ros1msg {
namespace {

// Random serialized bytes of `spec`: every field gets random bits (floats
// included, so NaN payloads and -0 are exercised), arrays random lengths.
class RandomMessage {
 public:
  explicit RandomMessage(uint32_t seed) : rng_(seed) {}

  std::vector<uint8_t> Make(const MessageSpec& spec) {
    out_.clear();
    Struct(spec);
    return out_;
  }

 private:
  void Raw(size_t n) {
    for (size_t i = 0; i < n; ++i) out_.push_back(static_cast<uint8_t>(rng_()));
  }
  void U32(uint32_t v) {
    uint8_t b[4];
    std::memcpy(b, &v, 4);
    out_.insert(out_.end(), b, b + 4);
  }
  void One(const Field& f) {
    switch (f.type) {
      case Primitive::kBool: out_.push_back(rng_() % 2); break;
      case Primitive::kString: {
        const uint32_t n = rng_() % 12;
        U32(n);
        for (uint32_t i = 0; i < n; ++i) out_.push_back('a' + rng_() % 26);
        break;
      }
      case Primitive::kMessage: Struct(*f.message); break;
      default: Raw(PrimitiveSize(f.type));
    }
  }
  void Struct(const MessageSpec& spec) {
    for (const Field& f : spec.fields) {
      if (!f.is_array) {
        One(f);
        continue;
      }
      uint32_t n = f.array_length >= 0 ? static_cast<uint32_t>(f.array_length)
                                       : rng_() % 6;
      if (f.array_length < 0) U32(n);
      for (uint32_t i = 0; i < n; ++i) One(f);
    }
  }

  std::mt19937 rng_;
  std::vector<uint8_t> out_;
};

TEST(TypedConversion, EveryCommonTypeRoundTripsBitForBit) {
  for (const CommonType& t : CommonTypes()) {
    for (uint32_t seed = 1; seed <= 20; ++seed) {
      RandomMessage random(seed);
      const std::vector<uint8_t> ros = random.Make(t.parsed->root());
      capnp::MallocMessageBuilder message;
      capnp::DynamicStruct::Builder b =
          message.getRoot<capnp::DynamicStruct>(t.schema);
      ASSERT_TRUE(RosToCapnp(*t.parsed, ros, b).ok()) << t.ros_type;
      std::vector<uint8_t> back;
      absl::Status s = CapnpToRos(*t.parsed, b.asReader(), &back);
      ASSERT_TRUE(s.ok()) << t.ros_type << ": " << s;
      ASSERT_EQ(back, ros) << t.ros_type << " seed " << seed;
    }
  }
}

TEST(TypedConversion, TwistFieldsLandWhereATetherNodeReadsThem) {
  const CommonType* t = FindCommonType("geometry_msgs/Twist");
  ASSERT_NE(t, nullptr);
  std::vector<uint8_t> ros(48);
  const double v[6] = {0.5, 0, 0, 0, 0, -0.25};
  std::memcpy(ros.data(), v, sizeof(v));
  capnp::MallocMessageBuilder message;
  auto root = message.initRoot<geometry_msgs::Twist>();
  ASSERT_TRUE(RosToCapnp(*t->parsed, ros,
                         capnp::toDynamic(root))
                  .ok());
  EXPECT_EQ(root.getLinear().getX(), 0.5);
  EXPECT_EQ(root.getAngular().getZ(), -0.25);
  EXPECT_EQ(FindCommonTypeById(capnp::typeId<geometry_msgs::Twist>()), t);
}

TEST(TypedConversion, FixedSizeArrayOfTheWrongLengthIsAnError) {
  const CommonType* t = FindCommonType("sensor_msgs/Imu");
  ASSERT_NE(t, nullptr);
  capnp::MallocMessageBuilder message;
  auto imu = message.initRoot<sensor_msgs::Imu>();
  imu.initOrientationCovariance(8);
  imu.initAngularVelocityCovariance(9);
  imu.initLinearAccelerationCovariance(9);
  std::vector<uint8_t> out;
  absl::Status s = CapnpToRos(*t->parsed, capnp::toDynamic(imu.asReader()),
                              &out);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("orientation_covariance"), std::string::npos)
      << s;
}

TEST(TypedConversion, ImageDataIsCopiedAsBytes) {
  const CommonType* t = FindCommonType("sensor_msgs/Image");
  capnp::MallocMessageBuilder message;
  auto img = message.initRoot<sensor_msgs::Image>();
  img.setHeight(480);
  img.setWidth(640);
  img.setEncoding("rgb8");
  img.setStep(1920);
  auto data = img.initData(640 * 480 * 3);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  std::vector<uint8_t> ros;
  ASSERT_TRUE(CapnpToRos(*t->parsed, capnp::toDynamic(img.asReader()), &ros)
                  .ok());
  // header (4 + 8 + 4) + height, width + "rgb8" + is_bigendian + step + data
  EXPECT_EQ(ros.size(), 16u + 8 + 8 + 1 + 4 + 4 + data.size());
  capnp::MallocMessageBuilder again;
  auto img2 = again.initRoot<sensor_msgs::Image>();
  ASSERT_TRUE(RosToCapnp(*t->parsed, ros, capnp::toDynamic(img2)).ok());
  EXPECT_EQ(img2.getData(), data.asReader());
  EXPECT_EQ(img2.getEncoding(), "rgb8");
}

TEST(TypedConversion, CamelCaseFollowsCapnpNaming) {
  EXPECT_EQ(CamelCase("frame_id"), "frameId");
  EXPECT_EQ(CamelCase("linear_acceleration_covariance"),
            "linearAccelerationCovariance");
  EXPECT_EQ(CamelCase("x"), "x");
}

}  // namespace
}  // namespace tether::ros1msg
