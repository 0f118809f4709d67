// `tether log check` (CheckLog) decodes every message of a Cap'n Proto
// channel with the schema the log carries: a recorded message that no typed
// reader takes is a problem, counted per channel, with the first one's
// offset and why; a log of valid messages passes that check.
#include "log/log_check.h"

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

}  // namespace
}  // namespace tether::log
