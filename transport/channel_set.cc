#include "transport/channel_set.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace tether::transport {

absl::StatusOr<std::unique_ptr<ChannelSet>> ChannelSet::Create(
    const shm::ChannelOptions& options, const StackConfig& stack,
    const SchemaRegistry& schemas) {
  std::unique_ptr<ChannelSet> set(new ChannelSet());
  set->options_ = options;
  for (config::Channel::Reader c : stack.channels()) {
    absl::StatusOr<std::unique_ptr<ChannelHandle>> h =
        ChannelHandle::Create(options, c, schemas);
    if (!h.ok()) return h.status();
    set->channels_[c.getName().cStr()] = std::move(*h);
  }
  return set;
}

absl::StatusOr<ChannelHandle*> ChannelSet::Find(const std::string& name) const {
  auto it = channels_.find(name);
  if (it != channels_.end()) return it->second.get();
  std::vector<std::string> names;
  for (const auto& [n, _] : channels_) names.push_back(n);
  return absl::NotFoundError(absl::StrCat(
      "no channel ", name, " in the stack config (channels: ",
      absl::StrJoin(names, ", "), "): add it to the config's channels"));
}

}  // namespace tether::transport
