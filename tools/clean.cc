#include "tools/clean.h"

#include <dirent.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shm/owner.h"
#include "tools/channel_tool.h"
#include "tools/cli.h"

namespace tether::tools {
namespace {

constexpr std::string_view kTmpMarker = ".tmp.";

// The creator pid of ".<escaped>.tmp.<pid>.<n>", or -1.
pid_t TmpCreator(const std::string& file) {
  const size_t at = file.rfind(kTmpMarker);
  if (file.empty() || file[0] != '.' || at == std::string::npos) return -1;
  const std::string rest = file.substr(at + kTmpMarker.size());
  const size_t dot = rest.find('.');
  int pid = 0;
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(rest.substr(0, dot), &pid) || pid <= 0) {
    return -1;
  }
  return pid;
}

}  // namespace

absl::StatusOr<CleanReport> CleanInstance(const shm::ChannelOptions& options,
                                          bool dry_run) {
  CleanReport report;
  report.directory = options.root + "/" + options.instance;
  DIR* dir = ::opendir(report.directory.c_str());
  if (dir == nullptr) {
    if (errno == ENOENT) return report;  // nothing to clean
    return absl::InternalError(absl::StrCat(
        "cannot read ", report.directory, ": ", std::strerror(errno)));
  }
  std::vector<std::string> hidden;
  while (dirent* e = ::readdir(dir)) {
    const std::string f = e->d_name;
    if (f == "." || f == "..") continue;
    if (f[0] == '.') hidden.push_back(f);
  }
  ::closedir(dir);

  absl::StatusOr<std::vector<std::string>> names = shm::Channel::List(options);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    CleanEntry entry{.name = name};
    absl::StatusOr<std::unique_ptr<shm::Channel>> ch =
        shm::Channel::Open(options, name);  // sweeps dead processes
    if (!ch.ok()) {
      entry.reason = absl::StrCat("kept: cannot open (", ch.status().message(),
                                  "); remove it by hand if it is junk");
      report.entries.push_back(std::move(entry));
      continue;
    }
    const shm::ChannelStats stats = (*ch)->Stats();
    ch->reset();
    if (stats.publishers > 0 || stats.pinning_readers > 0) {
      entry.reason = absl::StrCat("kept: in use by ", stats.publishers,
                                  " live publisher(s) and ",
                                  stats.pinning_readers,
                                  " pinning reader(s)");
    } else {
      entry.removed = true;
      entry.reason = "no live publisher or pinning reader";
      if (!dry_run) {
        absl::Status removed = shm::Channel::Remove(options, name);
        if (!removed.ok()) {
          entry.removed = false;
          entry.reason = absl::StrCat("kept: cannot remove (",
                                      removed.message(), ")");
        }
      }
    }
    report.entries.push_back(std::move(entry));
  }
  for (const std::string& f : hidden) {
    CleanEntry entry{.name = f};
    const pid_t pid = TmpCreator(f);
    if (pid < 0) {
      entry.reason = "kept: not a tether temporary file";
    } else if (shm::ProcessToken(pid) != shm::kNoOwner) {
      entry.reason = absl::StrCat("kept: temporary file of live creator pid ",
                                  pid);
    } else {
      entry.removed = true;
      entry.reason = absl::StrCat("temporary file of dead creator pid ", pid);
      const std::string path = report.directory + "/" + f;
      if (!dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
        entry.removed = false;
        entry.reason = absl::StrCat("kept: cannot remove (",
                                    std::strerror(errno), ")");
      }
    }
    report.entries.push_back(std::move(entry));
  }
  bool all_removed = true;
  for (const CleanEntry& e : report.entries) all_removed &= e.removed;
  if (all_removed) {
    if (dry_run) {
      report.directory_removed = true;
    } else {
      report.directory_removed = ::rmdir(report.directory.c_str()) == 0;
    }
  }
  return report;
}

std::string FormatCleanReport(const CleanReport& report, bool dry_run) {
  std::string out;
  const char* removed = dry_run ? "would remove" : "removed";
  for (const CleanEntry& e : report.entries) {
    if (e.removed) {
      absl::StrAppend(&out, removed, " ", e.name, ": ", e.reason, "\n");
    } else {
      absl::StrAppend(&out, e.name, ": ", e.reason, "\n");
    }
  }
  if (report.entries.empty() && !report.directory_removed) {
    absl::StrAppend(&out, "nothing to clean in ", report.directory, "\n");
  }
  if (report.directory_removed) {
    absl::StrAppend(&out, removed, " empty directory ", report.directory,
                    "\n");
  }
  return out;
}

ArgParser CleanParser() {
  ArgParser parser(
      "tether clean",
      "Removes the channels of an instance that no live process uses: after\n"
      "reclaiming what dead processes left (a sweep), a channel with no\n"
      "registered publisher and no pinning reader is removed. Also removes\n"
      "temporary files of channel creators that died, and the instance\n"
      "directory if it ends up empty. Prints what it removed and what it\n"
      "kept, and why. Unpinned readers (tether echo fallback, tether stat)\n"
      "are not registered and do not keep a channel.");
  AddRootInstanceOptions(parser);
  parser.AddFlag("dry-run", "only print what would be removed");
  return parser;
}

int RunCleanCommand(const ParsedArgs& args, std::ostream& out,
                    std::ostream& err) {
  const bool dry_run = args.Flag("dry-run");
  absl::StatusOr<CleanReport> report =
      CleanInstance(RootInstanceFrom(args), dry_run);
  if (!report.ok()) {
    err << "tether clean: " << report.status().message() << "\n";
    return kExitFailure;
  }
  out << FormatCleanReport(*report, dry_run);
  return kExitOk;
}

}  // namespace tether::tools
