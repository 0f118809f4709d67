"""Build settings for Debian's ROS 1 libraries (see //third_party:roscpp)."""

# Only these packages may use the ROS targets: ROS headers appear nowhere
# else (DESIGN.md).
ROS_VISIBILITY = [
    "//ros_bridge:__subpackages__",
    "//tests/ros_bridge:__subpackages__",
    "//benchmarks:__pkg__",
]

# <rosbag/bag.h> includes <pluginlib/class_loader.hpp>; Debian's pluginlib-dev
# is the ROS 2 build, with its headers one directory down.
ROSBAG_COPTS = [
    "-isystem/usr/include/pluginlib",
    "-isystem/usr/include/class_loader",
    "-isystem/usr/include/rcutils",
    "-isystem/usr/include/rcpputils",
    "-isystem/usr/include/ament_index_cpp",
]
