// log: what both replays share — which logged channels to replay under which
// names (selection by name/glob, remapping /a:=/b), the schemas to recreate
// them, and the stack config describing them.
//
// Threading: any thread. Not RT-safe (setup).
#ifndef TETHER_LOG_REPLAY_PLAN_H_
#define TETHER_LOG_REPLAY_PLAN_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "log/log_format.h"
#include "log/log_reader.h"
#include "transport/config.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::log {

// One logged channel and the name it is replayed on. A channel re-created
// with another queue shape while it was recorded is in the log once per
// shape, every time under its name (the logger keeps one MCAP channel per
// shape): all of them are played on the one channel, in log order.
struct ReplayChannel {
  // The logged channel (its first MCAP channel); owned by the LogReader.
  const LogChannel* logged = nullptr;
  // The MCAP channels played on `name`: logged's and those of the
  // channel's later incarnations.
  std::vector<uint16_t> ids;
  // The channel the replay makes (or expects to find): logged's
  // description; for several incarnations, every queue dimension the
  // largest any of them had (so each message fits and no burst overflows
  // what it did not then) and the last one's schema.
  ChannelDescription description;
  std::string name;
};

// Why the logged channel `name` cannot be replayed, with all its
// incarnations as one unit ("" if it can): an incarnation without tether's
// metadata, incarnations of two types, or the log's own loss records. What
// PlanReplay skips or refuses, and what `tether log info` shows.
std::string WhyNotReplayable(const LogReader& reader, const std::string& name);

// "/a:=/b" -> {"/a", "/b"}; InvalidArgument saying the form otherwise.
absl::StatusOr<std::pair<std::string, std::string>> ParseRemap(
    std::string_view text);

// The channels to replay: those matching `select` (names or globs; empty:
// every replayable channel), renamed by `remaps`. The log's own loss records
// (/tether/log/gaps) are never replayed. A name is one unit with all its
// incarnations: it cannot be replayed if one of them lacks tether's
// metadata, or if they have two types (re-created as another type while
// recorded). Such a name, explicitly selected, is an error
// (FailedPrecondition saying why and what to do); matched by a glob or the
// default selection, it is skipped and `*notes` says why. Other errors
// (with what would be valid): a remap of a channel the log lacks, a
// selection matching nothing, two channels onto one name, nothing left to
// replay (naming what was skipped).
absl::StatusOr<std::vector<ReplayChannel>> PlanReplay(
    const LogReader& reader, const std::vector<std::string>& select,
    const std::vector<std::pair<std::string, std::string>>& remaps,
    std::vector<std::string>* notes);

// Sends that failed while replaying (the replay's own counts of malformed
// messages are kept apart), per replayed channel: how many and the first
// status. Both replays report them through Summary(), so an error names
// every channel that failed, not only the first. Not RT-safe (a channel's
// first failure inserts into a map); one thread, or the caller's lock.
class PublishFailures {
 public:
  void Add(const std::string& channel, transport::PublishStatus status);
  // OK if nothing failed; else Internal "publishing failed on 2 channels:
  // /a 100 (channel shared memory is corrupt), /b 3 (...)".
  absl::Status Summary() const;

 private:
  std::map<std::string, std::pair<uint64_t, transport::PublishStatus>> failed_;
};

// Loads the schemas of `channels` (from the log) into `schemas`.
absl::Status LoadReplaySchemas(const std::vector<ReplayChannel>& channels,
                               transport::SchemaRegistry* schemas);

// A validated stack config with one channel per (name, description) and no
// nodes; types are named by id and must be known to `types`.
absl::StatusOr<transport::StackConfig> StackConfigFor(
    const std::vector<std::pair<std::string, ChannelDescription>>& channels,
    const transport::KnownTypes& types);

}  // namespace tether::log

#endif  // TETHER_LOG_REPLAY_PLAN_H_
