// The log commands through the real `tether` binary, as a user runs them:
// record (stopped by SIGINT, and by a second signal before it finishes),
// log info/cat/check/recover/plot, replay (into another instance, of a
// truncated log, its --rate range and --paused), their --help, and bad
// input that must fail with a message saying what to do. (FIFOs, full
// disks and damaged logs: log_commands_faults_binary_test.cc.)
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/log_commands_test_fixture.h"
#include "tests/tools/run_tether.h"
#include "transport/raw_endpoints.h"

namespace tether::tools::test {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::log::testing;

TEST_F(LogCommandsTest, RecordThenInfoCatCheckPlot) {
  const std::string file = TempFile("cli.mcap");
  const Outcome rec = Record(file, 200);
  ASSERT_EQ(rec.code, 0) << rec.err;
  EXPECT_THAT(rec.err, HasSubstr("recording 1 channels"));
  EXPECT_THAT(rec.out, HasSubstr("recorded 200 messages"));

  Outcome info = RunTether({"log", "info", file, "--json"});
  ASSERT_EQ(info.code, 0) << info.err;
  absl::StatusOr<JsonValue> json = ParseJson(info.out);
  ASSERT_TRUE(json.ok()) << json.status() << info.out;
  EXPECT_EQ(json->Find("messages")->number, 200);
  EXPECT_EQ(json->Find("missed")->number, 0);
  EXPECT_TRUE(json->Find("indexed")->boolean);
  info = RunTether({"log", "info", file});
  EXPECT_THAT(info.out, HasSubstr("/cli/samples"));
  EXPECT_THAT(info.out, HasSubstr(kSampleType));

  const Outcome cat = RunTether({"log", "cat", file, "--count", "2", "--json"});
  ASSERT_EQ(cat.code, 0) << cat.err;
  std::vector<std::string> lines = absl::StrSplit(cat.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u);
  absl::StatusOr<JsonValue> line = ParseJson(lines[1]);
  ASSERT_TRUE(line.ok()) << lines[1];
  EXPECT_EQ(line->Find("queue_index")->number, 1);
  EXPECT_EQ(line->Find("message")->Find("label")->string, "sample 1");

  const Outcome check = RunTether({"log", "check", file});
  EXPECT_EQ(check.code, 0) << check.out;
  EXPECT_THAT(check.out, HasSubstr("0 problems"));

  const std::string png = TempFile("cli.png");
  const Outcome plot =
      RunTether({"log", "plot", file, "/cli/samples.stamp", "--out", png});
  ASSERT_EQ(plot.code, 0) << plot.err;
  std::ifstream in(png, std::ios::binary);
  char sig[8] = {};
  in.read(sig, 8);
  EXPECT_EQ(std::string(sig + 1, 3), "PNG");
  // Drawn again over its own earlier plot; never over a file that is not
  // a PNG (here: the log itself) unless --force, never over its input.
  EXPECT_EQ(RunTether({"log", "plot", file, "/cli/samples.stamp", "--out", png})
                .code,
            0);
  const std::string log_copy = TempFile("cli-copy.mcap");
  std::filesystem::copy_file(file, log_copy,
                             std::filesystem::copy_options::overwrite_existing);
  const uintmax_t log_size = std::filesystem::file_size(log_copy);
  Outcome over = RunTether(
      {"log", "plot", file, "/cli/samples.stamp", "--out", log_copy});
  EXPECT_EQ(over.code, 2) << over.err;
  EXPECT_THAT(over.err, HasSubstr("exists and is not a PNG image"));
  over = RunTether({"log", "plot", log_copy, "/cli/samples.stamp", "--out",
                    log_copy, "--force"});
  EXPECT_EQ(over.code, 2) << over.err;
  EXPECT_THAT(over.err, HasSubstr("itself"));
  EXPECT_EQ(std::filesystem::file_size(log_copy), log_size);

  // A channel without a field lists the fields it has; an index past the
  // end of its list in every message is an error, not an empty plot.
  const std::string bad_png = TempFile("cli-bad.png");
  Outcome bad =
      RunTether({"log", "plot", file, "/cli/samples", "--out", bad_png});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_THAT(bad.err,
              HasSubstr("names the channel /cli/samples but no field"));
  EXPECT_THAT(bad.err, HasSubstr("stamp, values[i], joints[i].position"));
  bad = RunTether({"log", "plot", file, "/cli/samples.joints[999].position",
                   "--out", bad_png});
  EXPECT_EQ(bad.code, 2) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("index 999 is past the end of joints in "
                                 "every message of /cli/samples"));
  EXPECT_THAT(bad.err, HasSubstr("the longest joints has 2 elements"));
  EXPECT_FALSE(std::filesystem::exists(bad_png));
}

