// The per-boot cache of the rt-probe verdict: what it stores, and that a
// loop trusts only this boot's record, written by root or itself.
#include "loop/rt_probe_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"

namespace tether::loop {
namespace {

RtProbeRecord Record(RingWaitTimer verdict) {
  RtProbeRecord r;
  r.boot_id = "6f1c2f0e-0000-4000-8000-000000000001";
  r.kernel_release = "6.12.117+deb13-rt-amd64";
  r.ring_wait = verdict;
  r.summary = "ring missed 3 of 1000\nfloor missed 2 of 1000";
  return r;
}

class RtProbeCacheTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::mkdir(root_.root().c_str(), 0755), 0); }
  std::string Path(const std::string& name) { return root_.root() + "/" + name; }
  shm::testing::ScopedRoot root_;
};

TEST(RtProbeRecord, FormatsAndParsesBack) {
  for (RingWaitTimer t : {RingWaitTimer::kHard, RingWaitTimer::kSoft,
                          RingWaitTimer::kInconclusive}) {
    const std::string text = FormatRtProbeRecord(Record(t));
    auto parsed = ParseRtProbeRecord(text);
    ASSERT_TRUE(parsed.has_value()) << text;
    EXPECT_EQ(parsed->ring_wait, t);
    EXPECT_EQ(parsed->boot_id, Record(t).boot_id);
    EXPECT_EQ(parsed->kernel_release, Record(t).kernel_release);
    // One line: a newline in the summary cannot inject a key.
    EXPECT_EQ(parsed->summary,
              "ring missed 3 of 1000 floor missed 2 of 1000");
  }
}

TEST(RtProbeRecord, RejectsAnUnknownVerdictOrMissingKeys) {
  EXPECT_FALSE(ParseRtProbeRecord("boot_id=a\nkernel=k\nring_wait=maybe\n"));
  EXPECT_FALSE(ParseRtProbeRecord("boot_id=a\nring_wait=hard\n"));
  EXPECT_FALSE(ParseRtProbeRecord("kernel=k\nring_wait=hard\n"));
  EXPECT_FALSE(ParseRtProbeRecord("boot_id=a\nkernel=k\n"));
  EXPECT_FALSE(ParseRtProbeRecord("garbage without an equals sign\n"));
  EXPECT_TRUE(ParseRtProbeRecord(
      "# comment\nboot_id=a\nkernel=k\nring_wait=soft\nfuture_key=1\n"));
}

TEST_F(RtProbeCacheTest, ReadsBackOnlyThisBootsRecordForThisKernel) {
  const RtProbeRecord r = Record(RingWaitTimer::kHard);
  std::string written;
  ASSERT_TRUE(WriteRtProbeCache(r, {Path("dir/rt-probe")}, &written).ok());
  EXPECT_EQ(written, Path("dir/rt-probe"));
  auto back = ReadRtProbeCache({written}, r.boot_id, r.kernel_release);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ring_wait, RingWaitTimer::kHard);
  EXPECT_EQ(back->path, written);
  // Another boot, or another kernel: stale, ignored.
  EXPECT_FALSE(ReadRtProbeCache({written}, "another-boot", r.kernel_release));
  EXPECT_FALSE(ReadRtProbeCache({written}, r.boot_id, "6.12.107"));
  EXPECT_FALSE(ReadRtProbeCache({written}, "", r.kernel_release));
}

TEST_F(RtProbeCacheTest, WritesTheFirstWritablePathAndReadsTheFirstValid) {
  const RtProbeRecord r = Record(RingWaitTimer::kSoft);
  const std::string blocked = "/proc/tether-cannot-write-here/rt-probe";
  std::string written;
  ASSERT_TRUE(WriteRtProbeCache(r, {blocked, Path("b")}, &written).ok());
  EXPECT_EQ(written, Path("b"));
  auto back = ReadRtProbeCache({blocked, Path("b")}, r.boot_id,
                               r.kernel_release);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->ring_wait, RingWaitTimer::kSoft);
  const absl::Status none = WriteRtProbeCache(r, {blocked}, nullptr);
  EXPECT_FALSE(none.ok());
  EXPECT_NE(none.message().find("/proc/tether-cannot-write-here"),
            std::string::npos)
      << none;
}

TEST_F(RtProbeCacheTest, IgnoresAFileOthersCanWriteOrASymlink) {
  const RtProbeRecord r = Record(RingWaitTimer::kHard);
  ASSERT_TRUE(WriteRtProbeCache(r, {Path("f")}, nullptr).ok());
  ASSERT_EQ(::chmod(Path("f").c_str(), 0666), 0);
  EXPECT_FALSE(ReadRtProbeCache({Path("f")}, r.boot_id, r.kernel_release));
  ASSERT_EQ(::chmod(Path("f").c_str(), 0644), 0);
  EXPECT_TRUE(ReadRtProbeCache({Path("f")}, r.boot_id, r.kernel_release));
  ASSERT_EQ(::symlink(Path("f").c_str(), Path("link").c_str()), 0);
  EXPECT_FALSE(ReadRtProbeCache({Path("link")}, r.boot_id, r.kernel_release));
}

TEST_F(RtProbeCacheTest, IgnoresAFileOwnedByAnotherUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  const RtProbeRecord r = Record(RingWaitTimer::kHard);
  ASSERT_TRUE(WriteRtProbeCache(r, {Path("f")}, nullptr).ok());
  if (::chown(Path("f").c_str(), 65534, 65534) != 0) {
    GTEST_SKIP() << "chown refused (a user namespace)";
  }
  // Root trusts only root's own files; a file of uid 65534 is not.
  EXPECT_FALSE(ReadRtProbeCache({Path("f")}, r.boot_id, r.kernel_release));
}

TEST(RtProbeCache, BootIdIsReadFromProc) {
  const std::string id = ReadBootId();
  EXPECT_EQ(id.size(), 36u) << id;  // a UUID
  EXPECT_EQ(ReadBootId("/nonexistent"), "");
}

}  // namespace
}  // namespace tether::loop
