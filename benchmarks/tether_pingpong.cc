// tether's application path in the bench protocol: what a new user writes.
// Each process is a UringEventLoop; the pinger sends with a typed
// Sender<Payload> made from its loop and receives replies in MakeWatcher
// callbacks, sending the next message from inside the callback; each ponger
// replies from inside its own watcher callback. Channels come from a stack
// config, created once by the supervisor before the processes start.
//
//   --variant=BACKEND   UringEventLoopOptions::port.backend (uring_futex,
//                       futex_waitv, ...); empty: what the kernel offers
//   --spin_us=N         UringEventLoopOptions::port.spin
//   --queue_depth=N     the channels' queueDepth (latency, fanout)
//   --huge_pages=0      the channels keep 4 KiB pages (ChannelOptions)
//   --api=raw           latency/fanout through MakeRawSender and
//                       MakeRawWatcher instead (the transport and loop
//                       without the typed layer, for comparison)
//
// A payload is a Cap'n Proto Data field of the case's size, built in place
// in the loaned slot: "touch16" writes its first 16 bytes, "full" all of it.
// With --api=raw it is the slot's bytes alone: no framing, no check.
#include <ftw.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/bench.capnp.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/supervisor.h"
#include "loop/kernel_probe.h"
#include "loop/uring_event_loop.h"
#include "loop/wake_port.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"
#include "util/json_writer.h"

namespace tether::bench {
namespace {

constexpr char kPing[] = "/bench/ping";
constexpr char kType[] = "benchmarks/bench.capnp:Payload";
// Cap'n Proto framing around the Data field: segment table, root pointer,
// the struct's pointer, padding to a word.
constexpr uint32_t kFramingBytes = 64;

// One message is in flight in a ping-pong; a throughput subscriber gets a
// queue deep enough to ride out being preempted for a few milliseconds.
constexpr int kThroughputDepth = 4096;

std::string PongChannel(int i) { return absl::StrCat("/bench/pong/", i); }

absl::Span<const std::byte> Bytes(capnp::Data::Reader d) {
  return {reinterpret_cast<const std::byte*>(d.begin()), d.size()};
}
absl::Span<std::byte> Bytes(std::span<std::byte> d) {
  return {d.data(), d.size()};
}

// The payload as a blob written in place in the slot (framing.h): never
// zeroed or copied; "touch16" writes 16 bytes of it, "full" all of them.
std::span<std::byte> InitPayload(transport::Loan<Payload>& loan,
                                 uint32_t size) {
  return loan.InitBlob("data", size);
}

// The channels of a session as a stack config.
std::string StackJson(const Session& s) {
  const uint32_t max_size = s.max_payload() + kFramingBytes;
  const int depth =
      s.test == Test::kThroughput ? kThroughputDepth : s.queue_depth;
  std::string json = absl::StrFormat(
      "{\"channels\": [\n  {\"name\": \"%s\", \"type\": \"%s\", \"maxSize\": "
      "%u, \"queueDepth\": %d, \"maxPublishers\": 1, \"maxPinned\": %d}",
      kPing, kType, max_size, depth, s.pongs + 1);
  for (int i = 0; i < s.pongs; ++i) {
    absl::StrAppendFormat(
        &json,
        ",\n  {\"name\": \"%s\", \"type\": \"%s\", \"maxSize\": %u, "
        "\"queueDepth\": %d, \"maxPublishers\": 1, \"maxPinned\": 2}",
        PongChannel(i), kType, max_size, depth);
  }
  return json + "\n]}\n";
}

// Shared by the roles; built by the supervisor before it forks.
struct Setup {
  transport::SchemaRegistry schemas;
  std::optional<transport::StackConfig> stack;
  shm::ChannelOptions options;
  bool remove_root = false;
};

absl::Status Prepare(const Session& s, Setup* setup) {
  setup->schemas.Register<Payload>();
  setup->options.root = s.shm_root.empty()
                            ? absl::StrCat("/dev/shm/tether-bench-", ::getpid())
                            : s.shm_root;
  setup->options.instance = "bench";
  setup->options.prefault = true;
  setup->options.huge_pages = s.huge_pages != 0;
  setup->remove_root = true;
  absl::StatusOr<transport::StackConfig> stack = transport::ParseStackConfig(
      StackJson(s), "<bench stack>", setup->schemas.known_types());
  if (!stack.ok()) return stack.status();
  setup->stack.emplace(std::move(*stack));
  // Create every channel once, before any process opens them.
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> set =
      transport::ChannelSet::Create(setup->options, *setup->stack,
                                    setup->schemas);
  return set.status();
}

void Cleanup(Setup* setup) {
  if (!setup->remove_root) return;
  ::nftw(
      setup->options.root.c_str(),
      [](const char* path, const struct stat*, int, struct FTW*) {
        return ::remove(path);
      },
      16, FTW_DEPTH | FTW_PHYS);
}

// A loop of this session's kind over its channels.
struct Node {
  std::unique_ptr<transport::ChannelSet> channels;
  std::unique_ptr<loop::UringEventLoop> loop;
};

absl::StatusOr<Node> MakeNode(const Session& s, Setup* setup,
                              const std::string& name) {
  Node node;
  absl::StatusOr<std::unique_ptr<transport::ChannelSet>> set =
      transport::ChannelSet::Create(setup->options, *setup->stack,
                                    setup->schemas);
  if (!set.ok()) return set.status();
  node.channels = std::move(*set);
  loop::UringEventLoopOptions options;
  if (!s.variant.empty()) {
    options.port.backend = loop::ParseWakeBackend(s.variant);
    if (!options.port.backend.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--variant=", s.variant,
          ": not a wake backend (uring_futex, futex_waitv, ...)"));
    }
  }
  options.port.spin = std::chrono::microseconds(s.spin_us);
  absl::StatusOr<std::unique_ptr<loop::UringEventLoop>> l =
      loop::UringEventLoop::Create(name, node.channels.get(), options);
  if (!l.ok()) return l.status();
  node.loop = std::move(*l);
  return node;
}