TEST_F(LogCommandsTest, ATruncatedLogIsCheckedAsBrokenAndRecovered) {
  const std::string file = TempFile("cli-cut-src.mcap");
  ASSERT_EQ(Record(file, 300).code, 0);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = TempFile("cli-cut.mcap");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
  const Outcome check = RunTether({"log", "check", cut});
  EXPECT_EQ(check.code, 1);
  EXPECT_THAT(check.out, HasSubstr("FAIL  offset "));
  EXPECT_THAT(check.out, HasSubstr("tether log recover"));
  const std::string fixed = TempFile("cli-fixed.mcap");
  const Outcome recover = RunTether({"log", "recover", cut, fixed, "--force"});
  ASSERT_EQ(recover.code, 0) << recover.err;
  EXPECT_THAT(recover.out, HasSubstr("damage: offset "));
  EXPECT_EQ(RunTether({"log", "check", fixed}).code, 0);
}

TEST_F(LogCommandsTest, ReplayIntoAnotherInstance) {
  const std::string file = TempFile("cli-replay.mcap");
  ASSERT_EQ(Record(file, 100).code, 0);
  shm::testing::ScopedRoot other;
  std::vector<std::string> args = {"replay", file, "--rate", "10",
                                   "/cli/samples:=/cli/replayed"};
  for (const std::string& w : Where(other)) args.push_back(w);
  const Outcome replay = RunTether(args);
  ASSERT_EQ(replay.code, 0) << replay.err;
  EXPECT_THAT(replay.out, HasSubstr("replayed 100 messages"));
  EXPECT_THAT(replay.err, HasSubstr("/cli/samples -> /cli/replayed"));
  std::vector<std::string> list = {"list"};
  for (const std::string& w : Where(other)) list.push_back(w);
  EXPECT_THAT(RunTether(list).out, HasSubstr("/cli/replayed"));
}

