// The log commands through the real `tether` binary, as a user runs them:
// record (with --duration and stopped by SIGINT), log info/cat/check/
// recover/plot, replay, their --help, and bad input that must fail with a
// message saying what to do.
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/mcap_format.h"
#include "log/mcap_reader.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"
#include "tests/tools/json_test_parser.h"
#include "tests/tools/run_tether.h"


namespace tether::tools::test {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::log::testing;

class LogCommandsTest : public ::testing::Test {
 protected:
  LogCommandsTest() {
    RegisterTestTypes(schemas_);
    samples_ = MakeChannel(root_.options(), schemas_, "/cli/samples", kSampleType,
                           {.max_size = 4096, .depth = 1024});
  }
  std::vector<std::string> Where(const shm::testing::ScopedRoot& root) {
    return {"--root", root.root(), "--instance", root.options().instance};
  }
  // Records /cli/samples while `count` messages are sent (`pause_us` apart),
  // with `extra` recorder arguments. The recorder is stopped with SIGINT
  // once every message is sent and it is recording (its stop handler is in
  // then), and its stop drains once more: so it has them all however slow
  // the machine is (the queue holds 1024; it reads from the oldest, so it
  // may start before or after the first send). No --duration: a fixed one
  // could end before a loaded machine had sent them all. run.timeout_s
  // (default 60 s here) bounds a recorder that hangs.
  Outcome Record(const std::string& out, int count,
                 const std::vector<std::string>& extra = {},
                 RunOptions run = {}, int pause_us = 1000) {
    if (run.timeout_s == 0) run.timeout_s = 60;
    std::vector<std::string> args = {"record", "--out", out, "--force",
                                     "--from-oldest", "--period", "5"};
    for (const std::string& w : Where(root_)) args.push_back(w);
    for (const std::string& e : extra) args.push_back(e);
    // Unique in the binary: every test of it shares TEST_TMPDIR, and a tag
    // reused would let the wait below read an earlier run's "recording".
    static int records = 0;
    const std::string tag = "record-" + std::to_string(++records);
    const pid_t pid = StartTether(args, tag, run);
    if (pid <= 0) return {};  // StartTether said why (a test failure)
    std::thread publisher([&] {
      auto pub = transport::RawPublisher::Create(samples_.get());
      for (int i = 0; i < count; ++i) {
        PublishBytes(**pub, SampleMessage(i));
        std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
      }
    });
    publisher.join();
    // A recorder that failed before it said so has exited already: the
    // signal then goes to an unreaped child and its outcome says why.
    (void)WaitFor([&] {
      return StartedStderr(tag).find("recording ") != std::string::npos;
    }, 30);
    ::kill(pid, SIGINT);
    return WaitTether(pid, tag, run);
  }

  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::ChannelHandle> samples_;
};

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

// A FIFO given as the log is refused at once by every command that reads
// logs, never waited on in open() until a writer comes; given as an output
// (nobody reads it) it is refused too. Each run has a timeout, so a
// regression fails the test (saying whether SIGTERM still stopped it)
// instead of hanging it.
TEST_F(LogCommandsTest, AFifoIsRefusedAtOnceNotWaitedOn) {
  const std::string fifo = TempFile("log.fifo");
  ::unlink(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  const RunOptions run{.timeout_s = 10};
  shm::testing::ScopedRoot other;
  std::vector<std::string> replay = {"replay", fifo};
  for (const std::string& w : Where(other)) replay.push_back(w);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"log", "info", fifo},
        {"log", "check", fifo},
        {"log", "cat", fifo},
        {"log", "plot", fifo, "/cli/samples.stamp", "--out",
         TempFile("fifo.png")},
        {"log", "recover", fifo, TempFile("fifo-fixed.mcap"), "--force"},
        replay}) {
    const std::string what = absl::StrJoin(args, " ");
    const Outcome o = RunTether(args, run);
    EXPECT_FALSE(o.timed_out)
        << what << " blocked on the FIFO"
        << (o.killed ? " and ignored SIGTERM" : " (SIGTERM ended it)");
    EXPECT_EQ(o.code, 1) << what << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr(fifo + " is not a regular file")) << what;
  }
  const std::string log = TempFile("fifo-src.mcap");
  ASSERT_EQ(Record(log, 20).code, 0);
  std::vector<std::string> record = {"record",  "--out",      fifo,
                                     "--force", "--duration", "1"};
  for (const std::string& w : Where(root_)) record.push_back(w);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"log", "recover", log, fifo, "--force"},
        record}) {
    const std::string what = absl::StrJoin(args, " ");
    const Outcome o = RunTether(args, run);
    EXPECT_FALSE(o.timed_out)
        << what << " blocked on the FIFO"
        << (o.killed ? " and ignored SIGTERM" : " (SIGTERM ended it)");
    EXPECT_EQ(o.code, 1) << what << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr("FIFO that nobody reads")) << what;
  }
}