absl::Status SendStatus(transport::PublishStatus status) {
  if (status == transport::PublishStatus::kOk) return absl::OkStatus();
  return absl::InternalError(
      absl::StrCat("send failed: ", transport::ToString(status)));
}

// The two APIs a ping-pong can use (--api): what makes a sender and a
// watcher of the payload's bytes, builds `size` payload bytes in a loan and
// commits them. Typed: a Payload built in place (its Data field a blob in
// the slot), every received message checked before the callback. Raw: the
// bytes alone in the slot, no framing and no check.
struct TypedApi {
  using Sender = loop::Sender<Payload>;
  struct Out {
    transport::Loan<Payload> loan;
    std::span<std::byte> bytes;
  };
  static absl::StatusOr<std::unique_ptr<Sender>> MakeSender(
      loop::UringEventLoop* loop, const std::string& channel) {
    return loop->MakeSender<Payload>(channel);
  }
  template <typename Fn>
  static absl::Status Watch(loop::UringEventLoop* loop,
                            const std::string& channel, Fn fn) {
    return loop
        ->MakeWatcher<Payload>(
            channel,
            [fn = std::move(fn)](Payload::Reader m,
                                 const transport::MessageContext&) mutable {
              fn(Bytes(m.getData()));
            })
        .status();
  }
  static Out Build(Sender& sender, uint32_t size) {
    Out out{sender.MakeLoan(), {}};
    if (out.loan.valid()) out.bytes = InitPayload(out.loan, size);
    return out;
  }
  static bool Valid(const Out& out) { return out.loan.valid(); }
  static transport::PublishStatus Commit(Sender& sender, Out& out) {
    return sender.Send(std::move(out.loan)).status;
  }
};

