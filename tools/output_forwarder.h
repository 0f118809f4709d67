// tools: a node's output passed on line by line, each line prefixed with
// "[node] ", so the output of a whole stack stays readable in one terminal.
// One forwarder per stream (stdout, stderr) of a node process.
#ifndef TETHER_TOOLS_OUTPUT_FORWARDER_H_
#define TETHER_TOOLS_OUTPUT_FORWARDER_H_

#include <cstddef>
#include <ostream>
#include <string>

#include "tools/node_process.h"

namespace tether::tools {

// A line without a newline is passed on once it is this long.
inline constexpr size_t kMaxForwardedLine = 4096;
// Forward() reads at most this much per call (unless final), so a node that
// floods its output cannot starve the others or the supervision.
inline constexpr size_t kMaxForwardPerCall = 256 * 1024;

// Not thread-safe: the launcher thread owns it. Movable, not copyable.
class OutputForwarder {
 public:
  OutputForwarder() = default;
  // Forwards the non-blocking read end `fd` to `sink` (which must outlive
  // this object) with lines prefixed "[name] ".
  OutputForwarder(Fd fd, std::string name, std::ostream* sink)
      : fd_(std::move(fd)), name_(std::move(name)), sink_(sink) {}
  OutputForwarder(OutputForwarder&&) = default;
  OutputForwarder& operator=(OutputForwarder&&) = default;

  // The fd to poll for input; -1 once the stream has ended.
  int fd() const { return fd_.get(); }
  bool open() const { return fd_.valid(); }

  // Reads what the node wrote and passes on every complete line (and an
  // over-long partial one). `final` (the node has exited): reads all that
  // is left, passes on a last line without a newline too, and closes the
  // stream. Also closes it at end of file or on a read error. Flushes the
  // sink when it wrote. Never blocks; allocates.
  void Forward(bool final);

 private:
  // Writes the complete lines of partial_ (all of it when `final`).
  void EmitLines(bool final);

  Fd fd_;
  std::string name_;
  std::ostream* sink_ = nullptr;
  std::string partial_;  // Read but not yet passed on.
};

}  // namespace tether::tools

#endif  // TETHER_TOOLS_OUTPUT_FORWARDER_H_
