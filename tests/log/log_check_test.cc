// `tether log check` (CheckLog) decodes every message of a Cap'n Proto
// channel with the schema the log carries: a recorded message that no typed
// reader takes is a problem, counted per channel, with the first one's
// offset and why; a log of valid messages passes that check.
#include "log/log_check.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/logger.h"
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

}  // namespace
}  // namespace tether::log
