// The actuator node alone, driven by a test loop standing in for the
// controller: it applies fresh commands, publishes the plant state every
// period, and its watchdog drops commands that stopped coming.
#include "examples/actuator.h"

#include <chrono>
#include <memory>

#include "examples/demo_schemas.h"
#include "gtest/gtest.h"
#include "loop/simulated_event_loop.h"
#include "transport/config.h"

namespace tether::examples {
namespace {

using std::chrono::milliseconds;

class ActuatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterDemoSchemas(&schemas_);
    auto stack = transport::LoadStackConfig(
        "examples/config/example_stack.json", schemas_.known_types());
    ASSERT_TRUE(stack.ok()) << stack.status();
    stack_ = std::make_unique<transport::StackConfig>(std::move(*stack));
    auto factory = loop::SimulatedEventLoopFactory::Create(*stack_, schemas_);
    ASSERT_TRUE(factory.ok()) << factory.status();
    factory_ = std::move(*factory);
    auto node = ActuatorNode::Create(factory_->MakeEventLoop("actuator"));
    ASSERT_TRUE(node.ok()) << node.status();
    actuator_ = std::move(*node);
    test_loop_ = factory_->MakeEventLoop("test");
    auto sender = test_loop_->MakeSender<JointCommand>("/robot/joint_command");
    ASSERT_TRUE(sender.ok()) << sender.status();
    sender_ = std::move(*sender);
    ASSERT_TRUE(test_loop_
                    ->MakeWatcher<JointState>(
                        "/plant/state",
                        [this](JointState::Reader, const loop::MessageContext&) {
                          ++plant_states_;
                        })
                    .ok());
  }
  void TearDown() override {
    actuator_.reset();
    sender_.reset();
    factory_.reset();
  }

  // Sends a command every millisecond (mid-period) while `sending_` is set.
  void CommandEveryPeriod(JointCommand::Mode mode, double effort) {
    test_loop_->AddPhasedLoop(
        [this, mode, effort](int) {
          if (!sending_) return;
          auto loan = sender_->MakeLoan();
          loan.root().setMode(mode);
          loan.root().setEnabled(true);
          loan.root().setLeftEffortNm(effort);
          loan.root().setRightEffortNm(effort);
          ASSERT_EQ(sender_->Send(std::move(loan)).status,
                    transport::PublishStatus::kOk);
        },
        milliseconds(1), std::chrono::microseconds(500));
  }

  double LeftVelocity() const {
    return actuator_->plant().state().left_velocity_rads;
  }

  transport::SchemaRegistry schemas_;
  std::unique_ptr<transport::StackConfig> stack_;
  std::unique_ptr<loop::SimulatedEventLoopFactory> factory_;
  std::unique_ptr<ActuatorNode> actuator_;
  loop::EventLoop* test_loop_ = nullptr;
  std::unique_ptr<loop::Sender<JointCommand>> sender_;
  bool sending_ = true;
  int plant_states_ = 0;
};

TEST_F(ActuatorTest, AppliesEffortsAndPublishesThePlantEveryPeriod) {
  CommandEveryPeriod(JointCommand::Mode::EFFORT, 1.0);
  factory_->RunFor(milliseconds(200));
  EXPECT_EQ(plant_states_, 200);
  EXPECT_EQ(actuator_->stats().steps, 200u);
  EXPECT_GT(LeftVelocity(), 0.5);
  EXPECT_GT(actuator_->plant().state().x_m, 0.0);
  // The first command (at 0.5 ms) comes before the first step (1 ms).
  EXPECT_EQ(actuator_->stats().stale_steps, 0u);
}

TEST_F(ActuatorTest, WatchdogStopsTheMotorsWhenCommandsStop) {
  CommandEveryPeriod(JointCommand::Mode::EFFORT, 1.0);
  factory_->RunFor(milliseconds(100));
  sending_ = false;
  factory_->RunFor(milliseconds(20));  // within the 20 ms timeout
  const double at_timeout = LeftVelocity();
  EXPECT_GT(at_timeout, 0.5);
  EXPECT_LE(actuator_->stats().stale_steps, 1u);
  factory_->RunFor(milliseconds(300));
  // Coasting on friction only: slower, and every step since was stale.
  EXPECT_LT(LeftVelocity(), 0.5 * at_timeout);
  EXPECT_GE(actuator_->stats().stale_steps, 300u);
  EXPECT_EQ(actuator_->plant().state().left_effort_nm, 0.0);
}

TEST_F(ActuatorTest, EmergencyStopAppliesNoTorque) {
  CommandEveryPeriod(JointCommand::Mode::EMERGENCY_STOP, 3.0);
  factory_->RunFor(milliseconds(100));
  EXPECT_EQ(LeftVelocity(), 0.0);
  EXPECT_EQ(actuator_->stats().commands, 100u);
}

}  // namespace
}  // namespace tether::examples
