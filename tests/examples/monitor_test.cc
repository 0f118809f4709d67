// The monitor node on its own channels: loss, sent counts, controller cycle
// gaps and the MonitorStatus it publishes.
#include "examples/monitor.h"

#include <chrono>
#include <cstring>
#include <span>
#include <memory>
#include <string>

#include "examples/demo_schemas.h"
#include "examples/summary.h"
#include "gtest/gtest.h"
#include "loop/simulated_event_loop.h"
#include "transport/config.h"

namespace tether::examples {
namespace {

using std::chrono::milliseconds;

constexpr char kStack[] = R"({
  "channels": [
    {"name": "/test/command", "type": "examples/demo.capnp:JointCommand",
     "maxSize": 1024, "queueDepth": 16, "maxPublishers": 2},
    {"name": "/test/imu", "type": "examples/demo.capnp:ImuSample",
     "maxSize": 256, "queueDepth": 16},
    {"name": "/test/status", "type": "examples/demo.capnp:MonitorStatus",
     "maxSize": 4096, "queueDepth": 16}
  ]
})";

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterDemoSchemas(&schemas_);
    auto stack = transport::ParseStackConfig(kStack, "<test stack>",
                                               schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
    auto factory = loop::SimulatedEventLoopFactory::Create(*stack_, schemas_);
    ASSERT_TRUE(factory.ok()) << factory.status();
    factory_ = std::move(*factory);

    MonitorOptions options;
    options.channels = {"/test/command", "/test/imu", "/test/status"};
    options.command_channel = "/test/command";
    options.status_channel = "/test/status";
    options.silent_after = milliseconds(50);
    auto node = MonitorNode::Create(factory_->MakeEventLoop("monitor"), options);
    ASSERT_TRUE(node.ok()) << node.status();
    monitor_ = std::move(*node);

    test_loop_ = factory_->MakeEventLoop("test");
    auto command = test_loop_->MakeSender<JointCommand>("/test/command");
    ASSERT_TRUE(command.ok());
    command_ = std::move(*command);
    auto imu = test_loop_->MakeSender<ImuSample>("/test/imu");
    ASSERT_TRUE(imu.ok());
    imu_ = std::move(*imu);
    ASSERT_TRUE(test_loop_
                    ->MakeWatcher<MonitorStatus>(
                        "/test/status",
                        [this](MonitorStatus::Reader m,
                               const loop::MessageContext&) {
                          ++statuses_;
                          last_status_ = SummaryFromStatus(m);
                          last_note_ = m.getNote().cStr();
                        })
                    .ok());
  }
  void TearDown() override {
    monitor_.reset();
    command_.reset();
    imu_.reset();
    factory_.reset();
  }

  void SendCommand(uint64_t cycle, double error_x) {
    auto loan = command_->MakeLoan();
    loan.root().setCycle(cycle);
    loan.root().setEnabled(true);
    loan.root().setTrackingErrorX(error_x);
    ASSERT_EQ(command_->Send(std::move(loan)).status,
              transport::PublishStatus::kOk);
  }
  void SendImu() {
    auto loan = imu_->MakeLoan();
    ASSERT_EQ(imu_->Send(std::move(loan)).status,
              transport::PublishStatus::kOk);
  }
  // Runs `fn` once, 1 ms from now.
  template <typename Fn>
  void At1ms(Fn fn) {
    test_loop_->AddTimer(fn)->Schedule(factory_->now() + milliseconds(1));
  }

  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<loop::SimulatedEventLoopFactory> factory_;
  std::unique_ptr<MonitorNode> monitor_;
  loop::EventLoop* test_loop_ = nullptr;
  std::unique_ptr<loop::Sender<JointCommand>> command_;
  std::unique_ptr<loop::Sender<ImuSample>> imu_;
  int statuses_ = 0;
  MonitorSummary last_status_;
  std::string last_note_;
};

