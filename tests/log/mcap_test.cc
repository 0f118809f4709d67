// The MCAP writer and reader: round trips (zstd and none, indexed and
// streaming, filters), damaged files (truncated at many points, corrupt
// chunk bytes, corrupt lengths, corrupt summary, not MCAP at all), files
// that are not regular (FIFOs, full devices) and writes that fail midway.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/compression.h"
#include "log/mcap_reader.h"
#include "log/mcap_writer.h"

namespace tether::log {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

std::vector<std::byte> Bytes(const std::string& s) {
  std::vector<std::byte> b(s.size());
  std::memcpy(b.data(), s.data(), s.size());
  return b;
}

std::string Text(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

std::vector<std::byte> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)),
                std::istreambuf_iterator<char>());
  return Bytes(s);
}

void WriteAll(const std::string& path, std::span<const std::byte> b) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), b.size());
}

struct Written {
  uint16_t channel;
  uint64_t log_time;
  std::string data;
};

// Writes `n` messages over two channels (payload "m<i>" padded to vary
// sizes), a private trailer after every third, small chunks so there are
// many. Returns what was written.
std::vector<Written> WriteFile(const std::string& path, Compression c,
                               int n, uint64_t chunk_size = 512) {
  McapWriterOptions options;
  options.compression = c;
  options.chunk_size = chunk_size;
  options.overwrite = true;
  options.profile = "x-test";
  auto w = McapWriter::Create(path, options);
  EXPECT_TRUE(w.ok()) << w.status();
  auto schema = (*w)->AddSchema("test:Thing", "capnproto", Bytes("schema!"));
  EXPECT_TRUE(schema.ok());
  auto a = (*w)->AddChannel(*schema, "/a", "capnproto", {{"k", "v"}});
  auto b = (*w)->AddChannel(*schema, "/b", "capnproto", {});
  EXPECT_TRUE(a.ok() && b.ok());
  std::vector<Written> out;
  for (int i = 0; i < n; ++i) {
    Written m{static_cast<uint16_t>(i % 3 == 0 ? *b : *a),
              1000 + static_cast<uint64_t>(i) * 10,
              "m" + std::to_string(i) + std::string(i % 17, 'x')};
    std::vector<std::byte> data = Bytes(m.data);
    std::vector<std::byte> trailer;
    if (i % 3 == 0) {
      mcap::AppendRecord(0x80, Bytes("t" + std::to_string(i)), &trailer);
    }
    EXPECT_TRUE((*w)->WriteMessage({m.channel, static_cast<uint32_t>(i),
                                    m.log_time, m.log_time - 1, data},
                                   trailer)
                    .ok());
    out.push_back(m);
  }
  EXPECT_TRUE((*w)->WriteMetadata({"meta", {{"a", "1"}}}).ok());
  EXPECT_TRUE((*w)->Close().ok());
  return out;
}

std::vector<Written> ReadBack(McapReader& r, const McapReadOptions& o = {},
                              std::vector<McapProblem>* problems = nullptr,
                              int* trailers = nullptr) {
  std::vector<Written> out;
  auto it = r.Messages(o);
  McapMessageView v;
  while (it->Next(&v)) {
    out.push_back({v.message.channel_id, v.message.log_time,
                   Text(v.message.data)});
    if (trailers != nullptr && v.trailer.has_value()) {
      EXPECT_EQ(Text(v.trailer->content),
                "t" + std::to_string(v.message.sequence));
      ++*trailers;
    }
  }
  if (problems != nullptr) *problems = it->problems();
  return out;
}

bool SameMessages(const std::vector<Written>& a, const std::vector<Written>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].channel != b[i].channel || a[i].log_time != b[i].log_time ||
        a[i].data != b[i].data) {
      return false;
    }
  }
  return true;
}

// How many of `written` the chunk holds (its time range; times are unique).
size_t InChunk(const std::vector<Written>& written, const mcap::ChunkIndex& c) {
  size_t n = 0;
  for (const Written& m : written) {
    n += m.log_time >= c.message_start_time && m.log_time <= c.message_end_time;
  }
  return n;
}

class McapRoundTrip : public ::testing::TestWithParam<Compression> {};

