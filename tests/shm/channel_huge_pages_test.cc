// Large channels on huge pages: a data file of 2 MiB or more is a whole
// number of them, every mapping of it maps them so (where the kernel
// collapses tmpfs files), and a root that turns them off keeps small pages.
#include "shm/channel.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "shm/mounts.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/shm/shm_test_util.h"

namespace tether::shm {
namespace {

using testing::ScopedRoot;
using testing::SmallParams;

// Large channels on huge pages (channel_files.h): a data file of 2 MiB or
// more is a whole number of them, and every mapping of it maps them so.

constexpr uint64_t kHuge = 2u << 20;

QueueParams LargeParams() {  // 7 slots of 1 MiB: a camera channel
  return {.slot_size = 1u << 20, .queue_depth = 4, .max_publishers = 1,
          .max_pinned = 2};
}

// Bytes of `path` this process maps with PMD (huge page) entries, over all
// its mappings of the file. By inode: the creator maps the file under the
// private name it built it as (since unlinked).
uint64_t HugeMappedBytes(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return 0;
  const std::string ino = std::to_string(st.st_ino);
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool ours = false;
  uint64_t kib = 0;
  while (std::getline(smaps, line)) {
    std::istringstream in(line);
    std::string first;
    in >> first;
    if (first.find('-') != std::string::npos && first.back() != ':') {
      std::string perms, offset, dev, inode;
      in >> perms >> offset >> dev >> inode;
      ours = inode == ino;
    } else if (ours && first == "ShmemPmdMapped:") {
      uint64_t v = 0;
      in >> v;
      kib += v;
    }
  }
  return kib * 1024;
}

// 0 if this kernel collapses a tmpfs file in `dir` into huge pages, else
// madvise's errno: a probe of its own, independent of the code under test.
int ProbeCollapse(const std::string& dir) {
  const std::string path = dir + "/probe";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return errno;
  ::unlink(path.c_str());
  int err = 0;
  void* r = ::mmap(nullptr, 2 * kHuge, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* at = reinterpret_cast<char*>(
      (reinterpret_cast<uintptr_t>(r) + kHuge - 1) & ~(kHuge - 1));
  if (::ftruncate(fd, kHuge) != 0 ||
      ::mmap(at, kHuge, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
             0) == MAP_FAILED) {
    err = errno;
  } else {
    std::memset(at, 1, kHuge);
    if (::madvise(at, kHuge, 25 /* MADV_COLLAPSE */) != 0) err = errno;
  }
  ::munmap(r, 2 * kHuge);
  ::close(fd);
  return err;
}

std::string DataPath(const ScopedRoot& root, const char* name) {
  return root.root() + "/test/" + name;
}

TEST(ChannelHugePages, ALargeDataFileIsAWholeNumberOfHugePages) {
  ScopedRoot root;
  auto big = Channel::OpenOrCreate(root.options(), "big", LargeParams());
  ASSERT_TRUE(big.ok()) << big.status();
  struct stat st;
  ASSERT_EQ(::stat(DataPath(root, "big").c_str(), &st), 0);
  EXPECT_EQ(st.st_size % kHuge, 0u) << st.st_size;
  EXPECT_GE(uint64_t(st.st_size), LargeParams().pool_size() << 20);
  EXPECT_LT(uint64_t(st.st_size), (LargeParams().pool_size() << 20) + kHuge);
  // A small channel keeps its exact size (channel_test.cc,
  // Channel.SizeIsSlotsPlusASmallFixedOverhead).
  auto small = Channel::OpenOrCreate(root.options(), "small", SmallParams());
  ASSERT_TRUE(small.ok()) << small.status();
  ASSERT_EQ(::stat(DataPath(root, "small").c_str(), &st), 0);
  EXPECT_LT(uint64_t(st.st_size), 64u << 10);
}

TEST(ChannelHugePages, EveryMappingOfALargeChannelUsesHugePages) {
  ScopedRoot root;
  root.options().prefault = true;  // every page mapped now, to be counted
  // Made first, so the probe's file has a folder to live in.
  auto made = Channel::OpenOrCreate(root.options(), "cam", LargeParams());
  ASSERT_TRUE(made.ok()) << made.status();
  if (const int err = ProbeCollapse(root.root() + "/test"); err != 0) {
    GTEST_SKIP() << "this kernel does not collapse tmpfs files into huge "
                    "pages (MADV_COLLAPSE: "
                 << std::strerror(err) << ")";
  }
  const std::string path = DataPath(root, "cam");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  // The creator's mapping, then a second one (an opener's): every byte.
  EXPECT_EQ(HugeMappedBytes(path), uint64_t(st.st_size));
  auto opened = Channel::Open(root.options(), "cam");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(HugeMappedBytes(path), 2 * uint64_t(st.st_size));
  // And the channel works as before: a message through it, read in place.
  auto pub = Publisher::Create(made->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  auto reader = Reader::Create(opened->get());
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::span<std::byte> loan = (*pub)->Loan();
  ASSERT_EQ(loan.size(), LargeParams().slot_size);
  for (size_t i = 0; i < loan.size(); ++i) loan[i] = std::byte(i * 7);
  ASSERT_EQ((*pub)->Send(loan.size()).status, SendStatus::kOk);
  MessageView m;
  ASSERT_EQ((*reader)->Next(&m), ReadStatus::kOk);
  ASSERT_EQ(m.data.size(), LargeParams().slot_size);
  for (size_t i = 0; i < m.data.size(); i += 4093) {
    ASSERT_EQ(m.data[i], std::byte(i * 7)) << i;
  }
}

TEST(ChannelHugePages, OffTheFileKeepsItsSmallPages) {
  ScopedRoot root;
  root.options().prefault = true;
  root.options().huge_pages = false;
  auto c = Channel::OpenOrCreate(root.options(), "cam", LargeParams());
  ASSERT_TRUE(c.ok()) << c.status();
  std::optional<MountFacts> m = MountOf(root.root());
  ASSERT_TRUE(m.has_value());
  std::ifstream thp("/sys/kernel/mm/transparent_hugepage/shmem_enabled");
  std::string mode;
  std::getline(thp, mode);
  if ((m->huge != "never" && !m->huge.empty()) ||
      mode.find("[force]") != std::string::npos ||
      mode.find("[always]") != std::string::npos) {
    GTEST_SKIP() << m->point << " gives tmpfs files huge pages by itself";
  }
  EXPECT_EQ(HugeMappedBytes(DataPath(root, "cam")), 0u);
}

}  // namespace
}  // namespace tether::shm
