// Logs written by tether are read by an independent implementation: the
// reference TypeScript MCAP library (@mcap/core 2.2.2, with fzstd for zstd
// chunks), run by Node, opens them indexed (footer, summary, chunk and
// message indexes, CRCs) and streaming, and sees the same channels and
// messages as tether's reader: topics, encodings, schema names, times,
// sequences and every payload byte.
//
// The npm packages are installed by this test into its own temporary
// directory (npm install --prefix), so it needs the npm registry; it is
// tagged requires-network.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "log/logger.h"
#include "log/mcap_reader.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "tests/util/run_command.h"

namespace tether::log {
namespace {

using namespace ::tether::log::testing;

using ::tether::testing::RunCommand;

std::string* g_modules = nullptr;

class McapJsReaderTest : public ::testing::TestWithParam<Compression> {
 protected:
  static void SetUpTestSuite() {
    const std::string prefix = TempFile("js");
    int status = 0;
    // Node trusts its own CA list, not the system's; Bazel's test
    // environment drops NODE_EXTRA_CA_CERTS, so give it the system bundle
    // (machines behind a TLS-inspecting proxy need it).
    std::string ca;
    if (std::getenv("NODE_EXTRA_CA_CERTS") == nullptr &&
        ::access("/etc/ssl/certs/ca-certificates.crt", R_OK) == 0) {
      ca = "NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt ";
    }
    const std::string out = RunCommand(
        ca + "npm install --prefix '" + prefix + "' --cache '" + prefix +
            "/.npm-cache' --no-audit --no-fund --no-package-lock "
            "--loglevel=error @mcap/core@2.2.2 fzstd@0.1.1 2>&1",
        &status);
    ASSERT_EQ(status, 0) << "npm install failed (this test needs the npm "
                            "registry):\n"
                         << out;
    g_modules = new std::string(prefix + "/node_modules");
  }
  static void TearDownTestSuite() { delete g_modules; }
};

using Message = std::tuple<std::string, uint64_t, uint64_t, uint32_t, std::string>;

struct Seen {
  std::map<std::string, std::vector<std::string>> channels;  // topic -> fields
  std::vector<Message> messages;
  std::string stats;
  long done = -1;
};

Seen RunJs(const std::string& file, const std::string& mode) {
  int status = 0;
  const std::string out = RunCommand("node tests/log/mcap_js_reader.js '" + *g_modules +
                                  "' '" + file + "' " + mode + " 2>&1",
                              &status);
  EXPECT_EQ(status, 0) << out.substr(0, 4000);
  Seen seen;
  for (absl::string_view line : absl::StrSplit(out, '\n', absl::SkipEmpty())) {
    std::vector<std::string> f = absl::StrSplit(line, '\t');
    if (f[0] == "channel" && f.size() == 7) {
      seen.channels[f[2]] = {f[3], f[4], f[5], f[6]};
    } else if (f[0] == "message" && f.size() == 6) {
      seen.messages.emplace_back(f[1], std::stoull(f[2]), std::stoull(f[3]),
                                 static_cast<uint32_t>(std::stoul(f[4])), f[5]);
    } else if (f[0] == "stats") {
      seen.stats = std::string(line);
    } else if (f[0] == "done" && f.size() == 2) {
      seen.done = std::stol(f[1]);
    } else {
      ADD_FAILURE() << "unexpected output from node: " << line;
    }
  }
  std::sort(seen.messages.begin(), seen.messages.end());
  return seen;
}

TEST_P(McapJsReaderTest, OpensTetherLogsIndexedAndStreamingAndSeesTheSameMessages) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  auto samples = MakeChannel(root.options(), schemas, "/js/samples", kSampleType,
                             {.max_size = 4096, .depth = 512});
  auto scalars = MakeChannel(root.options(), schemas, "/js/scalars", kScalarsType,
                             {.max_size = 128, .depth = 512});
  LoggerOptions o = LogTo(root.options(), TempFile("js.mcap"));
  o.period = std::chrono::milliseconds(2);
  o.mcap.compression = GetParam();
  o.mcap.chunk_size = 16 << 10;  // several chunks
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok());
  auto ps = transport::RawPublisher::Create(samples.get());
  auto pc = transport::RawPublisher::Create(scalars.get());
  for (int i = 0; i < 300; ++i) {
    PublishBytes(**ps, SampleMessage(i));
    PublishBytes(**pc, ScalarsMessage(i));
  }
  ASSERT_TRUE(WaitFor([&] { return (*logger)->stats().messages == 600; }));
  ASSERT_TRUE((*logger)->Stop().ok());

  // What tether's own reader sees.
  auto reader = McapReader::Open(o.path);
  ASSERT_TRUE(reader.ok());
  ASSERT_GT((*reader)->chunk_indexes().size(), 3u);
  std::vector<Message> ours;
  auto it = (*reader)->Messages();
  McapMessageView v;
  while (it->Next(&v)) {
    const std::string data(reinterpret_cast<const char*>(v.message.data.data()),
                           v.message.data.size());
    ours.emplace_back((*reader)->channels().at(v.message.channel_id).topic,
                      v.message.log_time, v.message.publish_time,
                      v.message.sequence, absl::Base64Escape(data));
  }
  std::sort(ours.begin(), ours.end());
  ASSERT_EQ(ours.size(), 600u);

  for (const char* mode : {"indexed", "streaming"}) {
    SCOPED_TRACE(mode);
    const Seen seen = RunJs(o.path, mode);
    EXPECT_EQ(seen.done, 600);
    EXPECT_TRUE(seen.messages == ours) << "the JS reader sees other messages";
    ASSERT_EQ(seen.channels.count("/js/samples"), 1u);
    const std::vector<std::string>& c = seen.channels.at("/js/samples");
    EXPECT_EQ(c[0], "capnproto");
    EXPECT_EQ(c[1], kSampleType);
    EXPECT_EQ(c[2], "capnproto");
    EXPECT_EQ(c[3], absl::StrFormat("0x%016x", samples->type_id()));
    EXPECT_EQ(seen.channels.count(kGapChannel), 1u);
    if (std::string(mode) == "indexed") {
      EXPECT_EQ(seen.stats.substr(0, 10), "stats\t600\t");
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Compressions, McapJsReaderTest,
                         ::testing::Values(Compression::kZstd,
                                           Compression::kNone));

}  // namespace
}  // namespace tether::log