TEST_P(McapRoundTrip, IndexedAndStreamingReadsGiveBackEveryMessage) {
  const std::string path = TempPath("roundtrip.mcap");
  const std::vector<Written> written = WriteFile(path, GetParam(), 300);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->indexed());
  EXPECT_TRUE((*r)->problems().empty());
  EXPECT_EQ((*r)->header().profile, "x-test");
  ASSERT_EQ((*r)->channels().size(), 2u);
  EXPECT_EQ((*r)->channels().at(1).topic, "/a");
  EXPECT_EQ((*r)->channels().at(1).metadata.at("k"), "v");
  EXPECT_EQ(Text((*r)->schemas().at(1).data), "schema!");
  ASSERT_TRUE((*r)->statistics().has_value());
  EXPECT_EQ((*r)->statistics()->message_count, 300u);
  EXPECT_EQ((*r)->statistics()->channel_message_counts.at(2), 100u);
  EXPECT_GT((*r)->chunk_indexes().size(), 10u);
  ASSERT_EQ((*r)->metadata().size(), 1u);
  EXPECT_EQ((*r)->metadata()[0].metadata.at("a"), "1");

  int trailers = 0;
  std::vector<McapProblem> problems;
  EXPECT_TRUE(SameMessages(ReadBack(**r, {}, &problems, &trailers), written));
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(trailers, 100);
  McapReadOptions scan;
  scan.force_scan = true;
  trailers = 0;
  EXPECT_TRUE(SameMessages(ReadBack(**r, scan, &problems, &trailers), written));
  EXPECT_TRUE(problems.empty());
  EXPECT_EQ(trailers, 100);
}

INSTANTIATE_TEST_SUITE_P(Compressions, McapRoundTrip,
                         ::testing::Values(Compression::kZstd,
                                           Compression::kNone));

TEST(McapReader, TimeRangeAndChannelFilterSkipChunks) {
  const std::string path = TempPath("filter.mcap");
  const std::vector<Written> written = WriteFile(path, Compression::kZstd, 300);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok());
  McapReadOptions o;
  o.start_time = 2000;
  o.end_time = 2500;
  o.channels = {2};
  std::vector<Written> want;
  for (const Written& m : written) {
    if (m.log_time >= 2000 && m.log_time <= 2500 && m.channel == 2) {
      want.push_back(m);
    }
  }
  auto it = (*r)->Messages(o);
  std::vector<Written> got;
  McapMessageView v;
  while (it->Next(&v)) {
    got.push_back({v.message.channel_id, v.message.log_time,
                   Text(v.message.data)});
  }
  EXPECT_TRUE(SameMessages(got, want));
  EXPECT_LT(it->chunks_read(), (*r)->chunk_indexes().size() / 2);
}

TEST(McapWriter, EmptyFileIsValidAndIndexed) {
  const std::string path = TempPath("empty.mcap");
  {
    McapWriterOptions options;
    options.overwrite = true;
    auto w = McapWriter::Create(path, options);
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Close().ok());
  }
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE((*r)->indexed());
  EXPECT_TRUE((*r)->problems().empty());
  EXPECT_EQ((*r)->statistics()->message_count, 0u);
  EXPECT_TRUE(ReadBack(**r).empty());
}

TEST(McapWriter, RefusesToOverwriteAnExistingFile) {
  const std::string path = TempPath("exists.mcap");
  WriteAll(path, Bytes("x"));
  auto w = McapWriter::Create(path, {});
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::IsAlreadyExists(w.status()));
  EXPECT_THAT(std::string(w.status().message()), HasSubstr(path));
}

TEST(McapWriter, RejectsUnknownChannelsAndBadTrailers) {
  const std::string path = TempPath("bad.mcap");
  McapWriterOptions options;
  options.overwrite = true;
  auto w = McapWriter::Create(path, options);
  ASSERT_TRUE(w.ok());
  EXPECT_FALSE((*w)->WriteMessage({7, 0, 1, 1, {}}).ok());
  auto c = (*w)->AddChannel(0, "/x", "json", {});
  ASSERT_TRUE(c.ok());
  std::vector<std::byte> not_private;
  mcap::AppendRecord(0x05, Bytes("no"), &not_private);
  EXPECT_FALSE((*w)->WriteMessage({*c, 0, 1, 1, {}}, not_private).ok());
  EXPECT_FALSE((*w)->AddChannel(9, "/y", "json", {}).ok());
}

