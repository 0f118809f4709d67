// tools: what the channel commands (echo, pub, stat, clean) share: the
// --root/--instance options, opening a channel by name with the schema it
// carries, number options and Ctrl-C.
#ifndef TETHER_TOOLS_CHANNEL_TOOL_H_
#define TETHER_TOOLS_CHANNEL_TOOL_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "capnp/schema.h"
#include "shm/channel.h"
#include "tools/arg_parser.h"
#include "transport/channel_handle.h"
#include "transport/raw_endpoints.h"
#include "transport/schema_registry.h"

namespace tether::tools {

// Polled by long-running commands at least every 100 ms; true ends them.
// Empty means "never".
using StopFn = std::function<bool()>;

// --root and --instance. Unset, they are $TETHER_ROOT and $TETHER_INSTANCE
// (what the launcher gives its nodes), else /dev/shm/tether and default.
void AddRootInstanceOptions(ArgParser& parser);
// Sets *out from them; a bad instance name (transport/names.h) is printed
// as "<command>: ..." on `err` and returns false (exit with kExitUsage).
bool RootInstanceFrom(const ParsedArgs& args, const char* command,
                      shm::ChannelOptions* out, std::ostream& err);

// A channel opened by name with its message type loaded from the schema
// blob the channel carries (no compiled-in schemas needed).
struct TypedChannel {
  std::unique_ptr<transport::ChannelHandle> handle;
  std::unique_ptr<transport::SchemaRegistry> schemas;  // owns `type`
  capnp::StructSchema type;
};

// Opens `name`; NotFound lists the channels that do exist in the instance;
// DataLoss (what is wrong, where, how to fix) if its memory is corrupt. A
// finding in the reader-state file alone (the messages are intact) is
// printed to stderr as a warning and the channel is returned.
absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenChannelByName(
    const shm::ChannelOptions& options, const std::string& name);
absl::StatusOr<TypedChannel> OpenTypedChannel(
    const shm::ChannelOptions& options, const std::string& name);

// Option parsers: print "<command>: --name VALUE is not ..." on `err` and
// return false on a bad value.
bool ParseCountOption(const ParsedArgs& args, const char* command,
                      const char* name, uint64_t* out, std::ostream& err);
// A finite number > 0 and at most 1e9 (rates in Hz, seconds).
bool ParsePositiveOption(const ParsedArgs& args, const char* command,
                         const char* name, double* out, std::ostream& err);

// A number in [min, max]; the error gives the range.
bool ParseRangeOption(const ParsedArgs& args, const char* command,
                      const char* name, double min, double max, double* out,
                      std::ostream& err);

// A finite number of seconds >= 0 (positions in a log).
bool ParseSecondsOption(const ParsedArgs& args, const char* command,
                        const char* name, double* out, std::ostream& err);

// --start and --end SECONDS, each set only when given.
bool ParseStartEndOptions(const ParsedArgs& args, const char* command,
                          std::optional<double>* start,
                          std::optional<double>* end, std::ostream& err);

// Installs SIGINT/SIGTERM handling for the life of the returned guard and
// sets *stop to poll it. A second signal kills the process, after printing
// `second_signal_note` (if any) on stderr. On failure writes to err and
// returns null.
std::shared_ptr<void> InstallStop(const char* command, StopFn* stop,
                                  std::ostream& err,
                                  const std::string& second_signal_note = "");

}  // namespace tether::tools

#endif  // TETHER_TOOLS_CHANNEL_TOOL_H_