TEST_F(LogCommandsTest, SigintFinishesTheFileCleanly) {
  const std::string file = TempFile("cli-sigint.mcap");
  std::vector<std::string> args = {"record", "--out", file, "--force",
                                   "--from-oldest"};
  for (const std::string& w : Where(root_)) args.push_back(w);
  const pid_t pid = StartTether(args, "sigint");
  ASSERT_GT(pid, 0);
  auto pub = transport::RawPublisher::Create(samples_.get());
  for (int i = 0; i < 50; ++i) PublishBytes(**pub, SampleMessage(i));
  // Until its stop handler is in (it says "recording" after that) and it
  // has the 50 messages (from the oldest): the summary counts them.
  ASSERT_TRUE(WaitFor([&] {
    return StartedStderr("sigint").find("recording ") != std::string::npos;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ::kill(pid, SIGINT);
  const Outcome o = WaitTether(pid, "sigint", {.timeout_s = 20});
  EXPECT_EQ(o.code, 0) << o.err;
  const Outcome info = RunTether({"log", "info", file, "--json"});
  absl::StatusOr<JsonValue> json = ParseJson(info.out);
  ASSERT_TRUE(json.ok()) << info.out;
  EXPECT_TRUE(json->Find("indexed")->boolean) << "no summary after Ctrl-C";
  EXPECT_EQ(json->Find("messages")->number, 50);
}


// --rate outside the range a replay can time (its delays would overflow)
// is refused with the range, also for numbers > 0 that are too large.
TEST(LogCommands, ReplayRefusesRatesOutsideItsRangeAndSaysTheRange) {
  for (const char* rate :
       {"1e-20", "1e-300", "1e-7", "1e12", "1e300", "0", "-1", "inf", "nan"}) {
    const Outcome o =
        RunTether({"replay", "/nonexistent.mcap", "--rate", rate});
    EXPECT_EQ(o.code, 2) << rate << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr(absl::StrCat("--rate ", rate, " is ")));
    EXPECT_THAT(o.err, HasSubstr("from 1e-06 to 1e+06")) << o.err;
  }
  const Outcome o = RunTether({"replay", "/nonexistent.mcap", "--rate", "x"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("--rate x is not a number"));
}

// --paused with no terminal to read the keys from would wait for ever:
// refused (a test's stdin is not a terminal).
TEST(LogCommands, ReplayPausedWithoutATerminalIsRefused) {
  const Outcome o = RunTether({"replay", "/nonexistent.mcap", "--paused"});
  EXPECT_EQ(o.code, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("--paused needs stdin to be a terminal"));
}

// A replay of a cut log (a killed recorder's, a truncated copy) says that
// it is cut short and how to recover it, even with --quiet; a whole log's
// does not.
TEST_F(LogCommandsTest, ReplayOfATruncatedLogSaysSoAndHowToRecover) {
  const std::string file = TempFile("cli-replay-cut-src.mcap");
  // Small chunks: the cut keeps whole ones, which are replayed.
  ASSERT_EQ(Record(file, 300, {"--chunk-size", "8"}).code, 0);
  std::string bytes;
  {
    std::ifstream in(file, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = TempFile("cli-replay-cut.mcap");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() * 2 / 3);
  for (const std::string& log : {file, cut}) {
    shm::testing::ScopedRoot other;
    std::vector<std::string> args = {"replay", log, "--rate", "20", "--quiet"};
    for (const std::string& w : Where(other)) args.push_back(w);
    const Outcome o = RunTether(args, {.timeout_s = 60});
    ASSERT_EQ(o.code, 0) << o.err;
    EXPECT_THAT(o.out, HasSubstr("replayed "));
    if (log == cut) {
      EXPECT_THAT(o.out, Not(HasSubstr("replayed 0 messages")));
      EXPECT_THAT(o.err, HasSubstr(cut + " is truncated"));
      EXPECT_THAT(o.err, HasSubstr("`tether log recover " + cut));
    } else {
      EXPECT_THAT(o.err, Not(HasSubstr("truncated"))) << o.err;
    }
  }
}


// A second stop signal (Ctrl-C, then a SIGTERM) kills the recorder before it
// finishes the file; it says so on its way out, and how to repair the file.
// The two are different signals sent back to back: two SIGINTs would merge
// into one if both were pending before the recorder ran (a loaded machine),
// and a gap between them lets a quick recorder finish first.
TEST_F(LogCommandsTest, ASecondSigintSaysTheFileIsUnfinishedAndHowToRecover) {
  const std::string file = TempFile("cli-sigint2.mcap");
  std::vector<std::string> args = {"record", "--out", file, "--force"};
  for (const std::string& w : Where(root_)) args.push_back(w);
  const pid_t pid = StartTether(args, "sigint2");
  ASSERT_GT(pid, 0);
  // Until it is recording with its stop handler in (it says so after).
  ASSERT_TRUE(WaitFor([&] {
    return StartedStderr("sigint2").find("recording ") != std::string::npos;
  }));
  ::kill(pid, SIGINT);
  ::kill(pid, SIGTERM);
  const Outcome o = WaitTether(pid, "sigint2", {.timeout_s = 20});
  // It dies of whichever of the two it handled second.
  EXPECT_THAT(o.code, AnyOf(128 + SIGINT, 128 + SIGTERM)) << o.err;
  EXPECT_THAT(o.err, HasSubstr(file + " is unfinished"));
  EXPECT_THAT(o.err, HasSubstr("`tether log recover " + file + " "));
}

TEST(LogCommands, EveryCommandHasHelp) {
  for (std::vector<std::string> args :
       {std::vector<std::string>{"record", "--help"}, {"replay", "--help"},
        {"log", "--help"}, {"log", "info", "--help"}, {"log", "cat", "--help"},
        {"log", "check", "--help"}, {"log", "recover", "--help"},
        {"log", "plot", "--help"}, {"help", "log"}}) {
    const Outcome o = RunTether(args);
    EXPECT_EQ(o.code, 0) << args[0];
    EXPECT_THAT(o.out, HasSubstr("usage: tether ")) << args[0];
  }
  EXPECT_THAT(RunTether({"--help"}).out, HasSubstr("record"));
}

TEST(LogCommands, BadInputFailsWithWhatToDo) {
  Outcome o = RunTether({"log", "info", "/nonexistent/x.mcap"});
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("cannot open /nonexistent/x.mcap"));
  const std::string junk = TempFile("junk.mcap");
  std::ofstream(junk) << "this is not a log";
  o = RunTether({"log", "cat", junk});
  EXPECT_EQ(o.code, 1);
  EXPECT_THAT(o.err, HasSubstr("not an MCAP file"));
  o = RunTether({"replay", junk, "/a=/b"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("/logged/name:=/replayed/name"));
  o = RunTether({"record", "--compression", "lz4", "--out", TempFile("x.mcap")});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("zstd, none"));
  o = RunTether({"log", "plot", junk});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("<field...>"));
  o = RunTether({"log", "frobnicate"});
  EXPECT_EQ(o.code, 2);
  EXPECT_THAT(o.err, HasSubstr("unknown command 'frobnicate'"));
}


}  // namespace
}  // namespace tether::tools::test