// Runs `body` in a child process (its exit code, 0 for success) that an
// alarm kills after `seconds`: for a call that must not block (a
// regression then fails the test instead of hanging it) or a process-wide
// limit. Returns the wait status.
int InChild(const std::function<int()>& body, unsigned seconds = 10) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::alarm(seconds);
    ::_exit(body());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

std::string Fifo(const std::string& name) {
  const std::string path = TempPath(name);
  ::unlink(path.c_str());
  EXPECT_EQ(::mkfifo(path.c_str(), 0644), 0);
  return path;
}

TEST(McapReader, AFifoIsNotARegularFileAndIsNotWaitedOn) {
  const std::string fifo = Fifo("reader.fifo");
  const int status = InChild([&] {
    auto r = McapReader::Open(fifo);
    const bool ok = absl::IsInvalidArgument(r.status()) &&
                    std::string(r.status().message())
                            .rfind(fifo + " is not a regular file (it is a FIFO)",
                                   0) == 0;
    if (!ok) fprintf(stderr, "%s\n", r.status().ToString().c_str());
    return ok ? 0 : 1;
  });
  EXPECT_TRUE(WIFEXITED(status))
      << "blocked in open(): killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A folder given as a log says it is one and what to give instead.
TEST(McapReader, AFolderSaysItIsOneAndWhatToGive) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = tmp != nullptr ? tmp : "/tmp";
  auto r = McapReader::Open(dir);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("is not a regular file (it is a directory)"));
  EXPECT_THAT(std::string(r.status().message()),
              ::testing::HasSubstr("give the path of a .mcap log"));
}

TEST(McapWriter, AFifoNobodyReadsIsRefusedNotWaitedOn) {
  const std::string fifo = Fifo("writer.fifo");
  const int status = InChild([&] {
    McapWriterOptions options;
    options.overwrite = true;
    auto w = McapWriter::Create(fifo, options);
    const bool ok = absl::IsFailedPrecondition(w.status()) &&
                    w.status().message().find("FIFO that nobody reads") !=
                        std::string::npos;
    if (!ok) fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return ok ? 0 : 1;
  });
  EXPECT_TRUE(WIFEXITED(status))
      << "blocked in open(): killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(McapWriter, AFullDeviceFailsAtCreateAndIsLeftAlone) {
  McapWriterOptions options;
  options.overwrite = true;
  auto w = McapWriter::Create("/dev/full", options);
  ASSERT_FALSE(w.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(w.status())) << w.status();
  EXPECT_THAT(std::string(w.status().message()), HasSubstr("disk is full"));
  struct stat st;
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

// A write that fails midway (a filesystem filling up; here RLIMIT_FSIZE in a
// child process) leaves the chunks written before it readable: stats()
// counts exactly the messages a reader finds there, per channel, apart from
// those accepted but lost, and file_bytes is the file's size.
TEST(McapWriter, AfterAWriteErrorWrittenCountsWhatAReaderFinds) {
  const std::string path = TempPath("efbig.mcap");
  const int status = InChild([&] {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, nullptr);
    const rlimit limit{20000, 20000};
    if (::setrlimit(RLIMIT_FSIZE, &limit) != 0) return 2;
    McapWriterOptions options;
    options.overwrite = true;
    options.compression = Compression::kNone;
    options.chunk_size = 3000;
    auto w = McapWriter::Create(path, options);
    if (!w.ok()) return 3;
    auto a = (*w)->AddChannel(0, "/a", "raw", {});
    auto b = (*w)->AddChannel(0, "/b", "raw", {});
    if (!a.ok() || !b.ok()) return 4;
    absl::Status s;
    uint64_t accepted = 0;
    for (int i = 0; s.ok() && i < 10000; ++i) {
      const std::vector<std::byte> data = Bytes(std::string(50 + i % 70, 'd'));
      s = (*w)->WriteMessage({i % 3 == 0 ? *b : *a, static_cast<uint32_t>(i),
                              1000u + i, 1000u + i, data});
      accepted += s.ok();
    }
    if (s.ok() || (*w)->Close().ok()) return 5;
    const McapWriterStats stats = (*w)->stats();
    auto r = McapReader::Open(path);
    if (!r.ok()) return 6;
    std::map<uint16_t, McapWriterStats::ChannelCount> found;
    for (const Written& m : ReadBack(**r)) {
      ++found[m.channel].messages;
      found[m.channel].bytes += m.data.size();
    }
    struct stat st;
    ::stat(path.c_str(), &st);
    bool ok = stats.written_messages > 0 && stats.written_messages < accepted &&
              stats.messages == accepted &&
              stats.file_bytes == static_cast<uint64_t>(st.st_size) &&
              found.size() == stats.written.size();
    uint64_t sum = 0;
    for (const auto& [channel, count] : stats.written) {
      ok = ok && found[channel].messages == count.messages &&
           found[channel].bytes == count.bytes;
      sum += count.messages;
    }
    ok = ok && sum == stats.written_messages;
    fprintf(stderr,
            "accepted %lu, written %lu in %lu chunks, %lu bytes "
            "(file %ld)\n",
            accepted, stats.written_messages, stats.chunks, stats.file_bytes,
            static_cast<long>(st.st_size));
    return ok ? 0 : 1;
  });
  ASSERT_TRUE(WIFEXITED(status)) << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// A file that cannot even take its header (a full disk) is not left behind.
TEST(McapWriter, CreateLeavesNoFileWhenTheHeaderCannotBeWritten) {
  const std::string path = TempPath("no-header.mcap");
  ::unlink(path.c_str());
  const int status = InChild([&] {
    struct sigaction ignore = {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGXFSZ, &ignore, nullptr);
    const rlimit tiny{10, 10};
    if (::setrlimit(RLIMIT_FSIZE, &tiny) != 0) return 2;
    McapWriterOptions options;
    options.overwrite = true;
    auto w = McapWriter::Create(path, options);
    if (w.ok()) return 3;
    fprintf(stderr, "%s\n", w.status().ToString().c_str());
    return absl::IsResourceExhausted(w.status()) ? 0 : 4;
  });
  ASSERT_TRUE(WIFEXITED(status)) << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  EXPECT_NE(::access(path.c_str(), F_OK), 0) << path << " was left behind";
}

TEST(Decompress, AnUnknownCompressionSaysWhatMcapCallsUncompressed) {
  std::vector<std::byte> out;
  absl::Status s = Decompress("none", Bytes("abc"), 3, &out);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(R"(compression "none" is not supported)"));
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(R"(the empty string "", not "none")"));
  // The file's bytes, escaped.
  s = Decompress(std::string("z\x01\n\xff", 4), Bytes("abc"), 3, &out);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(R"(compression "z\x01\n\xff" is not)"));
  EXPECT_THAT(std::string(s.message()), Not(HasSubstr("not \"none\"")));
}

