#include "log/log_format.h"

#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "log/log_gap.capnp.h"
#include "transport/schema_registry.h"

namespace tether::log {
namespace {

constexpr char kTypeId[] = "tether.type_id";
constexpr char kTypeName[] = "tether.type_name";
constexpr char kMaxSize[] = "tether.max_size";
constexpr char kFrequency[] = "tether.frequency_hz";
constexpr char kDepth[] = "tether.queue_depth";
constexpr char kPublishers[] = "tether.max_publishers";
constexpr char kPinned[] = "tether.max_pinned";

template <typename T>
void Put(std::byte** p, T v) {
  std::memcpy(*p, &v, sizeof(T));
  *p += sizeof(T);
}
template <typename T>
T Get(const std::byte** p) {
  T v;
  std::memcpy(&v, *p, sizeof(T));
  *p += sizeof(T);
  return v;
}

struct GapSchemaHolder {
  GapSchemaHolder() {
    transport::SchemaRegistry registry;
    registry.Register<wire::LogGap>();
    auto cgr = registry.CodeGeneratorRequestFor(capnp::typeId<wire::LogGap>());
    schema = *cgr;  // the type is registered just above: cannot fail
    name = capnp::Schema::from<wire::LogGap>().getProto().getDisplayName().cStr();
  }
  std::vector<std::byte> schema;
  std::string name;
};

const GapSchemaHolder& Gap() {
  static const GapSchemaHolder* holder = new GapSchemaHolder();
  return *holder;
}

}  // namespace

bool ChannelDescription::Holds(const ChannelDescription& o) const {
  return type_id == o.type_id && max_size >= o.max_size &&
         queue_depth >= o.queue_depth && max_publishers >= o.max_publishers &&
         max_pinned >= o.max_pinned;
}

std::string ChannelDescription::ShapeText() const {
  return absl::StrFormat(
      "type %s (0x%016x), max size %u B, queue depth %u, %u publishers, %u "
      "pinned readers",
      type_name, type_id, max_size, queue_depth, max_publishers, max_pinned);
}

ChannelDescription DescribeChannel(const transport::ChannelHandle& channel) {
  ChannelDescription d;
  d.name = channel.name();
  d.type_id = channel.type_id();
  d.type_name = channel.type_name();
  d.max_size = channel.max_size();
  d.frequency_hz = channel.frequency_hz();
  const shm::QueueParams params = channel.params();
  d.queue_depth = params.queue_depth;
  d.max_publishers = params.max_publishers;
  d.max_pinned = params.max_pinned;
  std::span<const std::byte> schema = channel.schema();
  d.schema.assign(schema.begin(), schema.end());
  return d;
}

mcap::KeyValueMap ChannelMetadata(const ChannelDescription& d) {
  return {
      {kTypeId, absl::StrFormat("0x%016x", d.type_id)},
      {kTypeName, d.type_name},
      {kMaxSize, absl::StrCat(d.max_size)},
      {kFrequency, absl::StrFormat("%.17g", d.frequency_hz)},
      {kDepth, absl::StrCat(d.queue_depth)},
      {kPublishers, absl::StrCat(d.max_publishers)},
      {kPinned, absl::StrCat(d.max_pinned)},
  };
}

absl::StatusOr<ChannelDescription> ParseChannelDescription(
    const mcap::Channel& channel, const mcap::Schema* schema) {
  auto missing = [&](const char* key) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", channel.topic, " has no '", key,
        "' metadata: it was not recorded by tether (replay needs the "
        "channel's shape)"));
  };
  auto get = [&](const char* key) -> const std::string* {
    auto it = channel.metadata.find(key);
    return it == channel.metadata.end() ? nullptr : &it->second;
  };
  ChannelDescription d;
  d.name = channel.topic;
  const std::string* v = get(kTypeId);
  if (v == nullptr) return missing(kTypeId);
  if (v->rfind("0x", 0) != 0 ||
      !absl::SimpleHexAtoi(absl::string_view(*v).substr(2), &d.type_id)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", channel.topic, ": ", kTypeId, " '", *v,
        "' is not a hex type id"));
  }
  if ((v = get(kTypeName)) == nullptr) return missing(kTypeName);
  d.type_name = *v;
  struct U32Field {
    const char* key;
    uint32_t* out;
  };
  for (U32Field f : {U32Field{kMaxSize, &d.max_size},
                     U32Field{kDepth, &d.queue_depth},
                     U32Field{kPublishers, &d.max_publishers},
                     U32Field{kPinned, &d.max_pinned}}) {
    if ((v = get(f.key)) == nullptr) return missing(f.key);
    if (!absl::SimpleAtoi(*v, f.out)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "channel ", channel.topic, ": ", f.key, " '", *v,
          "' is not a count"));
    }
  }
  if ((v = get(kFrequency)) == nullptr) return missing(kFrequency);
  // SimpleAtod takes "nan" and "inf" too: a rate is finite and not negative.
  if (!absl::SimpleAtod(*v, &d.frequency_hz) || !std::isfinite(d.frequency_hz) ||
      d.frequency_hz < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", channel.topic, ": ", kFrequency, " '", *v,
        "' is not a rate (a finite number of hertz, 0 or more)"));
  }
  if (schema == nullptr || schema->encoding != kCapnpEncoding) {
    return absl::InvalidArgumentError(absl::StrCat(
        "channel ", channel.topic,
        " has no capnproto schema record (the log cannot decode it)"));
  }
  d.schema = schema->data;
  return d;
}

