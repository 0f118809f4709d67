#include "tools/echo.h"

#include <chrono>
#include <cstring>
#include <vector>

#include "absl/strings/str_format.h"
#include "loop/channel_waiter.h"
#include "loop/clock.h"
#include "tools/cli.h"
#include "tools/package_decoder.h"
#include "transport/dynamic.h"

namespace tether::tools {

std::string FormatEchoLine(const std::string& message_json,
                           const transport::MessageContext& c,
                           bool with_context) {
  if (!with_context) return message_json;
  const double latency_us =
      (c.monotonic_receive_ns - c.monotonic_send_ns) / 1000.0;
  // The origin as 16 hex digits (a JSON number would lose its low bits in
  // most readers); 0 is a tether node's, else a bridge's tag (the ROS
  // bridge's: its graph's /tether/graph).
  return absl::StrFormat(
      "{\"queue_index\":%u,\"monotonic_send_ns\":%d,\"realtime_send_ns\":%d,"
      "\"publisher_pid\":%u,\"origin\":\"%016x\",\"latency_us\":%.1f,"
      "\"missed\":%u,\"message\":%s}",
      c.queue_index, c.monotonic_send_ns, c.realtime_send_ns, c.publisher_pid,
      c.origin, latency_us, c.missed, message_json);
}

int RunEcho(const EchoOptions& options, std::ostream& out, std::ostream& err) {
  absl::StatusOr<TypedChannel> channel =
      OpenTypedChannel(options.channels, options.channel);
  if (!channel.ok()) {
    err << "tether echo: " << channel.status().message() << "\n";
    return kExitFailure;
  }
  transport::SubscriberOptions sub_options{.pin = !options.force_unpinned,
                                           .from_oldest = options.from_oldest};
  // A pinned reader whose pins are all taken reads as a guest (copies).
  auto sub = transport::RawSubscriber::Create(channel->handle.get(),
                                              sub_options);
  if (!sub.ok()) {
    err << "tether echo: " << options.channel << ": "
        << sub.status().message() << "\n";
    return kExitFailure;
  }
  absl::StatusOr<std::unique_ptr<loop::ChannelWaiter>> waiter =
      loop::ChannelWaiter::Create();
  if (waiter.ok()) {
    if (absl::Status s = (*waiter)->Add(sub->get()); !s.ok()) {
      waiter = s;
    }
  }
  if (!waiter.ok()) {
    err << "tether echo: " << waiter.status().message() << "\n";
    return kExitFailure;
  }
  const bool pinned = sub_options.pin && !(*sub)->guest();
  if ((*sub)->guest()) {
    err << "tether echo: note: " << options.channel << ": "
        << ((*sub)->guest_reason().empty() ? channel->handle->GuestReason()
                                           : (*sub)->guest_reason())
        << "\n";
  } else if (!pinned) {
    err << "tether echo: note: reading " << options.channel
        << " unpinned (its pins are not used); each message is copied and "
           "dropped if overwritten while read\n";
  }

  const int64_t min_gap_ns =
      options.rate_hz > 0 ? static_cast<int64_t>(1e9 / options.rate_hz) : 0;
  int64_t next_print_ns = 0;
  uint64_t printed = 0, skipped = 0, missed = 0, bad = 0;
  std::string first_bad;  // why the first undecodable message was
  uint64_t reported_missed = 0;  // the part of `missed` the reader reported
  std::vector<uint64_t> copy;  // unpinned: aligned copy of the message
  // Types decoded by another package's binary (bridged ROS messages: the
  // ROS message itself, decoded with the definition each envelope carries).
  std::unique_ptr<DecoderProcess> package_decoder;
  const PackageDecoder* decoder_info =
      PackageDecoderFor(channel->handle->type_id());
  if (decoder_info != nullptr) {
    absl::StatusOr<std::unique_ptr<DecoderProcess>> started =
        DecoderProcess::Start(*decoder_info);
    if (!started.ok()) {
      err << "tether echo: " << options.channel << ": "
          << started.status().message() << "\n";
      return kExitFailure;
    }
    package_decoder = *std::move(started);
  }
  int exit_code = kExitOk;
  while (options.count == 0 || printed < options.count) {
    if (options.stop && options.stop()) break;
    transport::RawMessage m;
    const transport::ReceiveStatus status = (*sub)->Next(&m);
    if (status == transport::ReceiveStatus::kNothingNew) {
      // At most 100 ms, so a stop request is seen.
      (*waiter)->Wait(loop::MonotonicNow() + std::chrono::milliseconds(100));
      continue;
    }
    if (status != transport::ReceiveStatus::kOk) {
      err << "tether echo: " << options.channel << ": "
          << transport::ToString(status);
      if (channel->handle->corrupt()) {
        err << ": " << channel->handle->corruption() << "; remove "
            << channel->handle->path() << " and restart the stack's nodes on it";
      }
      err << "\n";
      exit_code = kExitFailure;
      break;
    }
    if (m.context.missed > 0) {
      missed += m.context.missed;
      reported_missed += m.context.missed;
      err << "tether echo: missed " << m.context.missed
          << " messages before queue index " << m.context.queue_index << "\n";
    }
    const int64_t now = m.context.monotonic_receive_ns;
    if (min_gap_ns > 0 && now < next_print_ns) {
      ++skipped;
      (*sub)->Release();
      continue;
    }
    std::span<const std::byte> bytes = m.bytes;
    if (!pinned) {
      copy.assign((bytes.size() + 7) / 8, 0);
      std::memcpy(copy.data(), bytes.data(), bytes.size());
      if (!(*sub)->StillValid(m)) {
        (*sub)->Release();
        ++missed;
        err << "tether echo: missed 1 message (queue index "
            << m.context.queue_index << " overwritten while copied)\n";
        continue;
      }
      bytes = {reinterpret_cast<const std::byte*>(copy.data()), bytes.size()};
    } else if (package_decoder != nullptr) {
      // A decoder round trip may take seconds: copy the pinned message and
      // unpin it first, so echo never holds one of the channel's pins that
      // long (the pin guarantees the copy is whole).
      copy.assign((bytes.size() + 7) / 8, 0);
      std::memcpy(copy.data(), bytes.data(), bytes.size());
      bytes = {reinterpret_cast<const std::byte*>(copy.data()), bytes.size()};
      (*sub)->Release();
    }
    absl::StatusOr<std::string> json =
        package_decoder != nullptr
            ? package_decoder->Decode(bytes)
            : transport::MessageToJson(channel->type, bytes);
    (*sub)->Release();
    if (package_decoder != nullptr && !json.ok() &&
        !absl::IsInvalidArgument(json.status())) {
      // The decoder process failed: no later message can be decoded.
      err << "tether echo: " << options.channel << ": "
          << json.status().message() << "\n";
      exit_code = kExitFailure;
      break;
    }
    if (!json.ok()) {
      if (bad++ == 0) first_bad = std::string(json.status().message());
      err << "tether echo: queue index " << m.context.queue_index << ": "
          << json.status().message() << "\n";
      continue;
    }
    out << FormatEchoLine(*json, m.context, options.context) << "\n";
    out.flush();
    ++printed;
    if (min_gap_ns > 0) next_print_ns = now + min_gap_ns;
  }
  // The reader's own count also holds losses no later message reported;
  // the rest of `missed` are copies overwritten while read (unpinned).
  missed = (*sub)->total_missed() + (missed - reported_missed);
  err << "tether echo: " << printed << " printed";
  if (skipped > 0) err << ", " << skipped << " skipped by --rate";
  err << ", missed " << missed;
  if (bad > 0) err << ", " << bad << " undecodable";
  err << "\n";
  if (exit_code == kExitOk && printed == 0 && bad > 0) {
    // Messages came, and not one of them could be shown.
    err << "tether echo: " << options.channel << ": none of the " << bad
        << " messages received ";
    if (package_decoder != nullptr) {
      // The envelope may be sound and only what it carries bad (a ROS
      // message that does not match the definition it came with): say what
      // the decoder said rather than blame the channel's type.
      err << "could be decoded by " << decoder_info->path
          << " (the first: " << first_bad
          << "); the process writing this channel, or what feeds it, sends "
             "bad data\n";
    } else {
      err << "decodes as " << channel->handle->type_name()
          << "; a process writing this channel sends invalid bytes\n";
    }
    exit_code = kExitFailure;
  }
  return exit_code;
}

ArgParser EchoParser() {
  ArgParser parser(
      "tether echo",
      "Prints each message of CHANNEL as one JSON line, decoded with the\n"
      "schema the channel carries (channels of bridged ROS messages: the ROS\n"
      "message, decoded with the definition each envelope carries by\n"
      "ros_bridge/ros_json, which runs beside the CLI). Lost messages are\n"
      "reported on stderr (\"missed N\"), with a tally at the end. Sleeps on\n"
      "the channel's futex between messages. Ctrl-C (or --count) ends it.\n"
      "Reads pinned; if the channel's pins are all taken, reads unpinned\n"
      "copies (with a note). A message that does not decode is reported on\n"
      "stderr (\"undecodable\" in the tally) and skipped. Exits 1 if the\n"
      "channel cannot be read (corrupt, a decoder that failed), or if\n"
      "messages arrived and none of them decoded; else 0.");
  parser.AddPositional("channel", "the channel, e.g. /robot/imu");
  AddRootInstanceOptions(parser);
  parser.AddOption("count", "N", "stop after printing N messages (0: never)",
                   "0");
  parser.AddOption("rate", "HZ",
                   "print at most HZ lines a second (the others are skipped "
                   "and counted)");
  parser.AddFlag("context",
                 "add queue index, send times, publisher pid, origin (0: "
                 "made by a tether node; else a bridge's tag), latency "
                 "(receive - send) and missed to each line");
  parser.AddFlag("from-oldest",
                 "start with the oldest message still in the channel");
  return parser;
}

int RunEchoCommand(const ParsedArgs& args, std::ostream& out,
                   std::ostream& err) {
  EchoOptions options;
  if (!RootInstanceFrom(args, "tether echo", &options.channels, err)) return kExitUsage;
  options.channel = args.Positional("channel");
  options.context = args.Flag("context");
  options.from_oldest = args.Flag("from-oldest");
  if (!ParseCountOption(args, "tether echo", "count", &options.count, err)) {
    return kExitUsage;
  }
  if (args.HasOption("rate") &&
      !ParsePositiveOption(args, "tether echo", "rate", &options.rate_hz,
                           err)) {
    return kExitUsage;
  }
  std::shared_ptr<void> guard = InstallStop("tether echo", &options.stop, err);
  if (guard == nullptr) return kExitFailure;
  return RunEcho(options, out, err);
}

}  // namespace tether::tools
