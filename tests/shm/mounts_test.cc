// shm::FindMount: the mount holding a path, from mountinfo(5) text.
#include "shm/mounts.h"

#include "gtest/gtest.h"

namespace tether::shm {
namespace {

// Real lines' shape: optional fields before the "-".
constexpr char kMountinfo[] =
    "22 1 0:21 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
    "30 22 0:26 / /dev/shm rw,nosuid,nodev shared:4 - tmpfs tmpfs "
    "rw,size=65536k\n"
    "31 30 0:27 / /dev/shm/tether rw,relatime - tmpfs tmpfs "
    "rw,size=2097152k,mode=1777,huge=within_size\n"
    "garbage line\n"
    "40 22 0:30 / /mnt rw - tmpfs tmpfs rw\n"
    "42 22 0:32 / /srv/robot\\040shm rw - tmpfs tmpfs rw,huge=always\n"
    "41 22 0:31 / /mnt rw - ext4 /dev/vdb rw\n";

TEST(FindMount, TakesTheLongestMountPointAboveThePath) {
  std::optional<MountFacts> m = FindMount(kMountinfo, "/dev/shm/tether/demo");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/dev/shm/tether");
  EXPECT_EQ(m->fstype, "tmpfs");
  EXPECT_EQ(m->huge, "within_size");

  m = FindMount(kMountinfo, "/dev/shm/tether");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/dev/shm/tether");
}

TEST(FindMount, ANameThatOnlyStartsLikeAMountPointIsNotUnderIt) {
  std::optional<MountFacts> m = FindMount(kMountinfo, "/dev/shm/tetherx");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/dev/shm");
  EXPECT_EQ(m->huge, "never");  // a tmpfs without the option
}

TEST(FindMount, OtherFilesystemsHaveNoHugeOptionAndTheTopMountWins) {
  std::optional<MountFacts> m = FindMount(kMountinfo, "/home/robot");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/");
  EXPECT_EQ(m->fstype, "ext4");
  EXPECT_EQ(m->huge, "");
  m = FindMount(kMountinfo, "/mnt/x");  // ext4 mounted over the tmpfs
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->fstype, "ext4");
}

TEST(FindMount, DecodesTheOctalEscapesOfMountPoints) {
  std::optional<MountFacts> m = FindMount(kMountinfo, "/srv/robot shm/tether");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/srv/robot shm");
  EXPECT_EQ(m->huge, "always");
}

TEST(FindMount, NoLinesNoMount) {
  EXPECT_FALSE(FindMount("", "/dev/shm").has_value());
  EXPECT_FALSE(FindMount("garbage\n1 2 3\n", "/dev/shm").has_value());
}

TEST(MountOf, FindsThisProcesssRoot) {
  std::optional<MountFacts> m = MountOf("/");
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->point, "/");
}

}  // namespace
}  // namespace tether::shm