void AppendContextRecord(const MessageContextRecord& r,
                         std::vector<std::byte>* out) {
  const size_t at = out->size();
  out->resize(at + mcap::kRecordHeaderSize + kContextContentSize);
  std::byte* p = out->data() + at;
  *p++ = std::byte{kContextOpcode};
  Put<uint64_t>(&p, kContextContentSize);
  Put(&p, r.channel_id);
  Put(&p, r.queue_index);
  Put(&p, r.monotonic_send_ns);
  Put(&p, r.monotonic_receive_ns);
  Put(&p, r.publisher_pid);
  Put(&p, r.publisher_index);
  Put(&p, r.publisher_sequence);
}

std::optional<MessageContextRecord> ParseContextRecord(
    const mcap::RecordView& record) {
  if (record.opcode != kContextOpcode ||
      record.content.size() < kContextContentSize) {
    return std::nullopt;
  }
  const std::byte* p = record.content.data();
  MessageContextRecord r;
  r.channel_id = Get<uint16_t>(&p);
  r.queue_index = Get<uint64_t>(&p);
  r.monotonic_send_ns = Get<int64_t>(&p);
  r.monotonic_receive_ns = Get<int64_t>(&p);
  r.publisher_pid = Get<uint32_t>(&p);
  r.publisher_index = Get<uint32_t>(&p);
  r.publisher_sequence = Get<uint64_t>(&p);
  return r;
}

const char* ToString(GapRecord::Reason reason) {
  switch (reason) {
    case GapRecord::Reason::kOverwritten:
      return "overwritten before the logger read them";
    case GapRecord::Reason::kOverwrittenWhileCopying:
      return "overwritten while the logger copied it";
    case GapRecord::Reason::kWriterBacklog:
      return "dropped: the file writer was too far behind";
    case GapRecord::Reason::kCorruptChannel:
      return "channel memory corrupt";
  }
  return "unknown";
}

const std::string& GapTypeName() { return Gap().name; }
const std::vector<std::byte>& GapSchema() { return Gap().schema; }
uint64_t GapTypeId() { return capnp::typeId<wire::LogGap>(); }

std::vector<std::byte> EncodeGap(const GapRecord& gap) {
  capnp::MallocMessageBuilder message;
  auto g = message.initRoot<wire::LogGap>();
  g.setChannel(gap.channel);
  g.setMissed(gap.missed);
  g.setFirstQueueIndex(gap.first_queue_index);
  g.setLastQueueIndex(gap.last_queue_index);
  g.setReason(static_cast<wire::LogGap::Reason>(gap.reason));
  g.setDetectedMonotonicNs(gap.detected_monotonic_ns);
  if (gap.mcap_channel_id.has_value()) {
    g.getLogged().setMcapChannelId(*gap.mcap_channel_id);
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  std::vector<std::byte> out(flat.size() * sizeof(capnp::word));
  std::memcpy(out.data(), flat.begin(), out.size());
  return out;
}

absl::StatusOr<GapRecord> DecodeGap(std::span<const std::byte> framed) {
  std::vector<capnp::word> words((framed.size() + 7) / 8);
  if (!framed.empty()) std::memcpy(words.data(), framed.data(), framed.size());
  try {
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(words.data(), words.size()));
    auto g = reader.getRoot<wire::LogGap>();
    GapRecord out;
    out.channel = g.getChannel().cStr();
    out.missed = g.getMissed();
    out.first_queue_index = g.getFirstQueueIndex();
    out.last_queue_index = g.getLastQueueIndex();
    const uint16_t reason = static_cast<uint16_t>(g.getReason());
    if (reason > static_cast<uint16_t>(GapRecord::Reason::kCorruptChannel)) {
      return absl::InvalidArgumentError("LogGap: unknown reason");
    }
    out.reason = static_cast<GapRecord::Reason>(reason);
    out.detected_monotonic_ns = g.getDetectedMonotonicNs();
    if (g.getLogged().isMcapChannelId()) {
      out.mcap_channel_id = g.getLogged().getMcapChannelId();
    }
    return out;
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a LogGap message: ", e.getDescription().cStr()));
  }
}

absl::StatusOr<std::vector<std::byte>> WithGapChannelId(
    std::span<const std::byte> framed, std::optional<uint16_t> id) {
  std::vector<capnp::word> words((framed.size() + 7) / 8);
  if (!framed.empty()) std::memcpy(words.data(), framed.data(), framed.size());
  try {
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(words.data(), words.size()));
    capnp::MallocMessageBuilder message;
    // A struct copy keeps the data and pointers of fields unknown here.
    message.setRoot(reader.getRoot<wire::LogGap>());
    auto logged = message.getRoot<wire::LogGap>().getLogged();
    if (id.has_value()) {
      logged.setMcapChannelId(*id);
    } else {
      logged.setUnknown();
    }
    kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
    std::vector<std::byte> out(flat.size() * sizeof(capnp::word));
    std::memcpy(out.data(), flat.begin(), out.size());
    return out;
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a LogGap message: ", e.getDescription().cStr()));
  }
}

}  // namespace tether::log
