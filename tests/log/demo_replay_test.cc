// The demo stack recorded as a user would (the real launcher, the real node
// binaries and `tether record` as a node of the stack), then:
//   - the recorder lost nothing (every channel's queue indices contiguous,
//     no loss records);
//   - a deterministic replay (LogReplayer on a SimulatedEventLoopFactory)
//     into the demo's estimator and controller code, each taking over its
//     logged output, reproduces the recorded outputs within the tolerances
//     stated below;
//   - two replays give byte-identical outputs.
// The recording and the plan of the replay's start: demo_recording.h.
#include <stdio.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "examples/controller.h"
#include "examples/demo.capnp.h"
#include "examples/estimator.h"
#include "examples/gains_file.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/log_info.h"
#include "log/log_reader.h"
#include "log/log_replayer.h"
#include "tests/log/demo_recording.h"
#include "tests/log/log_test_util.h"
#include "transport/framing.h"

namespace tether::log {
namespace {

using ::ImuSample;
using ::JointCommand;
using ::StateEstimate;
using namespace ::tether::log::testing;

// Recorded once for the whole suite.
std::string* g_log = nullptr;
// Why the last recording was unfit for comparing with a replay ("" when it
// was fit): set by the suite's setup.
std::string* g_unfit = nullptr;
std::string* g_launch_output = nullptr;


// Empty when a replay of the log starts tracking on the live controller's
// first tracking cycle and the live run was seldom late; otherwise which
// cycles they were, or how many were disturbed (defined below).
std::string ReplayStartProblem();

class DemoReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_log = new std::string(testing::TempFile("demo.mcap"));
    g_launch_output = new std::string();
    g_unfit = new std::string();
    // Other tests load this machine: a recording whose recorder joined a
    // channel late (RecorderStartedLate), or whose controller started late
    // (it cannot be replayed identically: see PlanControllerStart), is made
    // again, up to five times.
    for (int attempt = 0; attempt < 5; ++attempt) {
      ASSERT_EQ(RecordDemo(*g_log, g_launch_output), 0) << *g_launch_output;
      std::string why = RecorderStartedLate(*g_log);
      if (why.empty()) why = PlanControllerStart(*g_log).why;
      // The plan covers the inputs the log shows; on a heavily loaded
      // machine (a fresh build's compilers) a live start can still hinge
      // on one the plan cannot see, and then every later cycle is shifted
      // by one. Such a recording is made again too; one that replays
      // shifted five times in a row fails the tests below. So is one whose
      // live cycles were often late or skipped (ReplayStartProblem).
      if (why.empty()) why = ReplayStartProblem();
      *g_unfit = why;
      if (why.empty()) return;
      std::printf("recording %d: %s; recording again\n", attempt + 1,
                  why.c_str());
    }
  }

  static void TearDownTestSuite() {
    delete g_log;
    delete g_launch_output;
    delete g_unfit;
  }
};

TEST_F(DemoReplayTest, TheRecorderNodeLostNothing) {
  SCOPED_TRACE(*g_launch_output);
  EXPECT_THAT(*g_launch_output,
              ::testing::ContainsRegex(R"(\[recorder\] recorded [0-9]+ messages)"));
  absl::StatusOr<LogInfo> info = ComputeLogInfo(*g_log);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->indexed);
  EXPECT_TRUE(info->problems.empty());
  for (const ChannelInfoRow& row : info->channels) {
    // The launcher's status channel (depth 4) may lap before the recorder
    // starts; the demo's channels must lose nothing.
    if (row.name.rfind("/robot/", 0) == 0 || row.name == "/plant/state") {
      EXPECT_EQ(row.missed, 0u) << row.name;
    }
  }
  auto reader = LogReader::Open(*g_log);
  ASSERT_TRUE(reader.ok());
  for (const char* name : kDemoChannels) {
    const LogChannel* c = (*reader)->FindChannel(name);
    ASSERT_NE(c, nullptr) << name;
    LogReadOptions o;
    o.channels = {c->id};
    auto cursor = (*reader)->Read(o);
    LogMessage m;
    uint64_t count = 0, expected = 0;
    bool first = true;
    while (cursor->Next(&m)) {
      // Recorded from the channel's oldest message on: nothing skipped.
      if (first) {
        EXPECT_EQ(m.queue_index, 0u) << name;
      } else {
        EXPECT_EQ(m.queue_index, expected) << name;
      }
      first = false;
      expected = m.queue_index + 1;
      ++count;
    }
    // ~3 s at 1 kHz, minus start-up; a loaded machine runs the demo slower
    // (cycles skipped), so the bound only says it flowed.
    EXPECT_GT(count, 500u) << name;
  }
}