// The recorder's summary for a channel: MESSAGES (in the file), MISSED and,
// after a write error, UNWRITTEN.
struct SummaryRow {
  uint64_t written = 0, missed = 0, unwritten = 0;
  bool has_unwritten = false;
};
bool ParseSummaryRow(const std::string& out, const std::string& channel,
                     SummaryRow* row) {
  std::smatch m;
  const std::regex re(channel +
                      R"(\s+\S+\s+(\d+)\s+[0-9.]+ MB\s+(\d+)( +(\d+))?\n)");
  if (!std::regex_search(out, m, re)) return false;
  row->written = std::stoull(m[1]);
  row->missed = std::stoull(m[2]);
  row->has_unwritten = m[4].matched;
  row->unwritten = row->has_unwritten ? std::stoull(m[4]) : 0;
  return true;
}

uint64_t LogInfoMessages(const std::string& file) {
  const Outcome info = RunTether({"log", "info", file, "--json"});
  absl::StatusOr<JsonValue> json = ParseJson(info.out);
  EXPECT_TRUE(json.ok()) << info.out << info.err;
  return json.ok() ? static_cast<uint64_t>(json->Find("messages")->number) : 0;
}

// A full disk (here a file size limit: a write fails after what fits, as
// when a filesystem fills up): the summary counts the messages in the
// file's whole chunks, what `log info` finds there, apart from those read
// but lost to the error (UNWRITTEN), says the file's true size, and calls
// readable only what is.
TEST_F(LogCommandsTest, AWriteErrorIsCountedApartFromWhatReachedTheFile) {
  const std::vector<std::string> small_chunks = {"--compression", "none",
                                                 "--chunk-size", "32"};
  const std::string file = TempFile("cli-full.mcap");
  const Outcome rec =
      Record(file, 1000, small_chunks,
             {.timeout_s = 30, .file_size_limit = 150'000}, /*pause_us=*/200);
  ASSERT_FALSE(rec.timed_out);
  EXPECT_EQ(rec.code, 1) << rec.out << rec.err;
  EXPECT_THAT(rec.err, HasSubstr("File too large"));
  SummaryRow row;
  ASSERT_TRUE(ParseSummaryRow(rec.out, "/cli/samples", &row)) << rec.out;
  ASSERT_TRUE(row.has_unwritten) << rec.out;
  EXPECT_GT(row.written, 0u) << rec.out;
  EXPECT_GT(row.unwritten, 0u) << rec.out;
  EXPECT_LE(row.written + row.unwritten + row.missed, 1000u) << rec.out;
  EXPECT_THAT(rec.out,
              HasSubstr(absl::StrCat("recorded ", row.written, " messages")));
  EXPECT_THAT(rec.out, HasSubstr(absl::StrCat("LOST ", row.unwritten,
                                              " messages to the write error")));
  EXPECT_EQ(LogInfoMessages(file), row.written) << rec.out;
  const uint64_t size = std::filesystem::file_size(file);
  EXPECT_THAT(rec.out,
              HasSubstr(absl::StrFormat("(%.2f MB on disk)", size / 1e6)));
  EXPECT_THAT(rec.err, HasSubstr("readable in " + file));
  EXPECT_THAT(rec.err, HasSubstr("tether log recover " + file));

  // A limit that the first chunk does not fit under: nothing recorded, and
  // no claim that anything is readable.
  const std::string good = TempFile("cli-full-good.mcap");
  ASSERT_EQ(Record(good, 50, small_chunks).code, 0);
  uint64_t first_chunk = 0;
  {
    auto reader = log::McapReader::Open(good);
    ASSERT_TRUE(reader.ok()) << reader.status();
    ASSERT_FALSE((*reader)->chunk_indexes().empty());
    first_chunk = (*reader)->chunk_indexes()[0].chunk_start_offset;
  }
  const std::string empty = TempFile("cli-full-empty.mcap");
  const Outcome none =
      Record(empty, 1000, small_chunks,
             {.timeout_s = 30, .file_size_limit = first_chunk + 4000}, 200);
  EXPECT_EQ(none.code, 1) << none.out << none.err;
  ASSERT_TRUE(ParseSummaryRow(none.out, "/cli/samples", &row)) << none.out;
  EXPECT_EQ(row.written, 0u) << none.out;
  EXPECT_GT(row.unwritten, 0u) << none.out;
  EXPECT_THAT(none.out, HasSubstr("recorded 0 messages"));
  EXPECT_THAT(none.err, HasSubstr("no recorded message reached " + empty));
  EXPECT_THAT(none.err, Not(HasSubstr("readable")));
  EXPECT_EQ(LogInfoMessages(empty), 0u);
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

// Points the first chunk index of `path` one byte past its chunk and zeroes
// the footer's summary CRC (0: not checked): the summary stays usable but
// indexes something that is not a chunk.
void MisindexFirstChunk(const std::string& path) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto reader = log::McapReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_TRUE((*reader)->indexed());
  ASSERT_GE((*reader)->chunk_indexes().size(), 2u);
  const uint64_t summary = (*reader)->footer()->summary_start;
  std::byte* data = reinterpret_cast<std::byte*>(bytes.data());
  std::span<const std::byte> rest(data + summary, bytes.size() - summary);
  uint64_t pos = 0;
  log::mcap::RecordView rec;
  bool patched = false;
  while (!patched && log::mcap::SplitRecord(rest, &pos, &rec) ==
                         log::mcap::SplitStatus::kOk) {
    if (rec.opcode != static_cast<uint8_t>(log::mcap::Opcode::kChunkIndex)) {
      continue;
    }
    // message_start_time, message_end_time, then chunk_start_offset.
    std::byte* offset =
        data + summary + rec.offset + log::mcap::kRecordHeaderSize + 16;
    log::mcap::StoreU64(offset, log::mcap::LoadU64(offset) + 1);
    patched = true;
  }
  ASSERT_TRUE(patched);
  std::memset(data + bytes.size() - log::mcap::kMagicSize - 4, 0, 4);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// The advice for a chunk index that points at no chunk names options that
// exist: `log info --scan` and `log cat --scan` read every message anyway.
TEST_F(LogCommandsTest, ABadChunkIndexIsReadWithScanAsTheAdviceSays) {
  const std::string file = TempFile("cli-misindexed.mcap");
  ASSERT_EQ(Record(file, 300, {"--chunk-size", "8"}).code, 0);
  const uint64_t all = LogInfoMessages(file);
  ASSERT_EQ(all, 300u);
  MisindexFirstChunk(file);
  const Outcome info = RunTether({"log", "info", file});
  EXPECT_THAT(info.out, HasSubstr("not a chunk of the indexed length"));
  EXPECT_THAT(info.out, HasSubstr("`tether log info --scan`"));
  EXPECT_LT(LogInfoMessages(file), all);
  const Outcome scanned = RunTether({"log", "info", file, "--scan", "--json"});
  ASSERT_EQ(scanned.code, 0) << scanned.err;
  absl::StatusOr<JsonValue> json = ParseJson(scanned.out);
  ASSERT_TRUE(json.ok()) << scanned.out;
  EXPECT_EQ(json->Find("messages")->number, all);
  EXPECT_THAT(scanned.out, Not(HasSubstr("not a chunk")));
  const Outcome cat = RunTether({"log", "cat", file, "--scan"});
  EXPECT_EQ(cat.code, 0) << cat.err;
  EXPECT_EQ(
      std::vector<std::string>(absl::StrSplit(cat.out, '\n', absl::SkipEmpty()))
          .size(),
      all);
}

// Garbage over the middle of the log's first chunk: its records are lost.
void CorruptFirstChunk(const std::string& path) {
  auto reader = log::McapReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  ASSERT_GE((*reader)->chunk_indexes().size(), 2u);
  const log::mcap::ChunkIndex& first = (*reader)->chunk_indexes().front();
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(first.chunk_start_offset +
                                      first.chunk_length / 2));
  f << std::string(32, '\xff');
}

// What a log tool says when it has less than the user asked for: a check
// with a chunk lost never says "all messages decode" as if it read them
// all; --count 0 prints none; a plot of a range with no message is an
// error, not an empty picture; a replay stopped by a signal says where it
// stopped and exits 130, so `replay && next` does not go on.
TEST_F(LogCommandsTest, ToolsSayWhenTheyHadLessThanAskedFor) {
  const std::string file = TempFile("cli-less.mcap");
  ASSERT_EQ(Record(file, 300, {"--chunk-size", "8"}).code, 0);

  const Outcome none = RunTether({"log", "cat", file, "--count", "0"});
  EXPECT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(none.out, "");

  const std::string png = TempFile("cli-less.png");
  std::filesystem::remove(png);
  const Outcome empty = RunTether({"log", "plot", file, "/cli/samples.stamp",
                                   "--start", "1000", "--out", png});
  EXPECT_EQ(empty.code, 1) << empty.err;
  EXPECT_THAT(empty.err, HasSubstr("no message with that field was sent in "
                                   "1000.000 to the end s"));
  EXPECT_THAT(empty.err, HasSubstr("nothing written"));
  EXPECT_FALSE(std::filesystem::exists(png));

  // 300 messages 1 ms apart, played 20 times slower: about 6 s.
  shm::testing::ScopedRoot other;
  std::vector<std::string> args = {"replay", file, "--rate", "0.05", "--quiet"};
  for (const std::string& w : Where(other)) args.push_back(w);
  const pid_t pid = StartTether(args, "replay-cut");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(WaitFor([&] {
    return StartedStderr("replay-cut").find("replaying") != std::string::npos;
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  ::kill(pid, SIGINT);
  const Outcome cut = WaitTether(pid, "replay-cut", {.timeout_s = 30});
  EXPECT_EQ(cut.code, 130) << cut.out << cut.err;
  EXPECT_THAT(cut.out, HasSubstr("stopped (signal) at +"));
  EXPECT_THAT(cut.out, HasSubstr("the rest of the log was not played"));

  const std::string damaged = TempFile("cli-less-damaged.mcap");
  std::filesystem::copy_file(file, damaged,
                             std::filesystem::copy_options::overwrite_existing);
  CorruptFirstChunk(damaged);
  const Outcome check = RunTether({"log", "check", damaged});
  EXPECT_EQ(check.code, 1) << check.out;
  EXPECT_THAT(check.out, HasSubstr("FAIL  offset "));
  EXPECT_THAT(check.out, HasSubstr("only the "));
  EXPECT_THAT(check.out, HasSubstr("the messages of the others are lost"));
  // On the intact log the OK lines claim everything, unqualified.
  EXPECT_THAT(RunTether({"log", "check", file}).out,
              Not(HasSubstr("only the ")));

  const Outcome chunk =
      RunTether({"record", "--chunk-size", "0", "--out", TempFile("x.mcap")});
  EXPECT_EQ(chunk.code, 2);
  EXPECT_THAT(chunk.err, HasSubstr("--chunk-size must be at least 1 KB"));
}

// `log recover` onto a full disk fails and leaves no output behind (a
// partial one would look like a smaller recovery); onto a full device it
// fails too and leaves the device alone.
TEST_F(LogCommandsTest, RecoverOntoAFullDiskLeavesNoOutput) {
  const std::string file = TempFile("cli-recover-full-src.mcap");
  ASSERT_EQ(Record(file, 100).code, 0);
  const std::string out = TempFile("cli-recover-full.mcap");
  // (The limit holds for the command's stderr file too: above its text.)
  for (uint64_t limit : {uint64_t{2048}, uint64_t{8192}}) {
    ::unlink(out.c_str());
    const Outcome o = RunTether({"log", "recover", file, out, "--force"},
                                {.timeout_s = 30, .file_size_limit = limit});
    EXPECT_EQ(o.code, 1) << o.out << o.err;
    EXPECT_THAT(o.err, HasSubstr("File too large"));
    EXPECT_FALSE(std::filesystem::exists(out))
        << "limit " << limit << ": left " << std::filesystem::file_size(out)
        << " bytes in " << out;
  }
  const Outcome full =
      RunTether({"log", "recover", file, "/dev/full", "--force"});
  EXPECT_EQ(full.code, 1) << full.err;
  EXPECT_THAT(full.err, HasSubstr("No space left on device"));
  struct stat st;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
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
