// Recording the demo stack and planning its replay: see demo_recording.h.
#include "tests/log/demo_recording.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "examples/demo.capnp.h"
#include "log/log_reader.h"
#include "tests/shm/shm_test_util.h"
#include "tests/util/run_command.h"
#include "transport/framing.h"

namespace tether::log::testing {

int RecordDemo(const std::string& log, std::string* output) {
  shm::testing::ScopedRoot root;
  // The config names binaries as bazel-bin/<pkg>/<name> (run from the repo
  // root); in runfiles they are <pkg>/<name>: a working directory with
  // bazel-bin -> the runfiles root makes both hold.
  char cwd[4096];
  if (::getcwd(cwd, sizeof(cwd)) == nullptr) return -1;
  const std::string work = root.root() + "-work";
  if (::mkdir(work.c_str(), 0755) != 0 ||
      ::symlink(cwd, (work + "/bazel-bin").c_str()) != 0 ||
      ::symlink((std::string(cwd) + "/examples").c_str(),
                (work + "/examples").c_str()) != 0) {
    return -1;
  }
  const std::string config = work + "/recorded_stack.json";
  std::ofstream(config)
      << "{\"includes\": [\"examples/config/example_stack.json\"],\n"
         " \"nodes\": [{\"name\": \"recorder\", \"command\": "
         "\"bazel-bin/tools/tether\",\n"
         "   \"args\": [\"record\", \"--out\", \""
      << log
      << "\", \"--force\", \"--from-oldest\", \"--period\", \"5\", "
         "\"--quiet\"],\n"
         "   \"restart\": {\"policy\": \"never\"}}]}\n";
  int status = 0;
  *output = ::tether::testing::RunCommand(
      "tools/tether launch " + config + " --root " + root.root() +
          " --instance demo --duration 3 --workdir " + work + " 2>&1",
      &status);
  if (std::system(("rm -rf '" + work + "'").c_str()) != 0) return -1;
  return status;
}

std::string RecorderStartedLate(const std::string& log) {
  auto reader = LogReader::Open(log);
  if (!reader.ok()) return "";  // the tests say what is wrong
  for (const char* name : kDemoChannels) {
    const LogChannel* c = (*reader)->FindChannel(name);
    if (c == nullptr) return "";
    LogReadOptions o;
    o.channels = {c->id};
    auto cursor = (*reader)->Read(o);
    LogMessage m;
    if (cursor->Next(&m) && m.queue_index != 0) {
      return std::string("the recorder started after ") + name +
             " had lapped its queue (first recorded index " +
             std::to_string(m.queue_index) + ")";
    }
  }
  return "";
}

ControllerStart PlanControllerStart(const std::string& log) {
  auto reader = LogReader::Open(log);
  if (!reader.ok()) return {0, std::string(reader.status().message())};
  std::map<int64_t, int64_t> estimate_sent;  // send time -> sample time
  std::vector<std::pair<int64_t, int64_t>> commands;  // (send, sample time)
  std::vector<int64_t> inputs_sent;  // estimates and joint states
  auto cursor = (*reader)->Read();
  LogMessage m;
  while (cursor->Next(&m)) {
    transport::SlotMessageReader r(m.data);
    if (m.channel->name == "/robot/state_estimate" ||
        m.channel->name == "/robot/joint_state") {
      inputs_sent.push_back(m.monotonic_send_ns);
    }
    if (m.channel->name == "/robot/state_estimate") {
      estimate_sent[m.monotonic_send_ns] =
          r.getRoot<StateEstimate>().getSampleTimeNs();
    } else if (m.channel->name == "/robot/joint_command") {
      commands.emplace_back(m.monotonic_send_ns,
                            r.getRoot<JointCommand>().getSampleTimeNs());
    }
  }
  std::sort(inputs_sent.begin(), inputs_sent.end());
  if (commands.empty()) return {0, "no command was recorded"};
  const int64_t p0 = SlotTime(Slot(commands[0].first));
  std::vector<int64_t> candidates = {p0 - kPeriodNs + 1'000};
  for (int64_t t : inputs_sent) {
    if (t > p0 - kPeriodNs && t < p0) candidates.push_back(t + 1);
  }
  std::sort(candidates.begin(), candidates.end());
  std::string why = "the controller never tracked";
  for (int64_t made : candidates) {
    bool fits = true;
    for (const auto& [sent, sample] : commands) {
      const int64_t phase = SlotTime(Slot(sent));
      auto first = estimate_sent.upper_bound(made);
      auto last = estimate_sent.upper_bound(phase);
      if (sample == phase) {  // idle: it had no estimate
        if (first != last) {
          fits = false;
          why = "a live idle cycle missed an estimate";
          break;
        }
        continue;
      }
      if (first == last || std::prev(last)->second != sample ||
          std::any_of(inputs_sent.begin(), inputs_sent.end(),
                      [&](int64_t t) { return t > phase && t <= sent; })) {
        fits = false;
        why = "the live controller's first tracking cycle ran late, past its "
              "inputs";
      }
      break;
    }
    if (fits) return {made, ""};
  }
  return {0, why};
}

}  // namespace tether::log::testing