// What a replay produced, as raw bytes and decoded.
struct Outputs {
  std::vector<std::vector<std::byte>> estimate_bytes, command_bytes;
  // Estimates by sample time.
  std::map<int64_t, std::vector<double>> estimates, logged_estimates;
  // Commands by the controller cycle (phase point) that sent them.
  std::map<int64_t, std::vector<double>> commands, logged_commands;
  // Live send time of each recorded command, and send times of the
  // controller's inputs (estimates, joint states), sorted.
  std::map<int64_t, int64_t> logged_command_sent;
  std::vector<int64_t> input_sent;
};

std::vector<double> EstimateFields(StateEstimate::Reader e) {
  return {e.getX(), e.getY(), e.getHeading(), e.getForwardVelocity(),
          e.getYawRate()};
}
// Targets first (the pose loop: no memory), then the wheel torques (which
// integrate the wheel speed error), then the estimate it used.
std::vector<double> CommandFields(JointCommand::Reader c) {
  return {c.getLeftVelocityTarget(), c.getRightVelocityTarget(),
          c.getLeftEffortNm(), c.getRightEffortNm(),
          static_cast<double>(c.getSampleTimeNs())};
}

// Replays the log into the demo's estimator and controller, started at the
// points of the log where the recorded ones started.
Outputs Replay() {
  Outputs out;
  // Where the recorded estimator began: the IMU sample of the instant of
  // its first estimate.
  int64_t estimator_start = 0;
  {
    auto reader = LogReader::Open(*g_log);
    EXPECT_TRUE(reader.ok());
    int64_t first_estimate_sample = -1;
    LogMessage m;
    auto cursor = (*reader)->Read();
    std::vector<std::pair<int64_t, int64_t>> imu;  // (sample time, send time)
    while (cursor->Next(&m)) {
      transport::SlotMessageReader r(m.data);
      if (m.channel->name == "/robot/state_estimate" && first_estimate_sample < 0) {
        first_estimate_sample =
            r.getRoot<StateEstimate>().getSampleTimeNs();
      } else if (m.channel->name == "/robot/imu") {
        imu.emplace_back(r.getRoot<ImuSample>().getSampleTimeNs(),
                         m.monotonic_send_ns);
      } else if (m.channel->name == "/robot/joint_command") {
        out.logged_command_sent[Slot(m.monotonic_send_ns)] = m.monotonic_send_ns;
      }
      if (m.channel->name == "/robot/state_estimate" ||
          m.channel->name == "/robot/joint_state") {
        out.input_sent.push_back(m.monotonic_send_ns);
      }
    }
    for (const auto& [sample, send] : imu) {
      if (sample == first_estimate_sample) estimator_start = send - 1;
    }
    EXPECT_NE(estimator_start, 0) << "no IMU sample for the first estimate";
    std::sort(out.input_sent.begin(), out.input_sent.end());
  }
  LogReplayerOptions options;
  options.taken_over = {"/robot/state_estimate", "/robot/joint_command"};
  auto replayer = LogReplayer::Open(*g_log, options);
  EXPECT_TRUE(replayer.ok()) << replayer.status();
  auto factory = (*replayer)->MakeFactory();
  EXPECT_TRUE(factory.ok()) << factory.status();
  loop::SimulatedEventLoopFactory& f = **factory;

  loop::EventLoop* observer = f.MakeEventLoop("observer");
  auto copy = [](const transport::RawMessage& m) {
    return std::vector<std::byte>(m.bytes.begin(), m.bytes.end());
  };
  EXPECT_TRUE(observer->MakeRawWatcher("/robot/state_estimate",
                                       [&](const transport::RawMessage& m) {
                                         out.estimate_bytes.push_back(copy(m));
                                         transport::SlotMessageReader r(m.bytes);
                                         auto e = r.getRoot<StateEstimate>();
                                         out.estimates[e.getSampleTimeNs()] =
                                             EstimateFields(e);
                                       })
                  .ok());
  EXPECT_TRUE(observer->MakeRawWatcher("/original/robot/state_estimate",
                                       [&](const transport::RawMessage& m) {
                                         transport::SlotMessageReader r(m.bytes);
                                         auto e = r.getRoot<StateEstimate>();
                                         out.logged_estimates[e.getSampleTimeNs()] =
                                             EstimateFields(e);
                                       })
                  .ok());
  EXPECT_TRUE(observer->MakeRawWatcher("/robot/joint_command",
                                       [&](const transport::RawMessage& m) {
                                         out.command_bytes.push_back(copy(m));
                                         transport::SlotMessageReader r(m.bytes);
                                         auto c = r.getRoot<JointCommand>();
                                         out.commands[Slot(
                                             m.context.monotonic_send_ns)] =
                                             CommandFields(c);
                                       })
                  .ok());
  EXPECT_TRUE(observer->MakeRawWatcher("/original/robot/joint_command",
                                       [&](const transport::RawMessage& m) {
                                         transport::SlotMessageReader r(m.bytes);
                                         auto c = r.getRoot<JointCommand>();
                                         out.logged_commands[Slot(
                                             m.context.monotonic_send_ns)] =
                                             CommandFields(c);
                                       })
                  .ok());

  // The controller as the stack runs it (gains file, figure eight).
  examples::ControllerOptions controller_options;
  auto gains = examples::LoadControllerGains("examples/config/gains.json");
  EXPECT_TRUE(gains.ok()) << gains.status();
  controller_options.gains = *gains;
  std::unique_ptr<examples::EstimatorNode> estimator;
  std::unique_ptr<examples::ControllerNode> controller;
  struct Start {
    int64_t at;
    bool estimator;
  };
  // The controller where the live one must have been made (see
  // PlanControllerStart).
  const ControllerStart plan = PlanControllerStart(*g_log);
  EXPECT_EQ(plan.why, "");
  std::vector<Start> starts = {{estimator_start, true},
                               {plan.make_at, false}};
  std::sort(starts.begin(), starts.end(),
            [](const Start& a, const Start& b) { return a.at < b.at; });
  for (const Start& s : starts) {
    f.RunUntil(loop::FromMonotonicNs(static_cast<uint64_t>(s.at)));
    if (s.estimator) {
      auto node = examples::EstimatorNode::Create(f.MakeEventLoop("estimator"));
      EXPECT_TRUE(node.ok()) << node.status();
      estimator = std::move(*node);
    } else {
      auto node = examples::ControllerNode::Create(f.MakeEventLoop("controller"),
                                                   controller_options);
      EXPECT_TRUE(node.ok()) << node.status();
      controller = std::move(*node);
    }
  }
  f.RunUntil((*replayer)->end_time());
  EXPECT_EQ((*replayer)->stats().publish_failures, 0u);
  EXPECT_TRUE((*replayer)->problems().empty());
  return out;
}

