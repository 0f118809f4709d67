#include "tools/channel_tool.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "loop/signals.h"
#include "transport/names.h"
#include "transport/node_environment.h"

namespace tether::tools {

void AddRootInstanceOptions(ArgParser& parser) {
  parser.AddOption("root", "DIR",
                   "directory holding channel instances (default: "
                   "$TETHER_ROOT if set, as the launcher sets it for its "
                   "nodes, else /dev/shm/tether)",
                   "");
  parser.AddOption("instance", "NAME",
                   "stack instance, a folder under root (default: "
                   "$TETHER_INSTANCE if set, else default)",
                   "");
}

bool RootInstanceFrom(const ParsedArgs& args, const char* command,
                      shm::ChannelOptions* out, std::ostream& err) {
  // A command run by a launched node (or in a shell that exported the
  // launcher's variables) sees the node's stack unless told otherwise.
  shm::ChannelOptions options =
      transport::ReadNodeEnvironment(::getenv, "", "").channels;
  if (args.HasOption("root")) options.root = args.Option("root");
  if (args.HasOption("instance")) options.instance = args.Option("instance");
  if (options.root.empty()) {
    err << command << ": --root is empty; give the directory that holds "
        << "channel instances, e.g. /dev/shm/tether\n";
    return false;
  }
  if (absl::Status bad = transport::CheckInstanceName(options.instance);
      !bad.ok()) {
    err << command << ": " << bad.message() << "\n";
    return false;
  }
  *out = std::move(options);
  return true;
}

absl::StatusOr<std::unique_ptr<transport::ChannelHandle>> OpenChannelByName(
    const shm::ChannelOptions& options, const std::string& name) {
  auto handle = transport::ChannelHandle::Open(options, name);
  if (handle.ok()) {
    // A corrupt channel is reported, never read as if it were fine. A
    // reader-state finding leaves the messages intact: said, and read on.
    if (absl::Status s = (*handle)->CheckConsistency(); !s.ok()) {
      if ((*handle)->corrupt()) return s;
      std::fprintf(stderr, "tether: warning: %s (the messages are intact: "
                   "reading on)\n", std::string(s.message()).c_str());
    }
    return handle;
  }
  if (!absl::IsNotFound(handle.status())) return handle;
  std::string where = options.root + "/" + options.instance;
  absl::StatusOr<std::vector<std::string>> names = shm::Channel::List(options);
  std::string existing;
  if (!names.ok() || names->empty()) {
    existing = "there are no channels there";
  } else {
    existing = "channels there: " + absl::StrJoin(*names, ", ");
  }
  return absl::NotFoundError(absl::StrCat("no channel ", name, " in ", where,
                                          " (", existing,
                                          "; see tether list)"));
}

absl::StatusOr<TypedChannel> OpenTypedChannel(
    const shm::ChannelOptions& options, const std::string& name) {
  auto handle = OpenChannelByName(options, name);
  if (!handle.ok()) return handle.status();
  TypedChannel typed;
  typed.handle = std::move(*handle);
  typed.schemas = std::make_unique<transport::SchemaRegistry>();
  absl::Status added = typed.schemas->AddCodeGeneratorRequest(
      typed.handle->schema(), typed.handle->type_id());
  if (!added.ok()) {
    return absl::DataLossError(absl::StrCat("channel ", name,
                                            " carries no usable schema: ",
                                            added.message()));
  }
  std::optional<capnp::StructSchema> type =
      typed.schemas->Find(typed.handle->type_id());
  if (!type.has_value()) {
    return absl::DataLossError(absl::StrCat("channel ", name, " type ",
                                            typed.handle->type_name(),
                                            " is missing from its schema"));
  }
  typed.type = *type;
  return typed;
}

bool ParseCountOption(const ParsedArgs& args, const char* command,
                      const char* name, uint64_t* out, std::ostream& err) {
  if (!absl::SimpleAtoi(args.Option(name), out)) {
    err << command << ": --" << name << " " << args.Option(name)
        << " is not a count (0, 1, 2, ...); see " << command << " --help\n";
    return false;
  }
  return true;
}

bool ParsePositiveOption(const ParsedArgs& args, const char* command,
                         const char* name, double* out, std::ostream& err) {
  if (!absl::SimpleAtod(args.Option(name), out) || !std::isfinite(*out) ||
      *out <= 0) {
    err << command << ": --" << name << " " << args.Option(name)
        << " is not a number above 0 and at most 1e9; see " << command
        << " --help\n";
    return false;
  }
  if (*out > 1e9) {
    err << command << ": --" << name << " " << args.Option(name)
        << " is too large (at most 1e9); see " << command << " --help\n";
    return false;
  }
  return true;
}

bool ParseRangeOption(const ParsedArgs& args, const char* command,
                      const char* name, double min, double max, double* out,
                      std::ostream& err) {
  const bool number =
      absl::SimpleAtod(args.Option(name), out) && !std::isnan(*out);
  if (!number || *out < min || *out > max) {
    err << command << ": --" << name << " " << args.Option(name)
        << (number ? " is out of range" : " is not a number")
        << ": give a number from " << min << " to " << max << "; see "
        << command << " --help\n";
    return false;
  }
  return true;
}

bool ParseSecondsOption(const ParsedArgs& args, const char* command,
                        const char* name, double* out, std::ostream& err) {
  if (!absl::SimpleAtod(args.Option(name), out) || !std::isfinite(*out) ||
      *out < 0 || *out > 1e9) {
    err << command << ": --" << name << " " << args.Option(name)
        << " is not a number of seconds >= 0; see " << command << " --help\n";
    return false;
  }
  return true;
}

bool ParseStartEndOptions(const ParsedArgs& args, const char* command,
                          std::optional<double>* start,
                          std::optional<double>* end, std::ostream& err) {
  for (const char* name : {"start", "end"}) {
    if (!args.HasOption(name)) continue;
    double v = 0;
    if (!ParseSecondsOption(args, command, name, &v, err)) return false;
    *(name[0] == 's' ? start : end) = v;
  }
  return true;
}

std::shared_ptr<void> InstallStop(const char* command, StopFn* stop,
                                  std::ostream& err,
                                  const std::string& second_signal_note) {
  absl::StatusOr<std::unique_ptr<loop::StopSignals>> signals =
      loop::StopSignals::Install({.signals = {SIGINT, SIGTERM, SIGHUP},
                                  .second_signal_note = second_signal_note});
  if (!signals.ok()) {
    err << command << ": " << signals.status().message() << "\n";
    return nullptr;
  }
  std::shared_ptr<loop::StopSignals> guard = std::move(*signals);
  loop::StopSignals* raw = guard.get();
  *stop = [raw] { return raw->stop_requested(); };
  return guard;
}

}  // namespace tether::tools
