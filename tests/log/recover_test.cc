// A logger SIGKILLed mid-recording leaves a file without a summary that is
// still readable (every closed chunk, a gapless prefix of what was sent),
// and RecoverLog rewrites it complete: indexed, every check passing, the
// same messages. A log with a corrupt chunk recovers everything else and
// says where the damage was.
#include "log/log_recover.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <iterator>
#include <fstream>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_check.h"
#include "log/log_reader.h"
#include "log/logger.h"
#include "log/mcap_reader.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

struct Logged {
  uint64_t queue_index;
  std::vector<std::byte> data;
};

std::vector<Logged> ReadChannel(const std::string& path, const std::string& name,
                                bool* indexed = nullptr) {
  std::vector<Logged> out;
  auto reader = LogReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  if (indexed != nullptr) *indexed = (*reader)->mcap().indexed();
  const LogChannel* c = (*reader)->FindChannel(name);
  if (c == nullptr) return out;
  LogReadOptions o;
  o.channels = {c->id};
  auto cursor = (*reader)->Read(o);
  LogMessage m;
  while (cursor->Next(&m)) {
    out.push_back({m.queue_index, std::vector<std::byte>(m.data.begin(), m.data.end())});
  }
  return out;
}

class RecoverTest : public ::testing::Test {
 protected:
  RecoverTest() { RegisterTestTypes(schemas_); }
  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
};

TEST_F(RecoverTest, AKilledLoggersFileIsReadableAndRecoversComplete) {
  auto channel = MakeChannel(root_.options(), schemas_, "/kill/me", kSampleType,
                             {.max_size = 4096, .depth = 1024});
  const std::string path = TempFile("killed.mcap");
  ::unlink(path.c_str());
  const pid_t child = ::fork();
  if (child == 0) {
    LoggerOptions o;
    o.channels = root_.options();
    o.path = path;
    o.period = std::chrono::milliseconds(2);
    o.from_oldest = true;
    o.chunk_period = std::chrono::milliseconds(50);
    auto logger = Logger::Start(o);
    if (!logger.ok()) ::_exit(1);
    for (;;) ::pause();
  }
  auto pub = transport::RawPublisher::Create(channel.get());
  ASSERT_TRUE(pub.ok());
  int sent = 0;
  for (; sent < 600; ++sent) {
    PublishBytes(**pub, SampleMessage(sent));
    std::this_thread::sleep_for(std::chrono::microseconds(700));
  }
  // Killed once closed chunks hold at least 100 of them (waited for, not
  // assumed from the 0.4 s of sends: a loaded machine runs the child late).
  ASSERT_TRUE(WaitFor([&] {
    auto reader = LogReader::Open(path);  // not there yet: look again
    if (!reader.ok()) return false;
    const LogChannel* c = (*reader)->FindChannel("/kill/me");
    if (c == nullptr) return false;
    LogReadOptions o;
    o.channels = {c->id};
    auto cursor = (*reader)->Read(o);
    LogMessage m;
    size_t n = 0;
    while (n < 100 && cursor->Next(&m)) ++n;
    return n >= 100;
  }, 20));
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status));

  // Readable as it is: no summary, a problem naming where the file ends,
  // and the messages of every closed chunk.
  auto mcap = McapReader::Open(path);
  ASSERT_TRUE(mcap.ok()) << mcap.status();
  EXPECT_FALSE((*mcap)->indexed());
  ASSERT_FALSE((*mcap)->problems().empty());
  EXPECT_THAT((*mcap)->problems()[0].ToString(), HasSubstr("offset "));
  bool indexed = true;
  const std::vector<Logged> killed = ReadChannel(path, "/kill/me", &indexed);
  EXPECT_FALSE(indexed);
  ASSERT_GE(killed.size(), 100u) << "closed chunks hold what was there";
  for (size_t i = 0; i < killed.size(); ++i) {
    ASSERT_EQ(killed[i].queue_index, i) << "a hole in what was kept";
    const std::vector<std::byte> want = SampleMessage(static_cast<int>(i));
    ASSERT_EQ(killed[i].data, want);
  }

  const std::string out = TempFile("recovered.mcap");
  McapWriterOptions wo;
  wo.overwrite = true;
  auto report = RecoverLog(path, out, wo);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->input_was_complete);
  EXPECT_FALSE(report->problems.empty());
  auto check = CheckLog(out);
  ASSERT_TRUE(check.ok());
  for (const McapProblem& p : check->problems) ADD_FAILURE() << p.ToString();
  const std::vector<Logged> recovered = ReadChannel(out, "/kill/me", &indexed);
  EXPECT_TRUE(indexed);
  ASSERT_EQ(recovered.size(), killed.size());
  for (size_t i = 0; i < killed.size(); ++i) {
    EXPECT_EQ(recovered[i].queue_index, killed[i].queue_index);
    EXPECT_EQ(recovered[i].data, killed[i].data);
  }
  // The channel still carries what a replay needs.
  auto reader = LogReader::Open(out);
  ASSERT_TRUE(reader.ok());
  const LogChannel* c = (*reader)->FindChannel("/kill/me");
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->description.has_value());
  EXPECT_EQ(*c->description, DescribeChannel(*channel));
  // And it says it was recovered.
  bool said = false;
  for (const mcap::Metadata& m : (*reader)->mcap().metadata()) {
    if (m.name == kSummaryMetadata) said = m.metadata.count("recovered_from") > 0;
  }
  EXPECT_TRUE(said);
  EXPECT_EQ(report->orphans, 0u);

  // The same file with its channel record's length damaged: the messages
  // are intact but cannot be kept without it, and the report counts them
  // (the CLI then fails instead of calling it recovered).
  std::ifstream copy_in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(copy_in)),
                          std::istreambuf_iterator<char>());
  size_t at = 8;  // past the magic: opcode, u64 length, body
  bool flipped = false;
  while (at + 9 <= bytes.size()) {
    uint64_t len = 0;
    std::memcpy(&len, bytes.data() + at + 1, 8);
    if (bytes[at] == 0x04) {  // Channel
      bytes[at + 1] ^= 1;
      flipped = true;
      break;
    }
    at += 9 + len;
  }
  ASSERT_TRUE(flipped) << "no channel record";
  const std::string damaged = TempFile("channel-record-damaged.mcap");
  std::ofstream(damaged, std::ios::binary).write(bytes.data(), bytes.size());
  auto orphaned = RecoverLog(damaged, TempFile("orphaned.mcap"), wo);
  ASSERT_TRUE(orphaned.ok()) << orphaned.status();
  EXPECT_GE(orphaned->orphans, killed.size());
}

