// Writes the seeds of the fuzzers whose inputs are binary formats made by
// our own writers (run once by hand; the fuzzers grow the corpora):
//   bazel run //tests/fuzz:seed_writer -- $PWD/tests/fuzz/corpus
// mcap_log/: small tether logs made by the real writer (zstd and
// uncompressed chunks, tether channels with their schemas and context
// records, a loss record, a channel from another writer, metadata), and
// damaged copies (cut before the summary, a flipped summary byte, a flipped
// chunk byte).
// net_announce/: a remote bridge's announcement of a LogGap channel (its
// real CodeGeneratorRequest) followed by frames' payloads, in the layout
// net_announce_fuzzer.cc reads.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "log/log_format.h"
#include "log/mcap_writer.h"
#include "transport/schema_registry.h"

namespace lg = tether::log;

namespace {

bool Write(const std::string& path, lg::Compression compression) {
  lg::McapWriterOptions o;
  o.compression = compression;
  o.chunk_size = 600;
  o.profile = lg::kTetherProfile;
  o.overwrite = true;
  auto w = lg::McapWriter::Create(path, o);
  if (!w.ok()) return false;
  auto schema = (*w)->AddSchema(lg::GapTypeName(), lg::kCapnpEncoding,
                                lg::GapSchema());
  if (!schema.ok()) return false;
  lg::ChannelDescription d;
  d.name = lg::kGapChannel;
  d.type_id = lg::GapTypeId();
  d.type_name = lg::GapTypeName();
  d.max_size = 256;
  d.frequency_hz = 100;
  d.queue_depth = 8;
  d.max_publishers = 1;
  d.max_pinned = 0;
  d.schema = lg::GapSchema();
  auto gaps = (*w)->AddChannel(*schema, d.name, lg::kCapnpEncoding,
                               lg::ChannelMetadata(d));
  d.name = "/robot/events";
  auto events = (*w)->AddChannel(*schema, d.name, lg::kCapnpEncoding,
                                 lg::ChannelMetadata(d));
  auto other = (*w)->AddChannel(0, "/other/json", "json", {});
  if (!gaps.ok() || !events.ok() || !other.ok()) return false;
  if (!(*w)->WriteMetadata({lg::kRecordingMetadata,
                            {{"instance", "seed"}, {"host", "fuzz"}}})
           .ok()) {
    return false;
  }
  for (uint32_t i = 0; i < 12; ++i) {
    lg::GapRecord g;
    g.channel = "/robot/state";
    g.missed = i + 1;
    g.first_queue_index = 100 * i;
    g.last_queue_index = 100 * i + i;
    g.reason = static_cast<lg::GapRecord::Reason>(i % 4);
    g.detected_monotonic_ns = 1'000'000 * i;
    std::vector<std::byte> bytes = lg::EncodeGap(g);
    lg::mcap::Message m;
    m.channel_id = i % 3 == 0 ? *gaps : *events;
    m.sequence = i;
    m.log_time = 1'700'000'000'000'000'000ull + 1'000'000ull * i;
    m.publish_time = m.log_time - 1000;
    m.data = bytes;
    lg::MessageContextRecord c;
    c.channel_id = m.channel_id;
    c.queue_index = i;
    c.monotonic_send_ns = 5'000'000'000 + 1'000'000ll * (11 - i % 5);
    c.monotonic_receive_ns = c.monotonic_send_ns + 20'000;
    c.publisher_pid = 4242;
    c.publisher_index = 0;
    c.publisher_sequence = i;
    std::vector<std::byte> trailer;
    lg::AppendContextRecord(c, &trailer);
    if (!(*w)->WriteMessage(m, trailer).ok()) return false;
    if (i % 4 == 1) {
      std::string json = "{\"i\": " + std::to_string(i) + "}";
      lg::mcap::Message j;
      j.channel_id = *other;
      j.sequence = i;
      j.log_time = m.log_time + 1;
      j.publish_time = m.log_time;
      j.data = {reinterpret_cast<const std::byte*>(json.data()), json.size()};
      if (!(*w)->WriteMessage(j).ok()) return false;
    }
  }
  if (!(*w)->WriteMetadata({lg::kSummaryMetadata, {{"messages", "16"}}})
           .ok()) {
    return false;
  }
  return (*w)->Close().ok();
}

// net_announce_fuzzer.cc's layout, little-endian.
void PutUint(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

std::string Announcement(uint8_t flags, uint8_t name, uint32_t payloads) {
  std::string s;
  PutUint(&s, flags, 1);
  PutUint(&s, name, 1);
  PutUint(&s, lg::GapTypeId(), 8);
  PutUint(&s, lg::GapTypeName().size(), 1);
  s += lg::GapTypeName();
  PutUint(&s, 256 - 8, 2);  // max size 256
  PutUint(&s, 100, 2);      // Hz
  PutUint(&s, 8 - 1, 1);    // depth 8
  PutUint(&s, 1, 1);        // publishers
  PutUint(&s, 2, 1);        // pinned
  // The blob as a tether channel carries it (the bridge refuses others).
  tether::transport::SchemaRegistry registry;
  std::vector<std::byte> schema;
  if (registry.AddCodeGeneratorRequest(lg::GapSchema(), lg::GapTypeId()).ok()) {
    auto canonical = registry.CodeGeneratorRequestFor(lg::GapTypeId());
    if (canonical.ok()) schema = *canonical;
  }
  PutUint(&s, schema.size(), 2);
  s.append(reinterpret_cast<const char*>(schema.data()), schema.size());
  for (uint32_t i = 0; i < payloads; ++i) {
    lg::GapRecord g;
    g.channel = "/robot/state";
    g.missed = i + 1;
    g.last_queue_index = 10 * i;
    std::vector<std::byte> bytes = lg::EncodeGap(g);
    PutUint(&s, bytes.size(), 2);
    s.append(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  }
  return s;
}

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void Put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: seed_writer CORPUS_DIR\n");
    return 2;
  }
  const std::string net = std::string(argv[1]) + "/net_announce";
  Put(net + "/gap_channel_three_frames", Announcement(0, 0, 3));
  Put(net + "/gap_channel_kept", Announcement(2, 1, 1));
  std::string bad_frame = Announcement(0, 2, 1);
  bad_frame += std::string("\x10\x00\x00\x00\x00\x00\xff\xff\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00", 18);
  Put(net + "/gap_channel_bad_frame", bad_frame);
  const std::string dir = std::string(argv[1]) + "/mcap_log";
  if (!Write(dir + "/tether_zstd.mcap", lg::Compression::kZstd) ||
      !Write(dir + "/tether_none.mcap", lg::Compression::kNone)) {
    std::fprintf(stderr, "mcap_seed_writer: could not write into %s\n",
                 dir.c_str());
    return 1;
  }
  const std::string whole = Read(dir + "/tether_zstd.mcap");
  const std::string plain = Read(dir + "/tether_none.mcap");
  Put(dir + "/cut_before_summary.mcap", whole.substr(0, whole.size() * 3 / 5));
  std::string summary = whole;
  summary[summary.size() - 40] ^= 0x5a;
  Put(dir + "/flipped_summary_byte.mcap", summary);
  std::string chunk = plain;
  chunk[chunk.size() / 3] ^= 0x01;
  Put(dir + "/flipped_chunk_byte.mcap", chunk);
  std::printf("seeds: %zu and %zu bytes whole\n", whole.size(), plain.size());
  return 0;
}