// The first cycle that tracked (sent a command for an estimate, not idle).
int64_t FirstTrackingSlot(const std::map<int64_t, std::vector<double>>& c) {
  for (const auto& [slot, fields] : c) {
    if (fields[4] != static_cast<double>(SlotTime(slot))) return slot;
  }
  return -1;
}

// Live, a cycle that ran late may have seen newer inputs than the replayed
// cycle, which runs on its phase point: an input was sent between the phase
// point and the live send ("disturbed").
bool Disturbed(const Outputs& out, int64_t slot) {
  const int64_t sent = out.logged_command_sent.at(slot);
  auto it = std::upper_bound(out.input_sent.begin(), out.input_sent.end(),
                             SlotTime(slot));
  return it != out.input_sent.end() && *it <= sent;
}

// An idle cycle (its sample time is its phase point) used no input and
// keeps no state: late or not, it disturbs nothing.
bool Idle(int64_t slot, const std::vector<double>& command) {
  return command[4] == static_cast<double>(SlotTime(slot));
}

std::string ReplayStartProblem() {
  const Outputs out = Replay();
  const int64_t live = FirstTrackingSlot(out.logged_commands);
  const int64_t replayed = FirstTrackingSlot(out.commands);
  if (live != replayed) {
    return "the live controller began tracking in cycle slot " +
           std::to_string(live) + ", the replayed one in " +
           std::to_string(replayed);
  }
  // A live run on a loaded machine (other tests' processes, a neighbour on
  // the host) has many late or skipped cycles, and a replay, which runs
  // every cycle on its phase point, rightly differs from it there: the
  // comparison below would measure the machine, not the replay.
  size_t cycles = 0, disturbed = 0;
  int64_t previous = -1;
  for (const auto& [slot, command] : out.logged_commands) {
    ++cycles;
    if ((previous >= 0 && slot != previous + 1) ||
        (!Idle(slot, command) && Disturbed(out, slot))) {
      ++disturbed;
    }
    previous = slot;
  }
  if (disturbed * 20 > cycles) {
    return "the live run was disturbed (late past an input, or skipped) in " +
           std::to_string(disturbed) + " of " + std::to_string(cycles) +
           " cycles";
  }
  return "";
}

