// iceoryx 2.0.3 (Debian) in the bench protocol, through its normal user API:
// an UntypedPublisher loans a chunk of the payload's size, the sender writes
// 16 bytes or all of it in place and publishes; each receiver blocks in a
// WaitSet attached to its UntypedSubscriber (SubscriberState::HAS_DATA),
// takes the chunk, reads it in place and releases it. The pinger publishes
// on one service and waits on one subscriber per ponger; each ponger
// replies on its own service. Zero-copy both ways.
//
// Needs a running iox-roudi whose mempools hold chunks of every payload size
// (`./tether bench` starts one in a private mount namespace with its own
// config and /tmp and /dev/shm, and runs this binary inside it).
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/supervisor.h"
#include "iceoryx_hoofs/log/logmanager.hpp"
#include "iceoryx_posh/popo/untyped_publisher.hpp"
#include "iceoryx_posh/popo/untyped_subscriber.hpp"
#include "iceoryx_posh/popo/wait_set.hpp"
#include "iceoryx_posh/runtime/posh_runtime.hpp"

namespace tether::bench {
namespace {

using iox::capro::IdString_t;
using iox::cxx::TruncateToCapacity;

iox::capro::ServiceDescription Service(const std::string& event) {
  return {IdString_t(TruncateToCapacity, "tether-bench"),
          IdString_t(TruncateToCapacity, "pingpong"),
          IdString_t(TruncateToCapacity, event.c_str())};
}

void InitRuntime(const std::string& role) {
  iox::log::LogManager::GetLogManager().SetDefaultLogLevel(
      iox::log::LogLevel::kWarn);
  const std::string name = absl::StrCat("bench-", role, "-", ::getpid());
  iox::runtime::PoshRuntime::initRuntime(
      iox::RuntimeName_t(TruncateToCapacity, name.c_str()));
}

// A queue deep enough for a throughput subscriber (iceoryx's maximum);
// a ping-pong has one message in flight.
iox::popo::SubscriberOptions SubscriberOptionsFor(const Session& s) {
  iox::popo::SubscriberOptions o;
  o.queueCapacity = s.test == Test::kThroughput
                        ? iox::MAX_SUBSCRIBER_QUEUE_CAPACITY
                        : 16;
  return o;
}

absl::Span<const std::byte> Chunk(const void* p) {
  return {static_cast<const std::byte*>(p), sizeof(Header)};
}

absl::Status AwaitSubscribed(const iox::popo::UntypedSubscriber& sub,
                             const std::string& what) {
  return WaitUntil(
      [&] {
        return sub.getSubscriptionState() ==
               iox::SubscribeState::SUBSCRIBED;
      },
      std::chrono::seconds(20), what);
}

absl::Status AwaitSubscriber(const iox::popo::UntypedPublisher& pub,
                             const std::string& what) {
  return WaitUntil([&] { return pub.hasSubscribers(); },
                   std::chrono::seconds(20), what);
}

// Loans, fills with `fill` and publishes a chunk of `size` bytes.
template <typename Fill>
absl::Status Publish(iox::popo::UntypedPublisher& pub, uint32_t size,
                     Fill&& fill) {
  absl::Status status;
  pub.loan(size)
      .and_then([&](void* chunk) {
        fill(absl::Span<std::byte>(static_cast<std::byte*>(chunk), size));
        pub.publish(chunk);
      })
      .or_else([&](auto& error) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "loan of ", size, " bytes failed (error ",
            static_cast<int>(error),
            "): RouDi's mempools need a chunk of that size"));
      });
  return status;
}

