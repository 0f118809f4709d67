#include "transport/channel_handle.h"

#include <grp.h>
#include <sys/stat.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/message.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "transport/channel_info.capnp.h"
#include "transport/config.h"
#include "transport/names.h"

namespace tether::transport {

namespace {

// What creating a channel from its config entry writes: the queue's shape,
// the ChannelInfo metadata and the file options. Setup only.
struct CreatePlan {
  std::string name;
  shm::QueueParams params;
  kj::Array<capnp::word> metadata;
  shm::ChannelOptions options;
  // What the metadata says, for errors.
  std::string type_name;
  uint32_t max_size = 0;
  double frequency_hz = 0;

  std::span<const std::byte> metadata_bytes() const {
    return {reinterpret_cast<const std::byte*>(metadata.begin()),
            metadata.size() * sizeof(capnp::word)};
  }
};

absl::StatusOr<CreatePlan> PlanCreate(const shm::ChannelOptions& options,
                                      config::Channel::Reader channel,
                                      const SchemaRegistry& schemas) {
  const std::string name = channel.getName().cStr();
  const std::string type = channel.getType().cStr();
  if (absl::Status bad = CheckInstanceName(options.instance); !bad.ok()) {
    return bad;
  }
  if (absl::Status bad = CheckChannelName(name); !bad.ok()) return bad;
  std::optional<capnp::StructSchema> schema = schemas.FindByName(type);
  if (!schema.has_value() && type.rfind("0x", 0) == 0) {
    schema = schemas.Find(std::strtoull(type.c_str(), nullptr, 16));
  }
  if (!schema.has_value()) {
    return absl::NotFoundError(absl::StrCat(
        "channel ", name, ": message type ", type,
        " is not compiled into this program: register it with "
        "SchemaRegistry::Register<T>()"));
  }
  absl::StatusOr<shm::QueueParams> params = QueueParamsFor(channel);
  if (!params.ok()) return params.status();
  const uint64_t type_id = schema->getProto().getId();
  absl::StatusOr<std::vector<std::byte>> request =
      schemas.CodeGeneratorRequestFor(type_id);
  if (!request.ok()) return request.status();

  capnp::MallocMessageBuilder message;
  auto info = message.initRoot<wire::ChannelInfo>();
  info.setName(name);
  info.setTypeId(type_id);
  info.setTypeName(schema->getProto().getDisplayName());
  info.setMaxSize(channel.getMaxSize());
  info.setFrequencyHz(channel.getFrequencyHz());
  info.setSchema(kj::arrayPtr(reinterpret_cast<const kj::byte*>(request->data()),
                              request->size()));

  absl::StatusOr<shm::ChannelOptions> files =
      ChannelHandle::FileOptions(options, channel);
  if (!files.ok()) return files.status();
  return CreatePlan{name,
                    *params,
                    capnp::messageToFlatArray(message),
                    *files,
                    schema->getProto().getDisplayName(),
                    channel.getMaxSize(),
                    channel.getFrequencyHz()};
}

// OpenOrCreate() refused an existing channel of `plan`'s name (`refusal`):
// says what differs in a config's words (type, maxSize, frequencyHz,
// schema) rather than shm's byte counts of the channel info, beside shm's
// own words where the queue's shape differs too; `refusal` as it is when
// the channel cannot be opened to look. Error path only.
absl::Status DescribeRefusal(const CreatePlan& plan, absl::Status refusal) {
  std::string found_type;
  std::vector<std::string> differences;
  bool same_shape = false;
  {
    absl::StatusOr<std::unique_ptr<ChannelHandle>> existing =
        ChannelHandle::Open(plan.options, plan.name);
    if (!existing.ok()) return refusal;
    const ChannelHandle& h = **existing;
    same_shape = h.params() == plan.params;
    found_type = h.type_name();
    if (h.type_name() != plan.type_name) {
      differences.push_back(absl::StrCat("it carries ", h.type_name(),
                                         ", this config says ",
                                         plan.type_name));
    }
    if (h.max_size() != plan.max_size) {
      differences.push_back(absl::StrCat("its maxSize is ", h.max_size(),
                                         ", this config's ", plan.max_size));
    }
    if (h.frequency_hz() != plan.frequency_hz) {
      differences.push_back(absl::StrCat("its frequencyHz is ",
                                         h.frequency_hz(), ", this config's ",
                                         plan.frequency_hz));
    }
  }  // closed: ChangeAdvice() must not count this process's own lock
  if (!same_shape) {
    // shm's refusal names both shapes and says what to do.
    if (differences.empty()) return refusal;
    return absl::FailedPreconditionError(
        absl::StrCat("channel ", plan.name, ": ",
                     absl::StrJoin(differences, "; "), "; and ",
                     refusal.message()));
  }
  if (differences.empty()) {
    differences.push_back(absl::StrCat(
        "it carries ", found_type,
        " as this program does, but from another version of its schema (the "
        ".capnp file changed since the channel was made)"));
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "channel ", plan.name, " exists with other channel info: ",
      absl::StrJoin(differences, "; "),
      ". Make every process use the same config and schema; ",
      shm::Channel::ChangeAdvice(plan.options, plan.name)));
}

}  // namespace

