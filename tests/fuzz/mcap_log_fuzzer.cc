// Fuzz target: an MCAP file as `tether log info|cat|check|recover` and
// `tether replay` read it (log/): McapReader indexed (summary, chunk
// indexes) and streaming (forced scan, and whatever the damage leaves),
// filtered by time and channel; LogReader on top (tether channel metadata,
// context records, the schemas' CodeGeneratorRequests loaded into a
// SchemaLoader, loss records, messages decoded to JSON as `log cat` does);
// CheckLog; and RecoverLog, whose output must then be an intact, indexed
// file that CheckLog passes. Findings: crashes, sanitizer reports,
// exceptions escaping a Status API, hangs, and a recovered file that is not
// intact.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "log/log_check.h"
#include "log/log_reader.h"
#include "log/log_recover.h"
#include "log/mcap_reader.h"
#include "transport/dynamic.h"

namespace {

namespace lg = tether::log;

// Reads every message of `reader` with `options`, touching every byte.
uint64_t Drain(lg::McapReader& reader, const lg::McapReadOptions& options) {
  uint64_t sum = 0;
  auto it = reader.Messages(options);
  lg::McapMessageView view;
  while (it->Next(&view)) {
    for (std::byte b : view.message.data) sum += static_cast<uint8_t>(b);
    if (view.trailer.has_value()) {
      (void)lg::ParseContextRecord(*view.trailer);
    }
  }
  for (const lg::McapProblem& p : it->problems()) sum += p.ToString().size();
  return sum;
}

void ReadMcap(const std::string& path) {
  auto reader = lg::McapReader::Open(path);
  if (!reader.ok()) return;
  lg::McapReader& r = **reader;
  (void)Drain(r, {});
  lg::McapReadOptions scan;
  scan.force_scan = true;
  (void)Drain(r, scan);
  if (!r.channels().empty()) {
    lg::McapReadOptions some;
    some.channels.insert(r.channels().begin()->first);
    some.start_time = 1;
    some.end_time = uint64_t{1} << 62;
    (void)Drain(r, some);
  }
}

void ReadLog(const std::string& path) {
  auto log = lg::LogReader::Open(path);
  if (!log.ok()) return;
  lg::LogReader& r = **log;
  (void)r.Gaps();
  for (bool force_scan : {false, true}) {
    lg::LogReadOptions options;
    options.force_scan = force_scan;
    auto cursor = r.Read(options);
    lg::LogMessage m;
    while (cursor->Next(&m)) {
      if (m.channel == nullptr) __builtin_trap();
      auto type = r.MessageType(*m.channel);
      if (type.ok()) (void)tether::transport::MessageToJson(*type, m.data);
    }
  }
}

void CheckAndRecover(const std::string& path, const std::string& out) {
  (void)lg::CheckLog(path);
  lg::McapWriterOptions options;
  options.overwrite = true;
  options.chunk_size = 1024;
  auto report = lg::RecoverLog(path, out, options);
  if (!report.ok()) return;
  auto check = lg::CheckLog(out);
  if (!check.ok() || !check->ok()) {
    std::fprintf(stderr, "recovered file is not intact: %s\n",
                 check.ok() ? check->problems.front().ToString().c_str()
                            : std::string(check.status().message()).c_str());
    __builtin_trap();
  }
  auto again = lg::McapReader::Open(out);
  if (!again.ok() || !(*again)->indexed()) {
    std::fprintf(stderr, "recovered file does not open indexed\n");
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The input as a file without touching the disk: a memfd, by its /proc
  // path (what McapFile::Open takes). Recover writes to another.
  static const int in_fd = ::memfd_create("mcap-fuzz-in", 0);
  static const int out_fd = ::memfd_create("mcap-fuzz-out", 0);
  static const std::string in_path =
      "/proc/self/fd/" + std::to_string(in_fd);
  static const std::string out_path =
      "/proc/self/fd/" + std::to_string(out_fd);
  if (in_fd < 0 || out_fd < 0) __builtin_trap();
  if (::ftruncate(in_fd, 0) != 0) __builtin_trap();
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::pwrite(in_fd, data + done, size - done, done);
    if (n <= 0) __builtin_trap();
    done += static_cast<size_t>(n);
  }
  try {
    ReadMcap(in_path);
    ReadLog(in_path);
    CheckAndRecover(in_path, out_path);
  } catch (...) {
    __builtin_trap();  // errors are statuses and problems, never exceptions
  }
  return 0;
}