struct RawApi {
  using Sender = loop::RawSender;
  struct Out {
    std::span<std::byte> bytes;
  };
  static absl::StatusOr<std::unique_ptr<Sender>> MakeSender(
      loop::UringEventLoop* loop, const std::string& channel) {
    return loop->MakeRawSender(channel);
  }
  template <typename Fn>
  static absl::Status Watch(loop::UringEventLoop* loop,
                            const std::string& channel, Fn fn) {
    return loop
        ->MakeRawWatcher(channel,
                         [fn = std::move(fn)](
                             const transport::RawMessage& m) mutable {
                           fn(absl::Span<const std::byte>(m.bytes.data(),
                                                          m.bytes.size()));
                         })
        .status();
  }
  static Out Build(Sender& sender, uint32_t size) {
    const std::span<std::byte> loan = sender.Loan();
    return {loan.size() >= size ? loan.first(size) : std::span<std::byte>()};
  }
  static bool Valid(const Out& out) { return !out.bytes.empty(); }
  static transport::PublishStatus Commit(Sender& sender, Out& out) {
    return sender.Send(out.bytes.size()).status;
  }
};

template <typename Api>
absl::Status Ping(const Session& s, Setup* setup, Board* board) {
  absl::StatusOr<Node> node = MakeNode(s, setup, "bench-ping");
  if (!node.ok()) return node.status();
  loop::UringEventLoop* loop = node->loop.get();
  board->SetInfo(loop->backend_description());
  auto sender = Api::MakeSender(loop, kPing);
  if (!sender.ok()) return sender.status();
  PingDriver driver(s, board);
  absl::Status failure;
  auto send_next = [&] {
    const PingDriver::Outgoing o = driver.Next();
    typename Api::Out out = Api::Build(**sender, o.size);
    if (!Api::Valid(out)) {
      failure = absl::InternalError("no loan");
      loop->Exit();
      return;
    }
    driver.Write(Bytes(out.bytes), o);
    driver.BeforeSend();
    const transport::PublishStatus status = Api::Commit(**sender, out);
    driver.AfterSend();
    if (absl::Status st = SendStatus(status); !st.ok()) {
      failure = st;
      loop->Exit();
    }
    if (o.kind == PingDriver::Kind::kTerminate) loop->Exit();
  };
  for (int i = 0; i < s.pongs; ++i) {
    absl::Status st = Api::Watch(
        loop, PongChannel(i), [&, i](absl::Span<const std::byte> bytes) {
          if (driver.Reply(i, ReadHeader(bytes))) send_next();
        });
    if (!st.ok()) return st;
  }
  if (absl::Status st = WaitForPongs(board, s.pongs, std::chrono::seconds(10));
      !st.ok()) {
    return st;
  }
  loop->OnRun(send_next);
  loop->Run();
  return failure;
}

template <typename Api>
absl::Status Pong(const Session& s, Setup* setup, Board* board, int index) {
  absl::StatusOr<Node> node =
      MakeNode(s, setup, absl::StrCat("bench-pong-", index));
  if (!node.ok()) return node.status();
  loop::UringEventLoop* loop = node->loop.get();
  auto sender = Api::MakeSender(loop, PongChannel(index));
  if (!sender.ok()) return sender.status();
  PongDriver driver(s, board, index);
  absl::Status failure;
  absl::Status st =
      Api::Watch(loop, kPing, [&](absl::Span<const std::byte> bytes) {
        const PongDriver::Action a = driver.OnMessage(bytes);
        if (a.kind == PongDriver::Kind::kExit) {
          loop->Exit();
          return;
        }
        if (a.kind != PongDriver::Kind::kReply) return;
        typename Api::Out out = Api::Build(**sender, a.size);
        if (!Api::Valid(out)) {
          failure = absl::InternalError("no loan");
          loop->Exit();
          return;
        }
        driver.Write(Bytes(out.bytes), a);
        if (absl::Status sst = SendStatus(Api::Commit(**sender, out));
            !sst.ok()) {
          failure = sst;
          loop->Exit();
        }
      });
  if (!st.ok()) return st;
  MarkPongReady(board);  // the watcher exists: nothing sent from now is missed
  loop->Run();
  return failure;
}