absl::StatusOr<shm::ChannelOptions> ChannelHandle::FileOptions(
    const shm::ChannelOptions& options, config::Channel::Reader channel) {
  const std::string name = channel.getName().cStr();
  shm::ChannelOptions files = options;
  const std::string mode = channel.getMode().cStr();
  if (!mode.empty()) {
    files.mode = static_cast<mode_t>(std::strtoul(mode.c_str(), nullptr, 8));
  }
  const std::string reader_mode = channel.getReaderMode().cStr();
  if (!reader_mode.empty()) {
    files.reader_mode =
        static_cast<mode_t>(std::strtoul(reader_mode.c_str(), nullptr, 8));
  }
  auto lookup = [&name](const std::string& group) -> absl::StatusOr<gid_t> {
    // Setup only: getgrnam_r may read /etc/group or NSS.
    struct group entry;
    struct group* found = nullptr;
    char buf[4096];
    if (::getgrnam_r(group.c_str(), &entry, buf, sizeof(buf), &found) != 0 ||
        found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "channel ", name, ": group ", group,
          " does not exist on this machine: create it (groupadd) or fix the "
          "channel's group in the config"));
    }
    return found->gr_gid;
  };
  if (const std::string group = channel.getGroup().cStr(); !group.empty()) {
    absl::StatusOr<gid_t> gid = lookup(group);
    if (!gid.ok()) return gid.status();
    files.group = *gid;
  }
  if (const std::string group = channel.getReaderGroup().cStr();
      !group.empty()) {
    absl::StatusOr<gid_t> gid = lookup(group);
    if (!gid.ok()) return gid.status();
    files.reader_group = *gid;
  }
  return files;
}

absl::StatusOr<std::unique_ptr<ChannelHandle>> ChannelHandle::Create(
    const shm::ChannelOptions& options, config::Channel::Reader channel,
    const SchemaRegistry& schemas) {
  absl::StatusOr<CreatePlan> plan = PlanCreate(options, channel, schemas);
  if (!plan.ok()) return plan.status();
  absl::StatusOr<std::unique_ptr<shm::Channel>> shm = shm::Channel::OpenOrCreate(
      plan->options, plan->name, plan->params, plan->metadata_bytes());
  if (absl::IsFailedPrecondition(shm.status())) {
    return DescribeRefusal(*plan, shm.status());
  }
  if (!shm.ok()) return shm.status();
  return FromShm(std::move(*shm));
}

absl::StatusOr<uint64_t> ChannelHandle::BytesToCreate(
    const shm::ChannelOptions& options, config::Channel::Reader channel,
    const SchemaRegistry& schemas, uint64_t block_size) {
  absl::StatusOr<CreatePlan> plan = PlanCreate(options, channel, schemas);
  if (!plan.ok()) return plan.status();
  struct stat st;
  if (::stat(shm::Channel::PathFor(options, plan->name).c_str(), &st) == 0) {
    return 0;
  }
  return shm::Channel::SpaceFor(plan->params, plan->metadata_bytes().size(),
                                block_size);
}

