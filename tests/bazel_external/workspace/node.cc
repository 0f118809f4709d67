// A node of the external workspace: its own schema, a stack given as text,
// a sender and a watcher on one UringEventLoop whose wake backend the
// application chooses (argv[2], default: the best the kernel offers), with
// stop signals. Prints "ok <sequence> <backend>".
#include <cstdio>
#include <string>

#include "loop/kernel_probe.h"
#include "loop/signals.h"
#include "loop/uring_event_loop.h"
#include "loop/wake_port.h"
#include "ping.capnp.h"
#include "transport/channel_set.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

using namespace tether;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: node SHM_ROOT [BACKEND]\n");
    return 2;
  }
  loop::UringEventLoopOptions loop_options;
  if (argc > 2) {
    loop_options.port.backend = loop::ParseWakeBackend(argv[2]);
    if (!loop_options.port.backend.has_value()) {
      std::fprintf(stderr, "unknown wake backend %s\n", argv[2]);
      return 2;
    }
  }
  auto stop = loop::StopSignals::Install();
  if (!stop.ok()) return 1;
  loop_options.stop_signals = stop->get();
  transport::SchemaRegistry schemas;
  schemas.Register<Ping>();
  auto stack = transport::ParseStackConfig(
      R"({"channels": [{"name": "/ping", "type": "ping.capnp:Ping",
          "maxSize": 128, "queueDepth": 4}]})",
      "<node stack>", schemas.known_types());
  if (!stack.ok()) {
    std::fprintf(stderr, "%s\n", std::string(stack.status().message()).c_str());
    return 1;
  }
  shm::ChannelOptions options;
  options.root = argv[1];
  options.instance = "external";
  auto channels = transport::ChannelSet::Create(options, *stack, schemas);
  if (!channels.ok()) return 1;
  auto loop =
      loop::UringEventLoop::Create("node", channels->get(), loop_options);
  if (!loop.ok()) {
    std::fprintf(stderr, "%s\n", std::string(loop.status().message()).c_str());
    return 1;
  }
  auto sender = (*loop)->MakeSender<Ping>("/ping");
  if (!sender.ok()) return 1;
  uint64_t got = 0;
  auto watcher = (*loop)->MakeWatcher<Ping>(
      "/ping", [&](Ping::Reader m, const loop::MessageContext&) {
        got = m.getSequence();
        (*loop)->Exit();
      });
  if (!watcher.ok()) return 1;
  (*loop)->OnRun([&] {
    loop::Loan<Ping> loan = (*sender)->MakeLoan();
    loan.root().setSequence(42);
    loan.root().setNote("from an external workspace");
    if (!(*sender)->Send(std::move(loan)).ok()) (*loop)->Exit();
  });
  (*loop)->Run();
  std::printf("ok %llu %s\n", static_cast<unsigned long long>(got),
              std::string(loop::WakeBackendName((*loop)->backend()))
                  .c_str());
  return got == 42 ? 0 : 1;
}
