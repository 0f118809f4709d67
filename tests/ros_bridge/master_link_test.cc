// The ROS graph id's forms (ros_bridge/master_link.h): the parameter's 16
// hex digits both ways, what is not an id, and the provisional id.
#include "ros_bridge/master_link.h"

#include <set>

#include "gtest/gtest.h"

namespace tether::ros_bridge {
namespace {

TEST(GraphIdTest, NameAndParseAreInverses) {
  EXPECT_EQ(GraphName(1), "0000000000000001");
  EXPECT_EQ(GraphName(0xfedcba9876543210ull), "fedcba9876543210");
  for (const uint64_t id : {1ull, 0xaull, 0x8000000000000000ull, ~0ull,
                            0x0123456789abcdefull}) {
    EXPECT_EQ(ParseGraphName(GraphName(id)), id) << GraphName(id);
  }
}

TEST(GraphIdTest, WhatIsNotAnIdIsRefused) {
  EXPECT_EQ(ParseGraphName(""), std::nullopt);
  EXPECT_EQ(ParseGraphName("0000000000000000"), std::nullopt);  // 0: tether's
  EXPECT_EQ(ParseGraphName("127.0.0.1:11311"), std::nullopt);    // an older bridge's
  EXPECT_EQ(ParseGraphName("000000000000001"), std::nullopt);    // 15 digits
  EXPECT_EQ(ParseGraphName("00000000000000001"), std::nullopt);  // 17
  EXPECT_EQ(ParseGraphName("FEDCBA9876543210"), std::nullopt);   // not the form
  EXPECT_EQ(ParseGraphName("000000000000000g"), std::nullopt);
}

TEST(GraphIdTest, NewIdsAreNeverZeroAndDiffer) {
  std::set<uint64_t> ids;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t id = NewGraphId();
    EXPECT_NE(id, 0u);
    ids.insert(id);
  }
  EXPECT_EQ(ids.size(), 1000u);
}

TEST(GraphIdTest, ProvisionalIdResolvesTheHost) {
  const uint64_t id = ProvisionalGraphId("http://127.0.0.1:11311/");
  EXPECT_NE(id, 0u);
  EXPECT_EQ(ProvisionalGraphId("http://localhost:11311"), id);
  EXPECT_EQ(ProvisionalGraphId("127.0.0.1"), id);  // port 11311 by default
  EXPECT_NE(ProvisionalGraphId("http://127.0.0.1:11312/"), id);
}

}  // namespace
}  // namespace tether::ros_bridge