struct Agreement {
  size_t compared = 0, unmatched = 0, exact = 0;
  double max_error = 0;
  std::vector<double> errors;  // per pair, the largest field difference
  double Quantile(double q) const {
    std::vector<double> e = errors;
    std::sort(e.begin(), e.end());
    if (e.empty()) return 0;
    return e[std::min(e.size() - 1, static_cast<size_t>(q * e.size()))];
  }
};

// Fields [first, last) of every logged message against the replayed one of
// the same sample time, for logged messages with key < `until`.
Agreement Compare(const std::map<int64_t, std::vector<double>>& logged,
                  const std::map<int64_t, std::vector<double>>& replayed,
                  size_t first, size_t last,
                  int64_t until = std::numeric_limits<int64_t>::max()) {
  Agreement a;
  for (const auto& [t, want] : logged) {
    if (t >= until) break;
    auto it = replayed.find(t);
    if (it == replayed.end()) {
      ++a.unmatched;
      continue;
    }
    double e = 0;
    for (size_t i = first; i < last; ++i) {
      e = std::max(e, std::abs(want[i] - it->second[i]));
    }
    ++a.compared;
    if (e == 0) ++a.exact;
    a.max_error = std::max(a.max_error, e);
    a.errors.push_back(e);
  }
  return a;
}

