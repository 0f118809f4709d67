#include "loop/rt_probe_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"

namespace tether::loop {
namespace {

absl::string_view Absl(std::string_view s) { return {s.data(), s.size()}; }

constexpr size_t kMaxFileBytes = 4096;

// Reads a small file through an fd opened without following symlinks, and
// only if it is trusted (see the header). nullopt otherwise.
std::optional<std::string> ReadTrusted(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::nullopt;
  struct stat st;
  std::optional<std::string> text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (st.st_uid == 0 || st.st_uid == ::geteuid()) &&
      (st.st_mode & (S_IWGRP | S_IWOTH)) == 0 &&
      st.st_size <= static_cast<off_t>(kMaxFileBytes)) {
    std::string buffer(kMaxFileBytes, '\0');
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n >= 0) {
      buffer.resize(static_cast<size_t>(n));
      text = std::move(buffer);
    }
  }
  ::close(fd);
  return text;
}

std::string OneLine(std::string_view s) {
  return absl::StrReplaceAll(Absl(s), {{"\n", " "}, {"\r", " "}});
}

}  // namespace

std::string_view RingWaitTimerName(RingWaitTimer timer) {
  switch (timer) {
    case RingWaitTimer::kHard:
      return "hard";
    case RingWaitTimer::kSoft:
      return "soft";
    case RingWaitTimer::kInconclusive:
      return "inconclusive";
  }
  return "inconclusive";
}

std::optional<RingWaitTimer> ParseRingWaitTimer(std::string_view name) {
  for (RingWaitTimer t : {RingWaitTimer::kHard, RingWaitTimer::kSoft,
                          RingWaitTimer::kInconclusive}) {
    if (RingWaitTimerName(t) == name) return t;
  }
  return std::nullopt;
}

std::vector<std::string> DefaultRtProbeCachePaths() {
  return {"/run/tether/rt-probe",
          absl::StrCat("/dev/shm/tether-rt-probe.", ::geteuid())};
}

std::string ReadBootId(const std::string& proc_root) {
  const int fd = ::open((proc_root + "/sys/kernel/random/boot_id").c_str(),
                        O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  char buffer[128];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  ::close(fd);
  if (n <= 0) return "";
  return std::string(absl::StripAsciiWhitespace(
      absl::string_view(buffer, static_cast<size_t>(n))));
}

std::string FormatRtProbeRecord(const RtProbeRecord& record) {
  return absl::StrCat(
      "# tether doctor --rt-probe: how io_uring wait timeouts behave for\n"
      "# real-time waiters on this boot (loop/rt_probe_cache.h)\n",
      "boot_id=", OneLine(record.boot_id), "\n", "kernel=",
      OneLine(record.kernel_release), "\n", "ring_wait=",
      Absl(RingWaitTimerName(record.ring_wait)), "\n", "summary=",
      OneLine(record.summary), "\n");
}

std::optional<RtProbeRecord> ParseRtProbeRecord(std::string_view text) {
  RtProbeRecord record;
  bool has_boot = false, has_kernel = false, has_verdict = false;
  for (absl::string_view line : absl::StrSplit(Absl(text), '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) return std::nullopt;
    const absl::string_view key = line.substr(0, eq);
    const absl::string_view value = line.substr(eq + 1);
    if (key == "boot_id") {
      record.boot_id = std::string(value);
      has_boot = !value.empty();
    } else if (key == "kernel") {
      record.kernel_release = std::string(value);
      has_kernel = !value.empty();
    } else if (key == "ring_wait") {
      std::optional<RingWaitTimer> t =
          ParseRingWaitTimer(std::string_view(value.data(), value.size()));
      if (!t.has_value()) return std::nullopt;
      record.ring_wait = *t;
      has_verdict = true;
    } else if (key == "summary") {
      record.summary = std::string(value);
    }  // unknown keys: written by a newer tether, ignored
  }
  if (!has_boot || !has_kernel || !has_verdict) return std::nullopt;
  return record;
}

absl::Status WriteRtProbeCache(const RtProbeRecord& record,
                               const std::vector<std::string>& paths,
                               std::string* written_path) {
  const std::string text = FormatRtProbeRecord(record);
  std::vector<std::string> errors;
  for (const std::string& path : paths) {
    const size_t slash = path.rfind('/');
    if (slash != std::string::npos && slash > 0) {
      const std::string dir = path.substr(0, slash);
      if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
        errors.push_back(
            absl::StrCat("mkdir ", dir, ": ", std::strerror(errno)));
        continue;
      }
    }
    const std::string tmp = absl::StrCat(path, ".tmp.", ::getpid());
    const int fd = ::open(tmp.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
                          0644);
    if (fd < 0) {
      errors.push_back(absl::StrCat(tmp, ": ", std::strerror(errno)));
      continue;
    }
    const bool ok =
        ::fchmod(fd, 0644) == 0 &&
        ::write(fd, text.data(), text.size()) ==
            static_cast<ssize_t>(text.size());
    const int write_errno = errno;
    ::close(fd);
    if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
      errors.push_back(absl::StrCat(
          path, ": ", std::strerror(ok ? errno : write_errno)));
      ::unlink(tmp.c_str());
      continue;
    }
    if (written_path != nullptr) *written_path = path;
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "could not store the rt-probe verdict (", absl::StrJoin(errors, "; "),
      "): run as root, or make one of these writable"));
}

std::optional<RtProbeRecord> ReadRtProbeCache(
    const std::vector<std::string>& paths, std::string_view boot_id,
    std::string_view kernel_release) {
  if (boot_id.empty()) return std::nullopt;
  for (const std::string& path : paths) {
    std::optional<std::string> text = ReadTrusted(path);
    if (!text.has_value()) continue;
    std::optional<RtProbeRecord> record = ParseRtProbeRecord(*text);
    if (!record.has_value() || record->boot_id != boot_id ||
        record->kernel_release != kernel_release) {
      continue;
    }
    record->path = path;
    return record;
  }
  return std::nullopt;
}

}  // namespace tether::loop