TEST(McapReader, NotMcapIsAnErrorThatSaysSo) {
  const std::string path = TempPath("notmcap.mcap");
  WriteAll(path, Bytes("hello, this is not an MCAP file at all"));
  auto r = McapReader::Open(path);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not an MCAP file"));
  auto missing = McapReader::Open(TempPath("does-not-exist.mcap"));
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
}

// Every cut point keeps exactly the messages of the chunks that end before
// it, names the offset of the damage, and never fails to open once the
// header is whole.
TEST(McapReader, TruncatedFilesYieldEveryIntactChunk) {
  const std::string path = TempPath("full.mcap");
  const std::vector<Written> written = WriteFile(path, Compression::kZstd, 200);
  const std::vector<std::byte> full = ReadAll(path);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok());
  const std::vector<mcap::ChunkIndex> chunks = (*r)->chunk_indexes();
  // Messages per chunk, from an intact read.
  std::map<uint64_t, size_t> per_chunk;
  {
    auto it = (*r)->Messages();
    McapMessageView v;
    while (it->Next(&v)) ++per_chunk[v.chunk_offset];
  }
  const std::string cut_path = TempPath("cut.mcap");
  for (uint64_t cut = 40; cut < full.size(); cut += 97) {
    WriteAll(cut_path, std::span<const std::byte>(full).first(cut));
    auto cr = McapReader::Open(cut_path);
    ASSERT_TRUE(cr.ok()) << "cut at " << cut << ": " << cr.status();
    size_t expected = 0;
    for (const mcap::ChunkIndex& c : chunks) {
      if (c.chunk_start_offset + c.chunk_length > cut) break;
      expected += per_chunk[c.chunk_start_offset];
    }
    std::vector<McapProblem> problems;
    const std::vector<Written> got = ReadBack(**cr, {}, &problems);
    ASSERT_EQ(got.size(), expected) << "cut at " << cut;
    EXPECT_TRUE(SameMessages(
        got, std::vector<Written>(written.begin(), written.begin() + expected)));
    if (cut < full.size() - 200) {
      EXPECT_FALSE((*cr)->indexed());
      ASSERT_FALSE((*cr)->problems().empty()) << "cut at " << cut;
      EXPECT_THAT((*cr)->problems()[0].ToString(), HasSubstr("offset "));
    }
  }
}