absl::Status Ping(const Session& s, Board* board) {
  InitRuntime("ping");
  iox::popo::UntypedPublisher pub(Service("ping"));
  std::vector<std::unique_ptr<iox::popo::UntypedSubscriber>> subs;
  iox::popo::WaitSet<> waitset;
  for (int i = 0; i < s.pongs; ++i) {
    subs.push_back(std::make_unique<iox::popo::UntypedSubscriber>(
        Service(absl::StrCat("pong-", i)), SubscriberOptionsFor(s)));
    if (waitset
            .attachState(*subs.back(), iox::popo::SubscriberState::HAS_DATA,
                         static_cast<uint64_t>(i))
            .has_error()) {
      return absl::InternalError("WaitSet::attachState failed");
    }
  }
  board->SetInfo(absl::StrCat(
      "UntypedPublisher loan/publish, UntypedSubscriber in a WaitSet "
      "(blocking), subscriber queue ",
      SubscriberOptionsFor(s).queueCapacity));
  if (absl::Status st = WaitForPongs(board, s.pongs, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  for (auto& sub : subs) {
    if (absl::Status st = AwaitSubscribed(*sub, "the reply subscription");
        !st.ok()) {
      return st;
    }
  }
  PingDriver driver(s, board);
  for (;;) {
    const PingDriver::Outgoing o = driver.Next();
    absl::Status st = Publish(pub, o.size, [&](absl::Span<std::byte> chunk) {
      driver.Write(chunk, o);
      driver.BeforeSend();
    });
    driver.AfterSend();
    if (!st.ok()) return st;
    if (o.kind == PingDriver::Kind::kTerminate) return absl::OkStatus();
    bool complete = false;
    while (!complete) {
      auto notifications = waitset.wait();
      for (auto& n : notifications) {
        const int i = static_cast<int>(n->getNotificationId());
        while (true) {
          auto taken = subs[i]->take();
          if (taken.has_error()) break;
          const void* chunk = taken.value();
          complete |= driver.Reply(i, ReadHeader(Chunk(chunk)));
          subs[i]->release(chunk);
        }
      }
    }
  }
}

absl::Status Pong(const Session& s, Board* board, int index) {
  InitRuntime(absl::StrCat("pong", index));
  iox::popo::UntypedSubscriber sub(Service("ping"), SubscriberOptionsFor(s));
  iox::popo::UntypedPublisher pub(Service(absl::StrCat("pong-", index)));
  iox::popo::WaitSet<> waitset;
  if (waitset.attachState(sub, iox::popo::SubscriberState::HAS_DATA)
          .has_error()) {
    return absl::InternalError("WaitSet::attachState failed");
  }
  if (absl::Status st = AwaitSubscribed(sub, "the ping subscription");
      !st.ok()) {
    return st;
  }
  if (absl::Status st = AwaitSubscriber(pub, "the pinger to subscribe");
      !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  PongDriver driver(s, board, index);
  for (;;) {
    (void)waitset.wait();
    while (true) {
      auto taken = sub.take();
      if (taken.has_error()) break;
      const void* chunk = taken.value();
      const PongDriver::Action a = driver.OnMessage(Chunk(chunk));
      sub.release(chunk);
      if (a.kind == PongDriver::Kind::kExit) return absl::OkStatus();
      if (a.kind != PongDriver::Kind::kReply) continue;
      absl::Status st = Publish(pub, a.size, [&](absl::Span<std::byte> out) {
        driver.Write(out, a);
      });
      if (!st.ok()) return st;
    }
  }
}

absl::Status Publisher(const Session& s, Board* board) {
  InitRuntime("publisher");
  iox::popo::UntypedPublisher pub(Service("ping"));
  board->SetInfo(absl::StrCat(
      "UntypedPublisher, subscriber in a WaitSet, queue ",
      SubscriberOptionsFor(s).queueCapacity, " (discard oldest)"));
  board->queue_depth = static_cast<int>(SubscriberOptionsFor(s).queueCapacity);
  if (absl::Status st = WaitForPongs(board, 1, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  auto send = [&](const Header& h, uint32_t size) {
    return Publish(pub, size, [&](absl::Span<std::byte> chunk) {
             std::memcpy(chunk.data(), &h, sizeof(h));
           }).ok();
  };
  RateSender rates(s, board);
  absl::Status st = rates.Run(send);
  (void)send(Header{kTerminate, 0}, kMinPayload);
  return st;
}

absl::Status Subscriber(const Session& s, Board* board) {
  InitRuntime("subscriber");
  iox::popo::UntypedSubscriber sub(Service("ping"), SubscriberOptionsFor(s));
  iox::popo::WaitSet<> waitset;
  if (waitset.attachState(sub, iox::popo::SubscriberState::HAS_DATA)
          .has_error()) {
    return absl::InternalError("WaitSet::attachState failed");
  }
  if (absl::Status st = AwaitSubscribed(sub, "the subscription"); !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  RateCounter counter(board);
  for (;;) {
    (void)waitset.wait();
    while (true) {
      auto taken = sub.take();
      if (taken.has_error()) break;
      const bool done = counter.OnMessage(Chunk(taken.value()));
      sub.release(taken.value());
      if (done) return absl::OkStatus();
    }
  }
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) {
  using namespace tether::bench;
  return PingPongMain(argc, argv, "iceoryx", Ping, Pong, Publisher, Subscriber);
}
