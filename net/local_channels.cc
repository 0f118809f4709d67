#include "net/local_channels.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "capnp/message.h"
#include "transport/config.capnp.h"
#include "transport/config.h"

namespace tether::net {
namespace {

std::string Hex(uint64_t v) { return absl::StrFormat("0x%016x", v); }

std::string Summary(const ChannelDescription& d) {
  return absl::StrFormat("%s (%s), schema hash %s, max size %u B",
                         d.type_name.empty() ? Hex(d.type_id) : d.type_name,
                         Hex(d.type_id), Hex(d.schema_hash), d.max_size);
}

// JSON string of a value we produced ourselves (channel names and "0x"
// ids: no characters that need escaping beyond these).
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string ChannelJson(const std::string& name, uint64_t type_id,
                        uint32_t max_size, double frequency_hz,
                        uint32_t queue_depth, uint32_t max_publishers,
                        uint32_t max_pinned) {
  return absl::StrFormat(
      "{\"name\": %s, \"type\": \"%s\", \"maxSize\": %u, \"frequencyHz\": "
      "%.17g, \"queueDepth\": %u, \"maxPublishers\": %u, \"maxPinned\": %u}",
      Quote(name), Hex(type_id), max_size, frequency_hz, queue_depth,
      max_publishers, max_pinned);
}

}  // namespace

uint64_t SchemaHash(std::span<const std::byte> schema) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (std::byte b : schema) {
    h ^= static_cast<uint8_t>(b);
    h *= 0x100000001b3ull;
  }
  return h;
}

ChannelDescription Describe(const transport::ChannelHandle& channel,
                            std::string where) {
  ChannelDescription d;
  d.name = channel.name();
  d.where = std::move(where);
  d.type_id = channel.type_id();
  d.type_name = channel.type_name();
  std::span<const std::byte> schema = channel.schema();
  d.schema.assign(schema.begin(), schema.end());
  d.schema_hash = SchemaHash(schema);
  d.max_size = channel.max_size();
  d.frequency_hz = channel.frequency_hz();
  const shm::QueueParams params = channel.params();
  d.queue_depth = params.queue_depth;
  d.max_publishers = params.max_publishers;
  d.max_pinned = params.max_pinned;
  return d;
}

absl::Status CheckCompatible(const ChannelDescription& remote,
                             const ChannelDescription& local) {
  std::string what;
  if (remote.type_id != local.type_id) {
    what = "the message types differ";
  } else if (remote.schema_hash != local.schema_hash) {
    what = "the same type has different schemas (one side was built from "
           "another version of the .capnp file)";
  } else if (local.max_size < remote.max_size) {
    what = "this host's channel is smaller than the sender's messages may be";
  } else {
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "channel ", remote.name, " refused: ", what, ": ", remote.where,
      " sends ", Summary(remote), "; ", local.where, " has ", Summary(local),
      "; make both stacks declare the channel with the same type, built "
      "from the same schema, and a max size at least the sender's"));
}

absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenOrCreateFor(
    const shm::ChannelOptions& options, const ChannelDescription& remote,
    const std::string& local_where) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> existing =
        transport::ChannelHandle::Open(options, remote.name);
    if (existing.ok()) {
      if (absl::Status s =
              CheckCompatible(remote, Describe(**existing, local_where));
          !s.ok()) {
        return s;
      }
      return existing;
    }
    if (!absl::IsNotFound(existing.status())) return existing.status();

    transport::SchemaRegistry schemas;
    if (absl::Status s =
            schemas.AddCodeGeneratorRequest(remote.schema, remote.type_id);
        !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "channel ", remote.name, ": the schema ", remote.where,
          " announced is not usable: ", s.message()));
    }
    capnp::MallocMessageBuilder message;
    auto c = message.initRoot<transport::config::Channel>();
    c.setName(remote.name);
    c.setType(Hex(remote.type_id));
    c.setMaxSize(remote.max_size);
    c.setFrequencyHz(remote.frequency_hz);
    c.setQueueDepth(remote.queue_depth);
    c.setMaxPublishers(std::max<uint32_t>(remote.max_publishers, 1));
    c.setMaxPinned(remote.max_pinned);
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> created =
        transport::ChannelHandle::Create(options, c.asReader(), schemas);
    if (created.ok()) {
      // The channel carries the schema as this host writes it; an
      // announcement whose blob is not in that form (not from a tether
      // channel) would make a channel its own sender is refused on next
      // time. Refuse it now, and take back what was made.
      if (absl::Status s =
              CheckCompatible(remote, Describe(**created, local_where));
          !s.ok()) {
        const std::string data = (*created)->path();
        const std::string state = (*created)->reader_state_path();
        created->reset();
        ::unlink(data.c_str());
        ::unlink(state.c_str());
        return absl::InvalidArgumentError(absl::StrCat(
            "channel ", remote.name, ": the schema ", remote.where,
            " announced is not a tether channel's schema blob (it does not "
            "match itself once loaded); update that bridge to this tether "
            "version"));
      }
      return created;
    }
    // Someone else created it meanwhile with another shape: compare with
    // theirs (the next Open) rather than report our own attempt.
    if (!absl::IsFailedPrecondition(created.status()) || attempt == 1) {
      return absl::Status(
          created.status().code(),
          absl::StrCat("channel ", remote.name, " as ", remote.where,
                       " announced it: ", created.status().message()));
    }
  }
  return absl::InternalError("unreachable");
}

absl::StatusOr<std::unique_ptr<transport::ChannelSet>> OpenChannelSet(
    const shm::ChannelOptions& options, const std::vector<std::string>& names,
    const std::vector<OwnChannel>& own, transport::SchemaRegistry& schemas) {
  std::vector<std::string> entries;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> h =
        transport::ChannelHandle::Open(options, name);
    if (!h.ok()) {
      if (absl::IsNotFound(h.status())) {
        absl::StatusOr<std::vector<std::string>> there =
            shm::Channel::List(options);
        return absl::NotFoundError(absl::StrCat(
            "channel ", name, " does not exist in ", options.root, "/",
            options.instance, " (there: ",
            there.ok() && !there->empty() ? absl::StrJoin(*there, ", ")
                                          : std::string("none"),
            "): start the stack that declares it first, or fix the "
            "bridge config's channel name or --instance"));
      }
      return h.status();
    }
    const transport::ChannelHandle& c = **h;
    if (absl::Status s =
            schemas.AddCodeGeneratorRequest(c.schema(), c.type_id());
        !s.ok()) {
      return absl::DataLossError(absl::StrCat(
          "channel ", name, " carries a schema that cannot be loaded: ",
          s.message()));
    }
    const shm::QueueParams p = c.params();
    entries.push_back(ChannelJson(name, c.type_id(), c.max_size(),
                                  c.frequency_hz(), p.queue_depth,
                                  p.max_publishers, p.max_pinned));
  }
  for (const OwnChannel& o : own) {
    entries.push_back(ChannelJson(o.name, o.type_id, o.max_size,
                                  o.frequency_hz, o.queue_depth, 1, 8));
  }
  const std::string json = absl::StrCat(
      "{\"channels\": [\n", absl::StrJoin(entries, ",\n"), "\n]}\n");
  absl::StatusOr<transport::StackConfig> stack = transport::ParseStackConfig(
      json, "<the bridge's channels>", schemas.known_types());
  if (!stack.ok()) {
    return absl::InternalError(absl::StrCat(
        "the bridge's channel list did not load (a bug): ",
        stack.status().message()));
  }
  return transport::ChannelSet::Create(options, *stack, schemas);
}

}  // namespace tether::net
