// ROS 1 Noetic (Debian) TCPROS in the bench protocol: two (or more) roscpp
// nodes, std_msgs/UInt8MultiArray of the payload's size, what a ROS user
// writes. The pinger publishes on /tether_bench/ping and spins a
// single-threaded ros::spin(); each reply callback publishes the next ping
// from inside the callback; each ponger replies on /tether_bench/pong/<i>
// from inside its callback. Subscriptions use TransportHints().tcpNoDelay()
// (what a latency-minded ROS user sets). "touch16" writes 16 bytes of the
// message's data vector, "full" all of it; roscpp serializes and copies
// every byte either way.
//
// Needs ROS_MASTER_URI (and ROS_IP / ROS_HOME) pointing at a running
// roscore: `./tether bench` starts a private one on a free port.
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/supervisor.h"
#include "ros/ros.h"
#include "std_msgs/UInt8MultiArray.h"

namespace tether::bench {
namespace {

using Msg = std_msgs::UInt8MultiArray;

constexpr char kPing[] = "/tether_bench/ping";
std::string PongTopic(int i) { return absl::StrCat("/tether_bench/pong/", i); }

// A ping-pong has one message in flight; throughput gets deep queues on
// both sides (roscpp drops the oldest when one is full).
int QueueSize(const Session& s) {
  return s.test == Test::kThroughput ? 10000 : 10;
}

absl::Status Init(const std::string& role) {
  int argc = 1;
  char arg0[] = "tether_bench";
  char* argv[] = {arg0, nullptr};
  ros::init(argc, argv, absl::StrCat("tether_bench_", role, "_", ::getpid()),
            ros::init_options::NoSigintHandler |
                ros::init_options::NoRosout);
  // ros::master::check() returns at once; NodeHandle would wait forever.
  for (int i = 0; !ros::master::check(); ++i) {
    if (i == 100) {
      return absl::UnavailableError(
          absl::StrCat("no ROS master at ", ros::master::getURI(),
                       " (is roscore running? `./tether bench` starts one)"));
    }
    ::usleep(50000);
  }
  return absl::OkStatus();
}

absl::Span<const std::byte> Bytes(const Msg& m) {
  return {reinterpret_cast<const std::byte*>(m.data.data()), m.data.size()};
}
absl::Span<std::byte> Resize(Msg& m, uint32_t size) {
  m.data.resize(size);
  return {reinterpret_cast<std::byte*>(m.data.data()), m.data.size()};
}

absl::Status Ping(const Session& s, Board* board) {
  if (absl::Status st = Init("ping"); !st.ok()) return st;
  ros::NodeHandle nh;
  ros::Publisher pub = nh.advertise<Msg>(kPing, QueueSize(s));
  PingDriver driver(s, board);
  Msg out;
  auto send_next = [&] {
    const PingDriver::Outgoing o = driver.Next();
    driver.Write(Resize(out, o.size), o);
    driver.BeforeSend();
    pub.publish(out);
    driver.AfterSend();
    if (o.kind == PingDriver::Kind::kTerminate) ros::shutdown();
  };
  std::vector<ros::Subscriber> subs;
  for (int i = 0; i < s.pongs; ++i) {
    subs.push_back(nh.subscribe<Msg>(
        PongTopic(i), QueueSize(s),
        [&, i](const Msg::ConstPtr& m) {
          if (driver.Reply(i, ReadHeader(Bytes(*m)))) send_next();
        },
        ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay()));
  }
  board->SetInfo(absl::StrCat(
      "roscpp ", ROS_VERSION_MAJOR, ".", ROS_VERSION_MINOR, ".",
      ROS_VERSION_PATCH,
      " TCPROS, std_msgs/UInt8MultiArray, tcpNoDelay, queue ",
      QueueSize(s), ", single-threaded spin"));
  if (absl::Status st = WaitForPongs(board, s.pongs, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = WaitUntil(
          [&] {
            return pub.getNumSubscribers() >= static_cast<uint32_t>(s.pongs);
          },
          std::chrono::seconds(30), "every ponger to connect to the ping topic");
      !st.ok()) {
    return st;
  }
  send_next();
  ros::spin();
  return absl::OkStatus();
}

absl::Status Pong(const Session& s, Board* board, int index) {
  if (absl::Status st = Init(absl::StrCat("pong", index)); !st.ok()) return st;
  ros::NodeHandle nh;
  ros::Publisher pub = nh.advertise<Msg>(PongTopic(index), QueueSize(s));
  PongDriver driver(s, board, index);
  Msg out;
  ros::Subscriber sub = nh.subscribe<Msg>(
      kPing, QueueSize(s),
      [&](const Msg::ConstPtr& m) {
        const PongDriver::Action a = driver.OnMessage(Bytes(*m));
        if (a.kind == PongDriver::Kind::kExit) {
          ros::shutdown();
          return;
        }
        if (a.kind != PongDriver::Kind::kReply) return;
        driver.Write(Resize(out, a.size), a);
        pub.publish(out);
      },
      ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay());
  if (absl::Status st = WaitUntil(
          [&] { return pub.getNumSubscribers() >= 1 && sub.getNumPublishers() >= 1; },
          std::chrono::seconds(30), "the pinger to connect");
      !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  ros::spin();
  return absl::OkStatus();
}

absl::Status Publisher(const Session& s, Board* board) {
  if (absl::Status st = Init("publisher"); !st.ok()) return st;
  ros::NodeHandle nh;
  ros::Publisher pub = nh.advertise<Msg>(kPing, QueueSize(s));
  board->SetInfo(absl::StrCat("roscpp TCPROS, std_msgs/UInt8MultiArray, "
                              "tcpNoDelay, publisher and subscriber queue ",
                              QueueSize(s)));
  board->queue_depth = QueueSize(s);
  if (absl::Status st = WaitForPongs(board, 1, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  if (absl::Status st =
          WaitUntil([&] { return pub.getNumSubscribers() >= 1; },
                    std::chrono::seconds(30), "the subscriber to connect");
      !st.ok()) {
    return st;
  }
  Msg out;
  auto send = [&](const Header& h, uint32_t size) {
    absl::Span<std::byte> b = Resize(out, size);
    std::memcpy(b.data(), &h, sizeof(h));
    pub.publish(out);
    return true;
  };
  RateSender rates(s, board);
  absl::Status st = rates.Run(send);
  (void)send(Header{kTerminate, 0}, kMinPayload);
  ::usleep(100000);  // let roscpp's writer thread flush the last message
  ros::shutdown();
  return st;
}

absl::Status Subscriber(const Session& s, Board* board) {
  if (absl::Status st = Init("subscriber"); !st.ok()) return st;
  ros::NodeHandle nh;
  RateCounter counter(board);
  ros::Subscriber sub = nh.subscribe<Msg>(
      kPing, QueueSize(s),
      [&](const Msg::ConstPtr& m) {
        if (counter.OnMessage(Bytes(*m))) ros::shutdown();
      },
      ros::VoidConstPtr(), ros::TransportHints().tcpNoDelay());
  if (absl::Status st = WaitUntil([&] { return sub.getNumPublishers() >= 1; },
                                  std::chrono::seconds(30),
                                  "the publisher to connect");
      !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  ros::spin();
  return absl::OkStatus();
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) {
  using namespace tether::bench;
  return PingPongMain(argc, argv, "ros1", Ping, Pong, Publisher, Subscriber);
}