TEST_F(MonitorTest, CountsLossSentMessagesAndControllerCycleGaps) {
  // 20 commands in one burst into a 16-deep queue: the monitor gets to the
  // last 16 and learns that 4 were lost. Then cycle 25 after 19: 5 cycles
  // the controller skipped.
  At1ms([&] {
    for (uint64_t c = 0; c < 20; ++c) SendCommand(c, 0.003);
    for (int i = 0; i < 3; ++i) SendImu();
  });
  factory_->RunFor(milliseconds(2));
  At1ms([&] { SendCommand(25, 0.004); });
  factory_->RunFor(milliseconds(200));

  const MonitorSummary s = monitor_->summary();
  ASSERT_EQ(s.channels.size(), 2u);  // its own status channel is left out
  const ChannelSummary& cmd = s.channels[0];
  EXPECT_EQ(cmd.name, "/test/command");
  EXPECT_EQ(cmd.received, 17u);
  EXPECT_EQ(cmd.missed, 4u);
  EXPECT_EQ(cmd.sent, 21u);
  EXPECT_EQ(s.channels[1].received, 3u);
  EXPECT_EQ(s.channels[1].missed, 0u);
  EXPECT_EQ(s.channels[1].sent, 3u);
  EXPECT_EQ(s.tracking.cycles, 17u);
  EXPECT_EQ(s.tracking.missed_cycles, 5u);
  EXPECT_EQ(s.tracking.tracked_cycles, 17u);
  EXPECT_NEAR(s.tracking.max_error_m, 0.004, 1e-12);
  EXPECT_GT(s.tracking.rms_error_m, 0.003);

  // What it published says the same, and names the loss.
  EXPECT_EQ(statuses_, 2);  // 10 Hz over 202 ms
  ASSERT_EQ(last_status_.channels.size(), 2u);
  EXPECT_EQ(last_status_.channels[0].missed, 4u);
  EXPECT_EQ(last_status_.channels[0].sent, 21u);
  EXPECT_EQ(last_status_.tracking.missed_cycles, 5u);
  EXPECT_NE(last_note_.find("missed messages on /test/command"),
            std::string::npos)
      << last_note_;
  EXPECT_NE(last_note_.find("silent: /test/imu"), std::string::npos)
      << last_note_;
  EXPECT_NE(FormatSummaryTable(s).find("/test/command"), std::string::npos);
}

// A command whose bytes fail the typed check (a root pointer far out of
// its segment) is skipped by the watcher and shown as MALFORMED, so that
// sent == received + missed + malformed: nothing goes unaccounted.
TEST_F(MonitorTest, CountsMalformedMessagesSoThatEverySentOneIsAccounted) {
  auto raw = test_loop_->MakeRawSender("/test/command");
  ASSERT_TRUE(raw.ok()) << raw.status();
  At1ms([&] {
    // One segment of 3 words whose root pointer points far outside it.
    const uint64_t words[4] = {uint64_t{3} << 32, 0xFFFFFFFFFFFFFFFCull, 0, 0};
    std::span<std::byte> slot = (*raw)->Loan();
    ASSERT_GE(slot.size(), sizeof(words));
    std::memcpy(slot.data(), words, sizeof(words));
    ASSERT_TRUE((*raw)->Send(sizeof(words)).ok());
    SendCommand(1, 0.001);
  });
  factory_->RunFor(milliseconds(150));

  const MonitorSummary s = monitor_->summary();
  const ChannelSummary& cmd = s.channels[0];
  EXPECT_EQ(cmd.sent, 2u);
  EXPECT_EQ(cmd.received, 1u);
  EXPECT_EQ(cmd.missed, 0u);
  EXPECT_EQ(cmd.malformed, 1u);
  ASSERT_EQ(last_status_.channels.size(), 2u);
  EXPECT_EQ(last_status_.channels[0].malformed, 1u);
  EXPECT_NE(last_note_.find("malformed messages on /test/command"),
            std::string::npos)
      << last_note_;
  const std::string table = FormatSummaryTable(s);
  EXPECT_NE(table.find("MALFORMED"), std::string::npos) << table;
  raw->reset();
}

}  // namespace
}  // namespace tether::examples