TEST(McapReader, CorruptChunkBytesLoseOnlyThatChunk) {
  const std::string path = TempPath("corrupt.mcap");
  const std::vector<Written> written = WriteFile(path, Compression::kNone, 200);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok());
  const mcap::ChunkIndex victim = (*r)->chunk_indexes()[3];
  std::vector<std::byte> bytes = ReadAll(path);
  // A byte in the middle of the chunk's records.
  bytes[victim.chunk_start_offset + victim.chunk_length - 20] ^= std::byte{0x5a};
  const std::string bad = TempPath("corrupt-bad.mcap");
  WriteAll(bad, bytes);
  auto br = McapReader::Open(bad);
  ASSERT_TRUE(br.ok());
  for (bool scan : {false, true}) {
    McapReadOptions o;
    o.force_scan = scan;
    std::vector<McapProblem> problems;
    const std::vector<Written> got = ReadBack(**br, o, &problems);
    ASSERT_EQ(problems.size(), 1u);
    EXPECT_EQ(problems[0].offset, victim.chunk_start_offset);
    EXPECT_THAT(problems[0].what, HasSubstr("CRC mismatch"));
    // Everything but that chunk's messages.
    const size_t lost = InChunk(written, victim);
    EXPECT_EQ(got.size(), written.size() - lost);
  }
}

TEST(McapReader, CorruptLengthIsSkippedByResynchronising) {
  const std::string path = TempPath("length.mcap");
  const std::vector<Written> written = WriteFile(path, Compression::kZstd, 200);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok());
  const mcap::ChunkIndex victim = (*r)->chunk_indexes()[2];
  std::vector<std::byte> bytes = ReadAll(path);
  // The chunk record's length field: huge.
  mcap::StoreU64(bytes.data() + victim.chunk_start_offset + 1,
                 0x0000ffffffffffffull);
  // And no summary (as after a crash), so the scan must cope.
  bytes.resize(bytes.size() - 30);
  const std::string bad = TempPath("length-bad.mcap");
  WriteAll(bad, bytes);
  auto br = McapReader::Open(bad);
  ASSERT_TRUE(br.ok());
  EXPECT_FALSE((*br)->indexed());
  std::vector<McapProblem> problems;
  const std::vector<Written> got = ReadBack(**br, {}, &problems);
  ASSERT_FALSE((*br)->problems().empty());
  bool named = false;
  for (const McapProblem& p : (*br)->problems()) {
    named |= p.offset == victim.chunk_start_offset;
  }
  EXPECT_TRUE(named);
  const size_t lost = InChunk(written, victim);
  EXPECT_EQ(got.size(), written.size() - lost);
}

TEST(McapReader, CorruptSummaryFallsBackToScanning) {
  const std::string path = TempPath("summary.mcap");
  const std::vector<Written> written = WriteFile(path, Compression::kZstd, 100);
  std::vector<std::byte> bytes = ReadAll(path);
  auto r = McapReader::Open(path);
  ASSERT_TRUE(r.ok());
  bytes[(*r)->footer()->summary_start + 20] ^= std::byte{1};
  const std::string bad = TempPath("summary-bad.mcap");
  WriteAll(bad, bytes);
  auto br = McapReader::Open(bad);
  ASSERT_TRUE(br.ok());
  EXPECT_FALSE((*br)->indexed());
  ASSERT_EQ((*br)->problems().size(), 1u);
  EXPECT_THAT((*br)->problems()[0].what, HasSubstr("summary CRC mismatch"));
  EXPECT_EQ((*br)->channels().size(), 2u);
  EXPECT_TRUE(SameMessages(ReadBack(**br), written));
}

}  // namespace
}  // namespace tether::log
