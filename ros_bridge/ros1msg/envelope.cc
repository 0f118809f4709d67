#include "ros_bridge/ros1msg/envelope.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kj/exception.h"
#include "ros_bridge/ros1msg/envelope.capnp.h"
#include "ros_bridge/ros1msg/json.h"

namespace tether::ros1msg {
namespace {

// Copies `s` into a Text field made by `init(size)` (no NUL needed in `s`).
template <typename Init>
void SetText(absl::string_view s, Init init) {
  capnp::Text::Builder t = init(static_cast<capnp::uint>(s.size()));
  if (!s.empty()) std::memcpy(t.begin(), s.data(), s.size());
}

absl::string_view View(capnp::Text::Reader t) {
  return absl::string_view(t.begin(), t.size());
}

}  // namespace

uint64_t EnvelopeTypeId() { return capnp::typeId<RosEnvelope>(); }

transport::FinishResult BuildEnvelope(
    transport::BuildArena* arena, std::span<std::byte> slot,
    absl::string_view channel, const EnvelopeHeader& header, size_t data_size,
    absl::FunctionRef<void(std::span<uint8_t>)> fill) {
  static const transport::SlotMessageBuilder::BlobField kData =
      transport::SlotMessageBuilder::ResolveBlobField(
          capnp::Schema::from<RosEnvelope>().getFieldByName("data"));
  transport::SlotMessageBuilder builder(
      arena, slot, std::string_view(channel.data(), channel.size()));
  RosEnvelope::Builder e = builder.initRoot<RosEnvelope>();
  SetText(header.type, [&](capnp::uint n) { return e.initType(n); });
  SetText(header.md5sum, [&](capnp::uint n) { return e.initMd5sum(n); });
  SetText(header.definition,
          [&](capnp::uint n) { return e.initDefinition(n); });
  e.setLatching(header.latching);
  SetText(header.callerid, [&](capnp::uint n) { return e.initCallerid(n); });
  SetText(header.topic, [&](capnp::uint n) { return e.initTopic(n); });
  e.setReceiveTimeNs(header.receive_time_ns);
  RosEnvelope::Origin::Builder origin = e.initOrigin();
  SetText(header.origin_graph,
          [&](capnp::uint n) { return origin.initGraph(n); });
  SetText(header.origin_bridge,
          [&](capnp::uint n) { return origin.initBridge(n); });
  if (builder.overflowed() || data_size == 0) return builder.Finish();
  std::span<std::byte> data = builder.InitBlob(e, kData, data_size);
  if (data.size() == data_size && !builder.overflowed()) {
    fill(std::span<uint8_t>(reinterpret_cast<uint8_t*>(data.data()), data.size()));
  }
  return builder.Finish();
}

absl::Status ReadEnvelope(std::span<const std::byte> framed,
                          EnvelopeView* out) {
  transport::SlotMessageReader reader(framed);
  std::string why;
  const transport::FramingStatus status = transport::VisitRoot<RosEnvelope>(
      reader,
      [&](RosEnvelope::Reader e) {
        out->header.type = View(e.getType());
        out->header.md5sum = View(e.getMd5sum());
        out->header.definition = View(e.getDefinition());
        out->header.latching = e.getLatching();
        out->header.callerid = View(e.getCallerid());
        out->header.topic = View(e.getTopic());
        out->header.receive_time_ns = e.getReceiveTimeNs();
        out->header.origin_graph = View(e.getOrigin().getGraph());
        out->header.origin_bridge = View(e.getOrigin().getBridge());
        capnp::Data::Reader d = e.getData();
        out->data = std::span<const uint8_t>(d.begin(), d.size());
      },
      &why);
  if (status != transport::FramingStatus::kOk) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a valid ROS envelope (",
                     transport::FramingStatusName(status),
                     why.empty() ? "" : ": ", why, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<const MessageDefinition*> EnvelopeDecoder::Definition(
    absl::string_view type, absl::string_view md5sum,
    absl::string_view definition) {
  auto key = std::make_tuple(std::string(type), std::string(md5sum),
                             std::string(definition));
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second.get();
  absl::StatusOr<std::unique_ptr<MessageDefinition>> parsed =
      MessageDefinition::Parse(type, definition);
  if (!parsed.ok()) return parsed.status();
  const MessageDefinition* result = parsed->get();
  // Bounded: a stream of made-up definitions cannot grow it forever.
  if (cache_.size() > 1024) cache_.clear();
  cache_.emplace(std::move(key), std::move(*parsed));
  return result;
}

absl::StatusOr<std::string> EnvelopeDecoder::ToJson(
    std::span<const std::byte> framed) {
  EnvelopeView v;
  if (absl::Status s = ReadEnvelope(framed, &v); !s.ok()) return s;
  absl::StatusOr<const MessageDefinition*> def =
      Definition(v.header.type, v.header.md5sum, v.header.definition);
  if (!def.ok()) return def.status();
  absl::StatusOr<std::string> message = MessageToJson(**def, v.data);
  if (!message.ok()) return message.status();
  std::string out = "{\"type\":";
  AppendJsonString(v.header.type, &out);
  out.append(",\"md5sum\":");
  AppendJsonString(v.header.md5sum, &out);
  out.append(",\"topic\":");
  AppendJsonString(v.header.topic, &out);
  out.append(",\"callerid\":");
  AppendJsonString(v.header.callerid, &out);
  absl::StrAppend(&out, ",\"latching\":", v.header.latching ? "true" : "false",
                  ",\"receive_time_ns\":", v.header.receive_time_ns,
                  ",\"origin\":{\"graph\":");
  AppendJsonString(v.header.origin_graph, &out);
  out.append(",\"bridge\":");
  AppendJsonString(v.header.origin_bridge, &out);
  absl::StrAppend(&out, "},\"message\":", *message, "}");
  return out;
}

}  // namespace tether::ros1msg