TEST_F(RecoverTest, ACorruptChunkLosesOnlyItsMessagesAndIsNamed) {
  auto channel = MakeChannel(root_.options(), schemas_, "/c", kSampleType,
                             {.max_size = 4096, .depth = 1024});
  LoggerOptions o = LogTo(root_.options(), TempFile("to-corrupt.mcap"));
  o.period = std::chrono::milliseconds(2);
  o.mcap.chunk_size = 8192;
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok());
  auto pub = transport::RawPublisher::Create(channel.get());
  for (int i = 0; i < 400; ++i) PublishBytes(**pub, SampleMessage(i));
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 400; }));
  ASSERT_TRUE((*logger)->Stop().ok());

  auto mcap = McapReader::Open(o.path);
  ASSERT_TRUE(mcap.ok());
  ASSERT_GT((*mcap)->chunk_indexes().size(), 4u);
  const mcap::ChunkIndex victim = (*mcap)->chunk_indexes()[2];
  std::string bytes;
  {
    std::ifstream in(o.path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[victim.chunk_start_offset + victim.chunk_length / 2] ^= 0x40;
  const std::string bad = TempFile("corrupted.mcap");
  std::ofstream(bad, std::ios::binary) << bytes;

  auto check = CheckLog(bad);
  ASSERT_TRUE(check.ok());
  ASSERT_FALSE(check->ok());
  EXPECT_EQ(check->problems[0].offset, victim.chunk_start_offset);

  const std::string out = TempFile("corrupted-recovered.mcap");
  McapWriterOptions wo;
  wo.overwrite = true;
  auto report = RecoverLog(bad, out, wo);
  ASSERT_TRUE(report.ok()) << report.status();
  bool named = false;
  for (const McapProblem& p : report->problems) {
    named |= p.offset == victim.chunk_start_offset;
  }
  EXPECT_TRUE(named);
  const std::vector<Logged> recovered = ReadChannel(out, "/c");
  EXPECT_LT(recovered.size(), 400u);
  EXPECT_GT(recovered.size(), 300u);
  for (const Logged& l : recovered) {
    EXPECT_EQ(l.data, SampleMessage(static_cast<int>(l.queue_index)));
  }
  auto recheck = CheckLog(out);
  ASSERT_TRUE(recheck.ok());
  EXPECT_TRUE(recheck->ok());
}

// Also by another path to the same file (./x, a symlink), with overwrite
// on: the input is left as it was.
TEST(RecoverLog, RefusesToOverwriteItsInput) {
  const std::string in = TempFile("recover-self.mcap");
  std::ofstream(in) << "not much of a log";
  const std::string link = in + ".link";
  std::filesystem::remove(link);
  std::filesystem::create_symlink(in, link);
  const std::string dotted =
      std::filesystem::path(in).parent_path().string() + "/./" +
      std::filesystem::path(in).filename().string();
  McapWriterOptions wo;
  wo.overwrite = true;
  for (const std::string& out : {in, link, dotted}) {
    SCOPED_TRACE(out);
    auto r = RecoverLog(in, out, wo);
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr("is the input " + in + " itself"));
  }
  EXPECT_EQ(std::filesystem::file_size(in), 17u);
}

}  // namespace
}  // namespace tether::log
