// Logged payloads are standard Cap'n Proto messages: Debian's `capnp
// convert` (an independent decoder, given only the .capnp schema) decodes
// the bytes of logged messages of several shapes to the values that were
// sent.
#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_reader.h"
#include "log/logger.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "tests/util/run_command.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using namespace ::tether::log::testing;

std::string Convert(const std::string& file, const std::string& type,
                    int* status) {
  return ::tether::testing::RunCommand(
      "capnp convert binary:json tests/transport/framing_test.capnp " + type +
          " < '" + file + "' 2>&1",
      status);
}

TEST(CapnpConvert, DecodesLoggedPayloadsOfEveryShape) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto samples = MakeChannel(root.options(), schemas, "/s", kSampleType);
  auto scalars = MakeChannel(root.options(), schemas, "/c", kScalarsType,
                             {.max_size = 128});
  LoggerOptions o = LogTo(root.options(), TempFile("convert.mcap"));
  o.period = std::chrono::milliseconds(2);
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok());
  auto ps = transport::RawPublisher::Create(samples.get());
  auto pc = transport::RawPublisher::Create(scalars.get());
  constexpr int kCount = 15;  // i % 9, % 3, % 4, % 5 and blob sizes vary
  for (int i = 0; i < kCount; ++i) {
    PublishBytes(**ps, SampleMessage(i));
    PublishBytes(**pc, ScalarsMessage(i));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 2 * kCount; }));
  ASSERT_TRUE((*logger)->Stop().ok());

  auto reader = LogReader::Open(o.path);
  ASSERT_TRUE(reader.ok());
  auto cursor = (*reader)->Read();
  LogMessage m;
  int samples_seen = 0, scalars_seen = 0;
  const std::string payload = TempFile("payload.bin");
  while (cursor->Next(&m)) {
    if (m.channel->is_gap_channel()) continue;
    std::ofstream(payload, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(m.data.data()), m.data.size());
    const int i = static_cast<int>(m.queue_index);
    int status = -1;
    if (m.channel->name == "/s") {
      const std::string json = Convert(payload, "Sample", &status);
      ASSERT_EQ(status, 0) << json;
      EXPECT_THAT(json, HasSubstr("\"stamp\": \"" + std::to_string(1000 + i) + "\""));
      EXPECT_THAT(json, HasSubstr("\"label\": \"sample " + std::to_string(i) + "\""));
      if (i % 3 > 0) {
        EXPECT_THAT(json, HasSubstr("\"name\": \"joint0\""));
      }
      if (i % 5 == 0) {
        EXPECT_THAT(json, HasSubstr("\"label\": \"child\""));
      }
      if ((i * 37) % 700 > 0) {
        EXPECT_THAT(json, HasSubstr("\"blob\": [" + std::to_string(0 ^ i)));
      }
      ++samples_seen;
    } else {
      const std::string json = Convert(payload, "Scalars", &status);
      ASSERT_EQ(status, 0) << json;
      EXPECT_THAT(json, HasSubstr("\"i64\": \"" + std::to_string(-1000 * i) + "\""));
      EXPECT_THAT(json, HasSubstr(std::string("\"flag\": ") + (i % 2 == 0 ? "true" : "false")));
      ++scalars_seen;
    }
  }
  EXPECT_EQ(samples_seen, kCount);
  EXPECT_EQ(scalars_seen, kCount);
}

}  // namespace
}  // namespace tether::log