absl::Status Publisher(const Session& s, Setup* setup, Board* board) {
  absl::StatusOr<Node> node = MakeNode(s, setup, "bench-publisher");
  if (!node.ok()) return node.status();
  loop::UringEventLoop* loop = node->loop.get();
  board->SetInfo(loop->backend_description());
  board->queue_depth = kThroughputDepth;
  auto sender = loop->MakeSender<Payload>(kPing);
  if (!sender.ok()) return sender.status();
  if (absl::Status st = WaitForPongs(board, 1, std::chrono::seconds(10));
      !st.ok()) {
    return st;
  }
  auto send = [&](const Header& h, uint32_t size) {
    auto loan = (*sender)->MakeLoan();
    if (!loan.valid()) return false;
    std::span<std::byte> d = InitPayload(loan, size);
    std::memcpy(d.data(), &h, sizeof(h));
    return (*sender)->Send(std::move(loan)).status ==
           transport::PublishStatus::kOk;
  };
  absl::Status result;
  loop->OnRun([&] {
    RateSender rates(s, board);
    result = rates.Run(send);
    (void)send(Header{kTerminate, 0}, kMinPayload);
    loop->Exit();
  });
  loop->Run();
  return result;
}

absl::Status Subscriber(const Session& s, Setup* setup, Board* board) {
  absl::StatusOr<Node> node = MakeNode(s, setup, "bench-subscriber");
  if (!node.ok()) return node.status();
  loop::UringEventLoop* loop = node->loop.get();
  RateCounter counter(board);
  auto st = loop->MakeWatcher<Payload>(
      kPing, [&](Payload::Reader m, const transport::MessageContext&) {
        if (counter.OnMessage(Bytes(m.getData()))) loop->Exit();
      });
  if (!st.ok()) return st.status();
  MarkPongReady(board);
  loop->Run();
  return absl::OkStatus();
}

// --probe: which wake backends this kernel offers, as one JSON line, so the
// driver measures each one that can run and says why the others cannot.
int Probe() {
  const loop::KernelFeatures features = loop::ProbeKernel();
  absl::StatusOr<loop::WakeBackendChoice> def =
      loop::ChooseWakeBackend(features);
  std::string line = absl::StrCat(
      "{\"default\":",
      util::JsonQuote(
          def.ok() ? std::string(loop::WakeBackendName(def->backend)) : ""),
      ",\"default_reason\":",
      util::JsonQuote(def.ok() ? def->reason
                               : std::string(def.status().message())),
      ",\"kernel\":", util::JsonQuote(features.kernel_release),
      ",\"backends\":[");
  // Every backend the loop knows by name (kernel_probe.h).
  const char* names[] = {"uring_futex", "futex_waitv", "uring_persistent"};
  bool first = true;
  for (const char* name : names) {
    const std::optional<loop::WakeBackend> b = loop::ParseWakeBackend(name);
    if (!b.has_value()) continue;
    absl::StatusOr<loop::WakeBackendChoice> c =
        loop::ChooseWakeBackend(features, *b);
    absl::StrAppend(
        &line, first ? "" : ",", "{\"name\":", util::JsonQuote(name),
        ",\"ok\":", c.ok() ? "true" : "false", ",\"reason\":",
        util::JsonQuote(c.ok() ? c->reason : std::string(c.status().message())),
        "}");
    first = false;
  }
  std::printf("%s]}\n", line.c_str());
  return 0;
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) {
  using namespace tether::bench;
  if (argc == 2 && std::string(argv[1]) == "--probe") return Probe();
  auto setup = std::make_unique<Setup>();
  return RunnerMain(argc, argv, "tether", [&](const Session& s) {
    Roles roles;
    roles.prepare = [&] { return Prepare(s, setup.get()); };
    roles.cleanup = [&] { Cleanup(setup.get()); };
    if (s.test == Test::kThroughput) {
      roles.ping = [&](Board* b) { return Publisher(s, setup.get(), b); };
      roles.pong = [&](Board* b, int) { return Subscriber(s, setup.get(), b); };
    } else if (s.raw_api) {
      roles.ping = [&](Board* b) { return Ping<RawApi>(s, setup.get(), b); };
      roles.pong = [&](Board* b, int i) {
        return Pong<RawApi>(s, setup.get(), b, i);
      };
    } else {
      roles.ping = [&](Board* b) { return Ping<TypedApi>(s, setup.get(), b); };
      roles.pong = [&](Board* b, int i) {
        return Pong<TypedApi>(s, setup.get(), b, i);
      };
    }
    return roles;
  });
}
