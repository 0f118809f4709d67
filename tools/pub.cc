#include "tools/pub.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "absl/strings/str_cat.h"
#include "tools/cli.h"
#include "transport/dynamic.h"
#include "transport/raw_endpoints.h"

namespace tether::tools {

int RunPub(const PubOptions& options, std::ostream& out, std::ostream& err) {
  if (options.count == 0 && options.rate_hz <= 0) {
    err << "tether pub: --count 0 (forever) needs --rate\n";
    return kExitUsage;
  }
  absl::StatusOr<TypedChannel> channel =
      OpenTypedChannel(options.channels, options.channel);
  if (!channel.ok()) {
    err << "tether pub: " << channel.status().message() << "\n";
    return kExitFailure;
  }
  absl::StatusOr<std::vector<uint64_t>> words =
      transport::JsonToMessage(channel->type, options.json);
  if (!words.ok()) {
    err << "tether pub: " << options.channel << ": "
        << words.status().message() << "\n";
    return kExitUsage;
  }
  auto publisher = transport::RawPublisher::Create(channel->handle.get());
  if (!publisher.ok()) {
    err << "tether pub: " << options.channel << ": "
        << publisher.status().message();
    if (absl::IsResourceExhausted(publisher.status())) {
      err << " (every publisher entry is taken; stop a publisher or raise "
             "maxPublishers in the stack config)";
    }
    err << "\n";
    return kExitFailure;
  }
  const std::span<const std::byte> framed(
      reinterpret_cast<const std::byte*>(words->data()), words->size() * 8);
  const auto period =
      options.rate_hz > 0
          ? std::chrono::nanoseconds(static_cast<int64_t>(1e9 / options.rate_hz))
          : std::chrono::nanoseconds(0);
  auto next = std::chrono::steady_clock::now();
  uint64_t sent = 0;
  uint64_t skipped = 0;  // ticks dropped after a stall, not sent in a burst
  while (options.count == 0 || sent < options.count) {
    if (options.stop && options.stop()) break;
    if (sent > 0 && period.count() > 0) {
      next += period;
      // Stalled (stopped, descheduled) for more than a period: go on from
      // now, as a phased loop does. Catching up would send a burst that
      // readers of a short queue lose.
      if (const auto now = std::chrono::steady_clock::now();
          now - next > period) {
        skipped += static_cast<uint64_t>((now - next) / period);
        next = now;
      }
      // Sleep in slices so Ctrl-C is seen within 100 ms.
      bool stopped = false;
      for (auto now = std::chrono::steady_clock::now(); now < next;
           now = std::chrono::steady_clock::now()) {
        std::this_thread::sleep_for(
            std::min<std::chrono::nanoseconds>(next - now,
                                               std::chrono::milliseconds(100)));
        if (options.stop && options.stop()) {
          stopped = true;
          break;
        }
      }
      if (stopped) break;
    }
    const transport::PublishResult r = (*publisher)->Publish(framed);
    if (r.status != transport::PublishStatus::kOk) {
      err << "tether pub: " << options.channel << ": ";
      if (r.status == transport::PublishStatus::kTooLarge) {
        // Publish() refuses what is larger than maxSize as given, or (a
        // message of several segments) once rebuilt as one.
        const uint32_t limit = channel->handle->max_size();
        err << "message of " << framed.size()
            << " bytes is larger than the channel's maxSize of " << limit
            << " bytes"
            << (framed.size() > limit ? "" : " once rebuilt as one segment");
      } else {
        err << transport::ToString(r.status);
      }
      err << " (after " << sent << " sent)\n";
      return kExitFailure;
    }
    ++sent;
  }
  out << "published " << sent << (sent == 1 ? " message" : " messages")
      << " on " << options.channel;
  if (skipped > 0) {
    out << " (" << skipped << " tick" << (skipped == 1 ? "" : "s")
        << " of the rate skipped: the process was stalled, and late ticks "
           "are dropped rather than sent in a burst)";
  }
  out << "\n";
  return kExitOk;
}

ArgParser PubParser() {
  ArgParser parser(
      "tether pub",
      "Publishes JSON as a message on CHANNEL, encoded with the schema the\n"
      "channel carries (Int64/UInt64 fields as strings, Cap'n Proto JSON).\n"
      "Once by default; --rate repeats it (until Ctrl-C, or --count).");
  parser.AddPositional("channel", "the channel, e.g. /robot/joint_command");
  parser.AddPositional("json", "the message, e.g. '{\"position\": 1.5}'");
  AddRootInstanceOptions(parser);
  parser.AddOption("rate", "HZ", "publish HZ times a second");
  parser.AddOption("count", "N",
                   "messages to publish (default 1, or until Ctrl-C with "
                   "--rate)");
  return parser;
}

int RunPubCommand(const ParsedArgs& args, std::ostream& out,
                  std::ostream& err) {
  PubOptions options;
  if (!RootInstanceFrom(args, "tether pub", &options.channels, err)) return kExitUsage;
  options.channel = args.Positional("channel");
  options.json = args.Positional("json");
  if (args.HasOption("rate")) {
    if (!ParsePositiveOption(args, "tether pub", "rate", &options.rate_hz,
                             err)) {
      return kExitUsage;
    }
    options.count = 0;
  }
  if (args.HasOption("count") &&
      !ParseCountOption(args, "tether pub", "count", &options.count, err)) {
    return kExitUsage;
  }
  std::shared_ptr<void> guard = InstallStop("tether pub", &options.stop, err);
  if (guard == nullptr) return kExitFailure;
  return RunPub(options, out, err);
}

}  // namespace tether::tools
