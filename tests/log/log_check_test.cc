// `tether log check` (CheckLog) decodes every message of a Cap'n Proto
// channel with the schema the log carries: a recorded message that no typed
// reader takes is a problem, counted per channel, with the first one's
// offset and why; a log of valid messages passes that check.
#include "log/log_check.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_format.h"
#include "log/logger.h"
#include "log/mcap_writer.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::log::testing;

// Records 6 Sample messages on /a and 6 Scalars on /b; the first `corrupt`
// of /b with their root pointer corrupted (sent unchecked, as any writer
// of the channel can).
std::string Record(const std::string& name, int corrupt) {
  const std::string path = TempFile(name);
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(root.options(), schemas, "/a", kSampleType,
                       {.max_size = 4096, .depth = 64});
  auto b = MakeChannel(root.options(), schemas, "/b", kScalarsType,
                       {.max_size = 128, .depth = 64});
  LoggerOptions o = LogTo(root.options(), path);
  o.period = std::chrono::milliseconds(2);
  auto logger = Logger::Start(o);
  EXPECT_TRUE(logger.ok()) << logger.status();
  auto pa = transport::RawPublisher::Create(a.get());
  auto pb = transport::RawPublisher::Create(b.get());
  for (int i = 0; i < 6; ++i) {
    PublishBytes(**pa, SampleMessage(i));
    SendUnchecked(**pb, i < corrupt ? WithCorruptRoot(ScalarsMessage(i))
                                    : ScalarsMessage(i));
  }
  EXPECT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 12u; }));
  EXPECT_TRUE((*logger)->Stop().ok());
  return path;
}

TEST(CheckLog, MessagesThatDoNotDecodeAreProblemsCountedPerChannel) {
  auto report = CheckLog(Record("undecodable.mcap", 4));
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->ok());
  ASSERT_EQ(report->problems.size(), 1u);
  const std::string problem = report->problems[0].ToString();
  EXPECT_THAT(problem, HasSubstr("4 of 6 messages on /b do not decode"));
  EXPECT_THAT(problem, HasSubstr("out-of-bounds"));
  EXPECT_THAT(problem, HasSubstr("offset "));
  EXPECT_GT(report->problems[0].offset, 0u);
  EXPECT_EQ(report->undecodable_messages, 4u);
  EXPECT_EQ(report->undecodable_problems, 1u);
  // The file itself is sound: every other check still passes.
  bool records_passed = false;
  for (const std::string& p : report->passed) {
    if (p.rfind("records:", 0) == 0) records_passed = true;
    EXPECT_THAT(p, Not(HasSubstr("decode with their schemas")));
  }
  EXPECT_TRUE(records_passed);
}

TEST(CheckLog, ALogOfValidMessagesDecodesWhole) {
  auto report = CheckLog(Record("decodable.mcap", 0));
  ASSERT_TRUE(report.ok()) << report.status();
  for (const McapProblem& p : report->problems) ADD_FAILURE() << p.ToString();
  bool decoded = false;
  for (const std::string& p : report->passed) {
    if (p == "messages: all 12 of Cap'n Proto channels decode with their "
             "schemas") {
      decoded = true;
    }
  }
  EXPECT_TRUE(decoded) << ::testing::PrintToString(report->passed);
}

