// tools: `tether stat` as a library — live rate, count, loss and
// send->receive latency of channels, as seen by this reader.
#ifndef TETHER_TOOLS_STAT_H_
#define TETHER_TOOLS_STAT_H_

#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "shm/channel.h"
#include "tools/arg_parser.h"
#include "tools/channel_tool.h"

namespace tether::tools {

struct StatRow {
  std::string channel;
  uint64_t messages = 0;
  uint64_t missed = 0;
  double rate_hz = 0;
  // Send -> receive latency in microseconds; 0 without messages.
  double p50_us = 0, p99_us = 0, max_us = 0;
  // The channel's memory was found corrupt: reading stopped there.
  bool corrupt = false;
};

// A row from what was seen over `seconds`. Sorts `latencies_ns`.
StatRow MakeStatRow(const std::string& channel, uint64_t messages,
                    uint64_t missed, double seconds,
                    std::vector<int64_t>& latencies_ns);
std::string FormatStatTable(const std::vector<StatRow>& rows);

struct StatOptions {
  shm::ChannelOptions channels;
  std::vector<std::string> names;  // empty: every channel of the instance
  std::chrono::milliseconds duration{0};  // 0: until stopped
  std::chrono::milliseconds interval{1000};
  StopFn stop;
};

// One unpinned reader per channel, all read by one thread that sleeps on
// every channel's wake word at once (loop::ChannelWaiter), counts new
// messages. Prints a table every interval and a summary over the whole run
// at the end. A channel found corrupt is reported (on `err` and in its row)
// and no longer read; the exit code is then kExitFailure.
int RunStat(const StatOptions& options, std::ostream& out, std::ostream& err);

ArgParser StatParser();
int RunStatCommand(const ParsedArgs& args, std::ostream& out,
                   std::ostream& err);

}  // namespace tether::tools

#endif  // TETHER_TOOLS_STAT_H_
