// ros_bridge/ros1msg: the common ROS types' MD5 sums and full definitions,
// exactly as ROS 1 Noetic (Debian 12: std_msgs 0.5.13, common_msgs 1.13.1)
// reports them (ros::message_traits); tests/ros_bridge checks them against
// the installed ROS. Data, not code: kept apart from typed.cc.
#include "ros_bridge/ros1msg/common_types.h"

#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "ros_bridge/ros1msg/sensor_msgs.capnp.h"
#include "ros_bridge/ros1msg/std_msgs.capnp.h"

namespace tether::ros1msg::internal {

std::span<const CommonTypeText> CommonTypeTexts() {
  static const CommonTypeText kTypes[] = {
      {"std_msgs/Bool", "8b94c1b53db61fb6aed406028ad6332a",
       capnp::Schema::from<std_msgs::BoolMsg>(),
       "bool data\n"},
      {"std_msgs/Int8", "27ffa0c9c4b8fb8492252bcad9e5c57b",
       capnp::Schema::from<std_msgs::Int8Msg>(),
       "int8 data\n"},
      {"std_msgs/UInt8", "7c8164229e7d2c17eb95e9231617fdee",
       capnp::Schema::from<std_msgs::UInt8Msg>(),
       "uint8 data\n"},
      {"std_msgs/Int16", "8524586e34fbd7cb1c08c5f5f1ca0e57",
       capnp::Schema::from<std_msgs::Int16Msg>(),
       "int16 data\n"},
      {"std_msgs/UInt16", "1df79edf208b629fe6b81923a544552d",
       capnp::Schema::from<std_msgs::UInt16Msg>(),
       "uint16 data\n"},
      {"std_msgs/Int32", "da5909fbe378aeaf85e547e830cc1bb7",
       capnp::Schema::from<std_msgs::Int32Msg>(),
       "int32 data\n"},
      {"std_msgs/UInt32", "304a39449588c7f8ce2df6e8001c5fce",
       capnp::Schema::from<std_msgs::UInt32Msg>(),
       "uint32 data\n"},
      {"std_msgs/Int64", "34add168574510e6e17f5d23ecc077ef",
       capnp::Schema::from<std_msgs::Int64Msg>(),
       "int64 data\n"},
      {"std_msgs/UInt64", "1b2a79973e8bf53d7b53acb71299cb57",
       capnp::Schema::from<std_msgs::UInt64Msg>(),
       "uint64 data\n"},
      {"std_msgs/Float32", "73fcbf46b49191e672908e50842a83d4",
       capnp::Schema::from<std_msgs::Float32Msg>(),
       "float32 data\n"},
      {"std_msgs/Float64", "fdb28210bfa9d7c91146260178d9a584",
       capnp::Schema::from<std_msgs::Float64Msg>(),
       "float64 data\n"},
      {"std_msgs/String", "992ce8a1687cec8c8bd883ec73ca41d1",
       capnp::Schema::from<std_msgs::String>(),
       "string data\n"},
      {"std_msgs/Header", "2176decaecbce78abc3b96ef049fabed",
       capnp::Schema::from<std_msgs::Header>(),
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"},
      {"std_msgs/Time", "cd7166c74c552c311fbcc2fe5a7bc289",
       capnp::Schema::from<std_msgs::TimeMsg>(),
       "time data\n"},
      {"std_msgs/Duration", "3e286caf4241d664e55f3ad380e2ae46",
       capnp::Schema::from<std_msgs::DurationMsg>(),
       "duration data\n"},
      {"geometry_msgs/Vector3", "4a842b65f413084dc2b10fb484ea7f17",
       capnp::Schema::from<geometry_msgs::Vector3>(),
       "# This represents a vector in free space. \n"
       "# It is only meant to represent a direction. Therefore, it does not\n"
       "# make sense to apply a translation to it (e.g., when applying a \n"
       "# generic rigid transformation to a Vector3, tf2 will only apply the\n"
       "# rotation). If you want your data to be translatable too, use the\n"
       "# geometry_msgs/Point message instead.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"},
      {"geometry_msgs/Point", "4a842b65f413084dc2b10fb484ea7f17",
       capnp::Schema::from<geometry_msgs::Point>(),
       "# This contains the position of a point in free space\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"},
      {"geometry_msgs/Quaternion", "a779879fadf0160734f906b8c19c7004",
       capnp::Schema::from<geometry_msgs::Quaternion>(),
       "# This represents an orientation in free space in quaternion form.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "float64 w\n"},
      {"geometry_msgs/Pose", "e45d45a5a1ce597b249e23fb30fc871f",
       capnp::Schema::from<geometry_msgs::Pose>(),
       "# A representation of pose in free space, composed of position and orientation. \n"
       "Point position\n"
       "Quaternion orientation\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Point\n"
       "# This contains the position of a point in free space\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Quaternion\n"
       "# This represents an orientation in free space in quaternion form.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "float64 w\n"},
      {"geometry_msgs/PoseStamped", "d3812c3cbc69362b77dc0b19b345f8f5",
       capnp::Schema::from<geometry_msgs::PoseStamped>(),
       "# A Pose with reference coordinate frame and timestamp\n"
       "Header header\n"
       "Pose pose\n"
       "\n"
       "================================================================================\n"
       "MSG: std_msgs/Header\n"
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Pose\n"
       "# A representation of pose in free space, composed of position and orientation. \n"
       "Point position\n"
       "Quaternion orientation\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Point\n"
       "# This contains the position of a point in free space\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Quaternion\n"
       "# This represents an orientation in free space in quaternion form.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "float64 w\n"},
      {"geometry_msgs/Twist", "9f195f881246fdfa2798d1d3eebca84a",
       capnp::Schema::from<geometry_msgs::Twist>(),
       "# This expresses velocity in free space broken into its linear and angular parts.\n"
       "Vector3  linear\n"
       "Vector3  angular\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Vector3\n"
       "# This represents a vector in free space. \n"
       "# It is only meant to represent a direction. Therefore, it does not\n"
       "# make sense to apply a translation to it (e.g., when applying a \n"
       "# generic rigid transformation to a Vector3, tf2 will only apply the\n"
       "# rotation). If you want your data to be translatable too, use the\n"
       "# geometry_msgs/Point message instead.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"},
      {"geometry_msgs/TwistStamped", "98d34b0043a2093cf9d9345ab6eef12e",
       capnp::Schema::from<geometry_msgs::TwistStamped>(),
       "# A twist with reference coordinate frame and timestamp\n"
       "Header header\n"
       "Twist twist\n"
       "\n"
       "================================================================================\n"
       "MSG: std_msgs/Header\n"
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Twist\n"
       "# This expresses velocity in free space broken into its linear and angular parts.\n"
       "Vector3  linear\n"
       "Vector3  angular\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Vector3\n"
       "# This represents a vector in free space. \n"
       "# It is only meant to represent a direction. Therefore, it does not\n"
       "# make sense to apply a translation to it (e.g., when applying a \n"
       "# generic rigid transformation to a Vector3, tf2 will only apply the\n"
       "# rotation). If you want your data to be translatable too, use the\n"
       "# geometry_msgs/Point message instead.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"},
      {"sensor_msgs/JointState", "3066dcd76a6cfaef579bd0f34173e9fd",
       capnp::Schema::from<sensor_msgs::JointState>(),
       "# This is a message that holds data to describe the state of a set of torque controlled joints. \n"
       "#\n"
       "# The state of each joint (revolute or prismatic) is defined by:\n"
       "#  * the position of the joint (rad or m),\n"
       "#  * the velocity of the joint (rad/s or m/s) and \n"
       "#  * the effort that is applied in the joint (Nm or N).\n"
       "#\n"
       "# Each joint is uniquely identified by its name\n"
       "# The header specifies the time at which the joint states were recorded. All the joint states\n"
       "# in one message have to be recorded at the same time.\n"
       "#\n"
       "# This message consists of a multiple arrays, one for each part of the joint state. \n"
       "# The goal is to make each of the fields optional. When e.g. your joints have no\n"
       "# effort associated with them, you can leave the effort array empty. \n"
       "#\n"
       "# All arrays in this message should have the same size, or be empty.\n"
       "# This is the only way to uniquely associate the joint name with the correct\n"
       "# states.\n"
       "\n"
       "\n"
       "Header header\n"
       "\n"
       "string[] name\n"
       "float64[] position\n"
       "float64[] velocity\n"
       "float64[] effort\n"
       "\n"
       "================================================================================\n"
       "MSG: std_msgs/Header\n"
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"},
      {"sensor_msgs/Imu", "6a62c6daae103f4ff57a132d6f95cec2",
       capnp::Schema::from<sensor_msgs::Imu>(),
       "# This is a message to hold data from an IMU (Inertial Measurement Unit)\n"
       "#\n"
       "# Accelerations should be in m/s^2 (not in g's), and rotational velocity should be in rad/sec\n"
       "#\n"
       "# If the covariance of the measurement is known, it should be filled in (if all you know is the \n"
       "# variance of each measurement, e.g. from the datasheet, just put those along the diagonal)\n"
       "# A covariance matrix of all zeros will be interpreted as \"covariance unknown\", and to use the\n"
       "# data a covariance will have to be assumed or gotten from some other source\n"
       "#\n"
       "# If you have no estimate for one of the data elements (e.g. your IMU doesn't produce an orientation \n"
       "# estimate), please set element 0 of the associated covariance matrix to -1\n"
       "# If you are interpreting this message, please check for a value of -1 in the first element of each \n"
       "# covariance matrix, and disregard the associated estimate.\n"
       "\n"
       "Header header\n"
       "\n"
       "geometry_msgs/Quaternion orientation\n"
       "float64[9] orientation_covariance # Row major about x, y, z axes\n"
       "\n"
       "geometry_msgs/Vector3 angular_velocity\n"
       "float64[9] angular_velocity_covariance # Row major about x, y, z axes\n"
       "\n"
       "geometry_msgs/Vector3 linear_acceleration\n"
       "float64[9] linear_acceleration_covariance # Row major x, y z \n"
       "\n"
       "================================================================================\n"
       "MSG: std_msgs/Header\n"
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Quaternion\n"
       "# This represents an orientation in free space in quaternion form.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"
       "float64 w\n"
       "\n"
       "================================================================================\n"
       "MSG: geometry_msgs/Vector3\n"
       "# This represents a vector in free space. \n"
       "# It is only meant to represent a direction. Therefore, it does not\n"
       "# make sense to apply a translation to it (e.g., when applying a \n"
       "# generic rigid transformation to a Vector3, tf2 will only apply the\n"
       "# rotation). If you want your data to be translatable too, use the\n"
       "# geometry_msgs/Point message instead.\n"
       "\n"
       "float64 x\n"
       "float64 y\n"
       "float64 z\n"},
      {"sensor_msgs/Image", "060021388200f6f0f447d0fcd9c64743",
       capnp::Schema::from<sensor_msgs::Image>(),
       "# This message contains an uncompressed image\n"
       "# (0, 0) is at top-left corner of image\n"
       "#\n"
       "\n"
       "Header header        # Header timestamp should be acquisition time of image\n"
       "                     # Header frame_id should be optical frame of camera\n"
       "                     # origin of frame should be optical center of camera\n"
       "                     # +x should point to the right in the image\n"
       "                     # +y should point down in the image\n"
       "                     # +z should point into to plane of the image\n"
       "                     # If the frame_id here and the frame_id of the CameraInfo\n"
       "                     # message associated with the image conflict\n"
       "                     # the behavior is undefined\n"
       "\n"
       "uint32 height         # image height, that is, number of rows\n"
       "uint32 width          # image width, that is, number of columns\n"
       "\n"
       "# The legal values for encoding are in file src/image_encodings.cpp\n"
       "# If you want to standardize a new string format, join\n"
       "# ros-users@lists.sourceforge.net and send an email proposing a new encoding.\n"
       "\n"
       "string encoding       # Encoding of pixels -- channel meaning, ordering, size\n"
       "                      # taken from the list of strings in include/sensor_msgs/image_encodings.h\n"
       "\n"
       "uint8 is_bigendian    # is this data bigendian?\n"
       "uint32 step           # Full row length in bytes\n"
       "uint8[] data          # actual matrix data, size is (step * rows)\n"
       "\n"
       "================================================================================\n"
       "MSG: std_msgs/Header\n"
       "# Standard metadata for higher-level stamped data types.\n"
       "# This is generally used to communicate timestamped data \n"
       "# in a particular coordinate frame.\n"
       "# \n"
       "# sequence ID: consecutively increasing ID \n"
       "uint32 seq\n"
       "#Two-integer timestamp that is expressed as:\n"
       "# * stamp.sec: seconds (stamp_secs) since epoch (in Python the variable is called 'secs')\n"
       "# * stamp.nsec: nanoseconds since stamp_secs (in Python the variable is called 'nsecs')\n"
       "# time-handling sugar is provided by the client library\n"
       "time stamp\n"
       "#Frame this data is associated with\n"
       "string frame_id\n"},
  };
  return kTypes;
}

}  // namespace tether::ros1msg::internal