// A loss record names the MCAP channel (incarnation) that lost the
// messages: one that names a channel of another name, or none defined, is
// a problem; one naming its own is not.
TEST(CheckLog, ALossRecordMustNameAChannelOfItsName) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto a = MakeChannel(root.options(), schemas, "/a", kScalarsType);
  const ChannelDescription d = DescribeChannel(*a);
  for (const int named : {0, 1, 7}) {  // /a's id, the other, undefined
    const std::string path = TempFile("gap-ids.mcap");
    {
      McapWriterOptions wo;
      wo.overwrite = true;
      auto w = McapWriter::Create(path, wo);
      ASSERT_TRUE(w.ok()) << w.status();
      auto schema = (*w)->AddSchema(d.type_name, kCapnpEncoding, d.schema);
      auto gap_schema =
          (*w)->AddSchema(GapTypeName(), kCapnpEncoding, GapSchema());
      ASSERT_TRUE(schema.ok() && gap_schema.ok());
      auto ida = (*w)->AddChannel(*schema, "/a", kCapnpEncoding,
                                  ChannelMetadata(d));
      auto idg = (*w)->AddChannel(*gap_schema, kGapChannel, kCapnpEncoding, {});
      ASSERT_TRUE(ida.ok() && idg.ok());
      const uint16_t ids[] = {*ida, *idg, 7};
      GapRecord g;
      g.channel = "/a";
      g.missed = 1;
      g.mcap_channel_id = ids[named == 0 ? 0 : named == 1 ? 1 : 2];
      const std::vector<std::byte> m = ScalarsMessage(1);
      ASSERT_TRUE((*w)->WriteMessage({*ida, 0, 1000, 1000, m}, {}).ok());
      const std::vector<std::byte> gap = EncodeGap(g);
      ASSERT_TRUE((*w)->WriteMessage({*idg, 0, 2000, 2000, gap}, {}).ok());
      ASSERT_TRUE((*w)->Close().ok());
    }
    auto report = CheckLog(path);
    ASSERT_TRUE(report.ok()) << report.status();
    bool flagged = false;
    for (const McapProblem& p : report->problems) {
      flagged |= p.what.find("a loss record of /a names channel id") !=
                 std::string::npos;
    }
    EXPECT_EQ(flagged, named != 0) << named;
  }
}

// The summary's Summary Offset records must each cover exactly a run of
// records of their opcode inside the summary: one moved by a byte, and one
// pointing before the summary, are problems at the offsets they claim (the
// summary's CRC cleared, as a writer without CRCs leaves it, so the rest
// of the summary is still read).
TEST(CheckLog, SummaryOffsetsThatDoNotCoverTheirRecordsAreProblems) {
  const std::string path = Record("summary-offsets.mcap", 0);
  auto clean = CheckLog(path);
  ASSERT_TRUE(clean.ok()) << clean.status();
  for (const McapProblem& p : clean->problems) ADD_FAILURE() << p.ToString();

  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  // The footer: opcode, length, summary start, summary offset start, CRC,
  // then the closing magic (8 bytes).
  const auto u64 = [&](size_t at) {
    uint64_t v;
    std::memcpy(&v, bytes.data() + at, sizeof(v));
    return v;
  };
  const size_t crc_at = bytes.size() - 8 - 4;
  const uint64_t summary_start = u64(crc_at - 16);
  const uint64_t offsets_start = u64(crc_at - 8);
  ASSERT_GT(offsets_start, summary_start);
  std::vector<size_t> group_starts;  // where each record's group_start is
  for (size_t at = offsets_start; at + 9 <= crc_at - 16 - 9;) {
    const uint8_t opcode = static_cast<uint8_t>(bytes[at]);
    const uint64_t length = u64(at + 1);
    if (opcode == 0x0E) group_starts.push_back(at + 9 + 1);
    at += 9 + length;
  }
  ASSERT_GE(group_starts.size(), 2u);
  const uint64_t moved = u64(group_starts[0]) + 1;
  const uint64_t outside = 1;
  std::memcpy(bytes.data() + group_starts[0], &moved, sizeof(moved));
  std::memcpy(bytes.data() + group_starts[1], &outside, sizeof(outside));
  std::memset(bytes.data() + crc_at, 0, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;

  auto report = CheckLog(path);
  ASSERT_TRUE(report.ok()) << report.status();
  bool not_covering = false, outside_summary = false;
  for (const McapProblem& p : report->problems) {
    if (p.offset == moved &&
        p.what.find("does not cover exactly such records") !=
            std::string::npos) {
      not_covering = true;
    }
    if (p.offset == outside &&
        p.what == "summary offset points outside the summary") {
      outside_summary = true;
    }
  }
  EXPECT_TRUE(not_covering) << ::testing::PrintToString(report->problems);
  EXPECT_TRUE(outside_summary) << ::testing::PrintToString(report->problems);
}

}  // namespace
}  // namespace tether::log
