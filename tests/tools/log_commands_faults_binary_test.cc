// The log commands through the real `tether` binary when things go wrong:
// a FIFO given as a log or an output is refused at once, a write error
// (a full disk) is counted apart from what reached the file, a bad chunk
// index is read with --scan as the advice says, tools say when they had
// less than asked for (a lost chunk, an empty range, a stopped replay),
// and `log recover` onto a full disk leaves no output.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <span>
#include <string>
#include <thread>
#include <vector>

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
#include "tests/tools/log_commands_test_fixture.h"
#include "tests/tools/run_tether.h"

namespace tether::tools::test {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::log::testing;

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


}  // namespace
}  // namespace tether::tools::test