absl::StatusOr<std::unique_ptr<ChannelHandle>> ChannelHandle::Open(
    const shm::ChannelOptions& options, const std::string& name) {
  if (absl::Status bad = CheckInstanceName(options.instance); !bad.ok()) {
    return bad;
  }
  // A name no channel can have (e.g. "" from a script) would otherwise
  // name the instance folder itself ("Is a directory").
  if (absl::Status bad = CheckChannelName(name); !bad.ok()) return bad;
  absl::StatusOr<std::unique_ptr<shm::Channel>> shm =
      shm::Channel::Open(options, name);
  if (!shm.ok()) return shm.status();
  return FromShm(std::move(*shm));
}

absl::StatusOr<std::unique_ptr<ChannelHandle>> ChannelHandle::FromShm(
    std::unique_ptr<shm::Channel> channel) {
  std::unique_ptr<ChannelHandle> h(new ChannelHandle());
  std::span<const std::byte> meta = channel->metadata();
  const std::string path = channel->path();
  auto bad = [&](const std::string& why) {
    return absl::DataLossError(absl::StrCat(
        "channel file ", path, " has no valid tether channel info (", why,
        "): it was not made by tether's transport, or is corrupt; remove it "
        "(rm ", path, ")"));
  };
  if (meta.empty() || meta.size() % sizeof(capnp::word) != 0) {
    return bad("metadata size");
  }
  // Metadata sits at a 64-byte offset in the mapping: aligned for capnp. It
  // is shared memory, so everything is copied out and checked here.
  try {
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(
        reinterpret_cast<const capnp::word*>(meta.data()),
        meta.size() / sizeof(capnp::word)));
    auto info = reader.getRoot<wire::ChannelInfo>();
    h->name_ = info.getName().cStr();
    h->type_id_ = info.getTypeId();
    h->type_name_ = info.getTypeName().cStr();
    h->max_size_ = info.getMaxSize();
    h->frequency_hz_ = info.getFrequencyHz();
    capnp::Data::Reader schema = info.getSchema();
    h->schema_words_.resize((schema.size() + 7) / 8);
    std::memcpy(h->schema_words_.data(), schema.begin(), schema.size());
    if (schema.size() % 8 != 0) return bad("schema size");
  } catch (const kj::Exception& e) {
    return bad(e.getDescription().cStr());
  }
  if (h->name_ != channel->name()) {
    return bad(absl::StrCat("it names itself ", h->name_));
  }
  if (h->max_size_ > channel->params().slot_size) {
    return bad("max size larger than its slots");
  }
  h->shm_ = std::move(channel);
  return h;
}

std::span<const std::byte> ChannelHandle::schema() const {
  return {reinterpret_cast<const std::byte*>(schema_words_.data()),
          schema_words_.size() * sizeof(uint64_t)};
}

absl::StatusOr<std::vector<ChannelSummary>> ListChannels(
    const shm::ChannelOptions& options) {
  if (absl::Status bad = CheckInstanceName(options.instance); !bad.ok()) {
    return bad;
  }
  absl::StatusOr<std::vector<std::string>> names = shm::Channel::List(options);
  if (!names.ok()) return names.status();
  std::vector<ChannelSummary> out;
  for (const std::string& name : *names) {
    ChannelSummary s;
    s.name = name;
    absl::StatusOr<std::unique_ptr<ChannelHandle>> h =
        ChannelHandle::Open(options, name);
    if (!h.ok()) {
      s.error = std::string(h.status().message());
    } else {
      s.type_name = (*h)->type_name();
      s.type_id = (*h)->type_id();
      s.max_size = (*h)->max_size();
      s.frequency_hz = (*h)->frequency_hz();
      s.params = (*h)->params();
      s.stats = (*h)->stats();
      if (absl::Status c = (*h)->CheckConsistency(); !c.ok()) {
        // Only a data-file finding makes the handle corrupt (Channel::
        // CheckConsistency).
        ((*h)->corrupt() ? s.corruption : s.reader_state_problem) =
            std::string(c.message());
      }
    }
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace tether::transport