TEST_F(DemoReplayTest, EstimatorAndControllerReproduceTheRecordedOutputs) {
  ASSERT_EQ(*g_unfit, "")
      << "five recordings in a row were unfit (this is the last one's "
         "reason): the machine is too loaded for this test";
  const Outputs out = Replay();
  const Agreement est = Compare(out.logged_estimates, out.estimates, 0, 5);
  // Commands cycle by cycle. Live, a cycle that ran late may have seen
  // newer inputs than the replayed cycle, which runs on its phase point (an
  // input was sent between the phase point and the live send: "disturbed"),
  // and a cycle more than a period late was skipped. Until the first
  // disturbed or skipped cycle, live and replay ran the same code on the
  // same inputs. Where both used the same estimate, the pose loop (no
  // memory) gives the same velocity targets; the wheel torques integrate
  // speed errors, which differ after a disturbed cycle.
  Agreement targets, torques, undisturbed;
  size_t same_input = 0, other_input = 0, unmatched = 0;
  bool clean = true;
  int64_t previous_slot = -1;
  for (const auto& [slot, want] : out.logged_commands) {
    if ((previous_slot >= 0 && slot != previous_slot + 1) ||
        (!Idle(slot, want) && Disturbed(out, slot))) {
      clean = false;
    }
    previous_slot = slot;
    auto it = out.commands.find(slot);
    if (it == out.commands.end()) {
      ++unmatched;
      continue;
    }
    const std::vector<double>& got = it->second;
    const double torque_error =
        std::max(std::abs(want[2] - got[2]), std::abs(want[3] - got[3]));
    const double target_error =
        std::max(std::abs(want[0] - got[0]), std::abs(want[1] - got[1]));
    ++torques.compared;
    torques.exact += torque_error == 0;
    torques.max_error = std::max(torques.max_error, torque_error);
    torques.errors.push_back(torque_error);
    if (clean) {
      // `exact` counts the leading run of identical commands.
      const double e = std::max(torque_error, target_error);
      if (e == 0 && undisturbed.exact == undisturbed.compared) ++undisturbed.exact;
      ++undisturbed.compared;
      undisturbed.max_error = std::max(undisturbed.max_error, e);
    }
    if (want[4] != got[4]) {
      ++other_input;
      continue;
    }
    ++same_input;
    ++targets.compared;
    targets.exact += target_error == 0;
    targets.max_error = std::max(targets.max_error, target_error);
  }
  std::printf(
      "estimator: %zu estimates compared, %zu identical, %zu unmatched, max "
      "error %.3g\n"
      "controller: %zu cycles compared (%zu unmatched); %zu before the first "
      "disturbed live cycle, the first %zu of them identical (max error "
      "%.3g);\n"
      "  %zu used the same estimate live and in replay, %zu another; their "
      "velocity targets: %zu identical, max error %.3g rad/s;\n"
      "  torques: %zu identical, median error %.3g N m, p99 %.3g, max %.3g\n",
      est.compared, est.exact, est.unmatched, est.max_error, torques.compared,
      unmatched, undisturbed.compared, undisturbed.exact,
      undisturbed.max_error, same_input, other_input, targets.exact,
      targets.max_error, torques.exact, torques.Quantile(0.5),
      torques.Quantile(0.99), torques.max_error);
  // Tolerances.
  // Estimator: a function of its inputs, delivered in the recorded order:
  // every estimate reproduced to 1e-9 (m, rad, m/s, rad/s).
  EXPECT_GT(est.compared, 500u);
  EXPECT_EQ(est.unmatched, 0u);
  EXPECT_LE(est.max_error, 1e-9);
  // Controller: every recorded cycle has its replayed cycle (but the last,
  // which may fall after the log's end); the first cycles (the start, which
  // PlanControllerStart made reproducible) reproduced to 1e-9 (rad/s, N m);
  // velocity targets (no memory) to 1e-9 rad/s wherever both used the same
  // estimate, which is most cycles. Torques integrate the wheel speed error:
  // a live cycle that ran late, or a joint state whose publisher was
  // preempted between stamping and committing it (the live fetch missed a
  // message the replay, ordered by send time, delivers), changes them from
  // then on. So the rest of the identical prefix is reported, and the
  // torques are held to 0.5 N m at the median (a replay that is off by
  // one cycle is off by ~1 N m; a loaded machine's late live cycles leave
  // ~0.1 N m).
  EXPECT_GT(torques.compared, 500u);
  EXPECT_LE(unmatched, 1u);
  EXPECT_GE(undisturbed.compared, 1u);
  EXPECT_GE(undisturbed.exact, std::min<size_t>(undisturbed.compared, 5))
      << "the first cycles differ: the start was not reproduced";
  EXPECT_GT(same_input, torques.compared * 9 / 10);
  EXPECT_LE(targets.max_error, 1e-9);
  EXPECT_LE(torques.Quantile(0.5), 0.5);
}

TEST_F(DemoReplayTest, TwoReplaysGiveByteIdenticalOutputs) {
  const Outputs a = Replay();
  const Outputs b = Replay();
  ASSERT_GT(a.estimate_bytes.size(), 500u);
  ASSERT_GT(a.command_bytes.size(), 500u);
  EXPECT_TRUE(a.estimate_bytes == b.estimate_bytes);
  EXPECT_TRUE(a.command_bytes == b.command_bytes);
}

}  // namespace
}  // namespace tether::log
