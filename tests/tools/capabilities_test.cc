// The CapEff parser the doctor and the launcher share: the effective set is
// read from its own line, bad values are absent rather than zero, and the
// bits the tools test mean what the kernel means.
#include "tools/capabilities.h"

#include <linux/capability.h>

#include "gtest/gtest.h"

namespace tether::tools {
namespace {

TEST(ParseCapEff, ReadsTheEffectiveLineOnly) {
  EXPECT_EQ(ParseCapEff("Name:\tx\nCapInh:\t0000000000000001\n"
                        "CapPrm:\t0000000000000002\n"
                        "CapEff:\t0000000000004000\n"
                        "CapBnd:\t000001ffffffffff\n"),
            std::optional<uint64_t>(0x4000));
  EXPECT_EQ(ParseCapEff("CapEff:\t000001ffffffffff"),
            std::optional<uint64_t>(0x1ffffffffffu));
}

TEST(ParseCapEff, MissingOrMalformedValueIsAbsentNotZero) {
  EXPECT_FALSE(ParseCapEff("").has_value());
  EXPECT_FALSE(ParseCapEff("CapPrm:\t0000000000004000\n").has_value());
  EXPECT_FALSE(ParseCapEff("CapEff:\t\n").has_value());
  EXPECT_FALSE(ParseCapEff("CapEff:\t00000zz000004000\n").has_value());
  EXPECT_FALSE(ParseCapEff("CapEff:\t-1\n").has_value());
  EXPECT_FALSE(ParseCapEff("CapEff:\t10000000000000000\n").has_value());
}

TEST(Capabilities, BitNumbersAreTheKernels) {
  EXPECT_EQ(kCapSetgid, CAP_SETGID);
  EXPECT_EQ(kCapSetuid, CAP_SETUID);
  EXPECT_EQ(kCapIpcLock, CAP_IPC_LOCK);
  EXPECT_EQ(kCapSysNice, CAP_SYS_NICE);
  EXPECT_TRUE(HasCapability(uint64_t{1} << CAP_SYS_NICE, kCapSysNice));
  EXPECT_FALSE(HasCapability(uint64_t{1} << CAP_SYS_NICE, kCapIpcLock));
  EXPECT_FALSE(HasCapability(~uint64_t{0}, 64));
}

TEST(ReadEffectiveCapabilities, ReadsThisProcessAndAMissingTreeIsAbsent) {
  EXPECT_TRUE(ReadEffectiveCapabilities().has_value());
  EXPECT_FALSE(ReadEffectiveCapabilities("/nonexistent-proc").has_value());
}

}  // namespace
}  // namespace tether::tools
