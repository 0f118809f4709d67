#include "tools/output_forwarder.h"

#include <unistd.h>

#include <cerrno>
#include <string_view>

namespace tether::tools {

void OutputForwarder::EmitLines(bool final) {
  std::ostream& sink = *sink_;
  size_t begin = 0;
  bool wrote = false;
  while (true) {
    const size_t nl = partial_.find('\n', begin);
    if (nl == std::string::npos) break;
    sink << '[' << name_ << "] "
         << std::string_view(partial_).substr(begin, nl - begin) << '\n';
    wrote = true;
    begin = nl + 1;
  }
  partial_.erase(0, begin);
  if (!partial_.empty() && (final || partial_.size() >= kMaxForwardedLine)) {
    sink << '[' << name_ << "] " << partial_ << '\n';
    partial_.clear();
    wrote = true;
  }
  if (wrote) sink.flush();
}

void OutputForwarder::Forward(bool final) {
  char buffer[16384];
  size_t total = 0;
  while (fd_.valid()) {
    const ssize_t n = ::read(fd_.get(), buffer, sizeof(buffer));
    if (n > 0) {
      partial_.append(buffer, static_cast<size_t>(n));
      EmitLines(false);
      total += static_cast<size_t>(n);
      if (!final && total >= kMaxForwardPerCall) return;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !final) return;
    // EOF, an error, or (final) all that was written before the exit.
    EmitLines(true);
    fd_.Reset();
  }
}

}  // namespace tether::tools
