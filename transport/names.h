// transport: the rules for the names people give channels and stack
// instances, checked where a name first enters (config validation, the CLI's
// --instance, ChannelHandle::Create) so a bad one is refused up front with
// what to change, never half-created on disk.
//
// A channel name is one file in its instance folder ('/' escaped as %2F,
// shm::Channel::PathFor); the file name must leave room under the
// filesystem's NAME_MAX (255 on tmpfs and ext4) for the private name a
// creator builds it under and the suffixes of the files beside it. An
// instance name is one folder under the root.
//
// Any thread; allocate only to build an error; not RT-safe.
#ifndef TETHER_TRANSPORT_NAMES_H_
#define TETHER_TRANSPORT_NAMES_H_

#include <cstddef>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace tether::transport {

// The longest escaped channel file name accepted: NAME_MAX (255) less room
// for a creator's private name (".<name>.tmp.<pid>.<n>", 24 bytes) and
// sibling files' suffixes.
inline constexpr size_t kMaxChannelFileName = 200;
// The longest instance folder name.
inline constexpr size_t kMaxInstanceName = 128;
// Names under this prefix are the recorder's own records in its logs
// (log_format.h: /tether/log/gaps holds its loss records): a channel of
// that name would be read back as them, so none may be made.
inline constexpr char kReservedLogPrefix[] = "/tether/log/";

// OK, or InvalidArgument saying what is wrong: a channel name is
// '/'-separated parts of letters, digits, '_', '-' and '.', none of them
// empty, "." or "..", like "/robot/joint_state", at most
// kMaxChannelFileName bytes once escaped, and not under kReservedLogPrefix.
absl::Status CheckChannelName(absl::string_view name);

// OK, or InvalidArgument: an instance name is letters, digits, '_', '-' and
// '.', not starting with '.', at most kMaxInstanceName bytes (so never
// empty, "." or "..", and never a path).
absl::Status CheckInstanceName(absl::string_view name);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_NAMES_H_
