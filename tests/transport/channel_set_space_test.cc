// ChannelSet's up-front space check on a filesystem of the test's own (a
// small tmpfs, so root outside Bazel's sandbox; skipped otherwise): a stack
// counts as what its files take there, each a whole number of blocks, not
// as the sum of their bytes. One that fits only by its bytes is refused
// before any channel is made.
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "shm/channel.h"
#include "tests/util/scoped_tmpfs.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {
namespace {

using ::testing::HasSubstr;
using tether::testing::FolderUsage;
using tether::testing::ScopedTmpfs;
using tether::testing::UsageOf;

// Eight small channels: each file is a few KiB, so rounding each up to
// whole pages adds several pages to the stack.
std::string SmallStack() {
  std::string json = "{\"channels\": [";
  for (int i = 0; i < 8; ++i) {
    json += std::string(i == 0 ? "" : ", ") + "{\"name\": \"/s" +
            std::to_string(i) +
            "\", \"type\": \"tests/transport/framing_test.capnp:Scalars\", "
            "\"maxSize\": 64, \"queueDepth\": 4, \"maxPinned\": 1}";
  }
  return json + "]}";
}

TEST(ChannelSetSpace, StackThatFitsOnlyByItsFilesBytesIsRefusedUpFront) {
  SchemaRegistry schemas;
  schemas.Register<Scalars>();
  absl::StatusOr<StackConfig> stack =
      ParseStackConfig(SmallStack(), "<test stack>", schemas.known_types());
  ASSERT_TRUE(stack.ok()) << stack.status();

  // What the stack's files hold and take, on a tmpfs where it fits.
  FolderUsage usage;
  {
    ScopedTmpfs roomy(16 << 20);
    if (!roomy.ok()) {
      GTEST_SKIP() << "cannot mount a tmpfs here (" << roomy.error()
                   << "): needs root outside a sandbox";
    }
    shm::ChannelOptions options;
    options.root = roomy.path();
    options.instance = "s";
    auto set = ChannelSet::Create(options, *stack, schemas);
    ASSERT_TRUE(set.ok()) << set.status();
    usage = UsageOf(roomy.path() + "/s");
  }
  ASSERT_EQ(usage.files, 16);

  // Room for the bytes, in whole pages, but not for the pages the files take.
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  ScopedTmpfs small((usage.bytes + page - 1) / page * page);
  ASSERT_TRUE(small.ok()) << small.error();
  ASSERT_GE(small.free_bytes(), usage.bytes);
  ASSERT_LT(small.free_bytes(), usage.taken);
  shm::ChannelOptions options;
  options.root = small.path();
  options.instance = "s";
  auto set = ChannelSet::Create(options, *stack, schemas);
  ASSERT_FALSE(set.ok()) << "made a stack that does not fit";
  EXPECT_TRUE(absl::IsResourceExhausted(set.status())) << set.status();
  const std::string message(set.status().message());
  // Refused as a whole, counting exactly what the files take.
  EXPECT_THAT(message, HasSubstr("8 new channels that together need"));
  EXPECT_THAT(message,
              HasSubstr("(" + std::to_string(usage.taken) + " bytes)"));
  EXPECT_TRUE(std::filesystem::is_empty(small.path()))
      << "left behind in " << small.path() << " after: " << message;
}

}  // namespace
}  // namespace tether::transport
