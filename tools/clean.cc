#include "tools/clean.h"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "shm/owner.h"
#include "tools/channel_tool.h"
#include "tools/cli.h"
#include "tools/instance_lock.h"

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

enum class Mapping { kNone, kMapped, kUnknown };

// Whether any process has `path` mapped, from /proc/*/maps (device and
// inode, so renames and links are seen). kUnknown when no readable process
// maps it but some process's maps cannot be read.
Mapping FindMapping(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Mapping::kNone;
  const std::string inode = std::to_string(st.st_ino);
  char dev[32];
  std::snprintf(dev, sizeof(dev), "%02x:%02x", major(st.st_dev),
                minor(st.st_dev));
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return Mapping::kUnknown;
  bool mapped = false;
  bool unknown = false;
  while (dirent* e = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    std::ifstream maps(absl::StrCat("/proc/", pid, "/maps"));
    if (!maps) {
      if (shm::ProcessToken(pid) != shm::kNoOwner) unknown = true;
      continue;
    }
    std::string line;
    while (std::getline(maps, line)) {
      // address perms offset dev inode path
      std::istringstream fields(line);
      std::string address, perms, offset, d, ino;
      fields >> address >> perms >> offset >> d >> ino;
      if (ino == inode && d == dev) {
        mapped = true;
        break;
      }
    }
    if (mapped) break;
  }
  ::closedir(proc);
  if (mapped) return Mapping::kMapped;
  return unknown ? Mapping::kUnknown : Mapping::kNone;
}

std::string Pids(const std::vector<pid_t>& pids) {
  std::string out;
  for (pid_t pid : pids) absl::StrAppend(&out, out.empty() ? "" : ", ", pid);
  return out;
}

// A channel that opens but whose memory is corrupt (the handle says so from
// the start). Opening it swept nothing: a sweep leaves a corrupt channel as
// it is, so its registries still name the dead and its registration counts
// say nothing about who is alive. It is removed by the rule of a healthy
// channel, with liveness looked up instead of swept: no process registered
// in it is alive, and no process has it open (the shared flock every
// Channel holds while mapped, which a layout-3 file always carries). The
// bytes are lost then; nobody could read them through tether anyway, and
// the report says what the finding was.
void CleanCorrupt(const shm::ChannelOptions& options,
                  std::unique_ptr<shm::Channel> channel, bool dry_run,
                  CleanEntry* entry) {
  entry->corrupt = true;
  const std::string finding = absl::StrCat(
      "corrupt (", std::string(channel->corruption()), ")");
  const shm::RegisteredProcesses who = channel->Registered();
  channel.reset();  // our own lock must not count
  const std::string again =
      absl::StrCat("then run `", shm::Channel::CleanCommand(options),
                   "` again to remove it");
  if (!who.alive.empty()) {
    entry->reason = absl::StrCat(
        "kept: ", finding, " and in use by live process(es) ",
        Pids(who.alive), ": stop them (stop the stack), ", again);
    return;
  }
  const absl::StatusOr<bool> busy = shm::Channel::InUse(options, entry->name);
  if (!busy.ok()) {
    entry->reason = absl::StrCat("kept: ", finding,
                                 " and cannot tell whether a process has it "
                                 "open (",
                                 busy.status().message(), ")");
    return;
  }
  if (*busy) {
    entry->reason = absl::StrCat(
        "kept: ", finding,
        " and a process has it open (an unpinned reader or a tool?): stop "
        "it, ",
        again);
    return;
  }
  entry->removed = true;
  entry->reason = absl::StrCat(
      finding, "; no live process uses it",
      who.dead.empty()
          ? ""
          : absl::StrCat(" (its registered process(es) ", Pids(who.dead),
                         " are dead)"));
  if (dry_run) return;
  const absl::StatusOr<bool> removed =
      shm::Channel::RemoveIfUnused(options, entry->name);
  if (!removed.ok() || !*removed) {
    entry->removed = false;
    entry->reason = absl::StrCat(
        "kept: ", finding, "; ",
        removed.ok() ? "a process opened it just now: stop it, " + again
                     : absl::StrCat("cannot remove (",
                                    removed.status().message(), ")"));
  }
}

// Removes `name` unless a process opened it since it was judged unused
// (Channel::RemoveIfUnused decides and removes under one lock); if it could
// not, `entry` says it was kept and why.
void KeepIfNotRemoved(const shm::ChannelOptions& options,
                      const std::string& name, CleanEntry* entry) {
  const absl::StatusOr<bool> removed =
      shm::Channel::RemoveIfUnused(options, name);
  if (removed.ok() && *removed) return;
  entry->removed = false;
  entry->reason =
      removed.ok() ? "kept: a process opened it just now"
                   : absl::StrCat("kept: cannot remove (",
                                  removed.status().message(), ")");
}

}  // namespace

absl::StatusOr<CleanReport> CleanInstance(const shm::ChannelOptions& options,
                                          bool dry_run, bool force) {
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
    const std::string path = shm::Channel::PathFor(options, name);
    if (!ch.ok()) {
      // Another layout version, a damaged channel or not a channel at all:
      // junk only if no process has the file mapped. Where the header says
      // every mapper holds the flock, its probe says so; otherwise (layout
      // 1, an unreadable header) the maps of every process are searched too.
      entry.unopenable = true;
      const absl::StatusOr<bool> locked = shm::Channel::InUse(options, name);
      const Mapping mapping =
          locked.ok() && !*locked && shm::Channel::LockTellsUse(options, name)
              ? Mapping::kNone
              : FindMapping(path);
      if ((locked.ok() && *locked) || mapping == Mapping::kMapped) {
        entry.reason = absl::StrCat("kept: cannot open (", ch.status().message(),
                                    ") and a process has it mapped");
        report.entries.push_back(std::move(entry));
        continue;
      }
      if (mapping == Mapping::kUnknown && !force) {
        entry.reason = absl::StrCat(
            "kept: cannot open (", ch.status().message(),
            ") and cannot tell whether every process is done with it (some "
            "/proc/<pid>/maps are unreadable); --force removes it");
        report.entries.push_back(std::move(entry));
        continue;
      }
      entry.removed = true;
      entry.reason = absl::StrCat("cannot open (", ch.status().message(),
                                  ") and no process has it mapped");
      if (!dry_run) KeepIfNotRemoved(options, name, &entry);
      report.entries.push_back(std::move(entry));
      continue;
    }
    if ((*ch)->corrupt()) {
      CleanCorrupt(options, std::move(*ch), dry_run, &entry);
      report.entries.push_back(std::move(entry));
      continue;
    }
    const shm::ChannelStats stats = (*ch)->Stats();
    ch->reset();
    if (stats.publishers > 0 || stats.pinning_readers > 0 ||
        stats.registered_sleepers > 0) {
      entry.reason = absl::StrCat("kept: in use by ", stats.publishers,
                                  " live publisher(s), ",
                                  stats.pinning_readers,
                                  " pinning reader(s) and ",
                                  stats.registered_sleepers, " waiter(s)");
    } else if (absl::StatusOr<bool> busy = shm::Channel::InUse(options, name);
               !busy.ok() || *busy) {
      entry.reason = "kept: a process has it open (an unpinned reader?)";
    } else {
      entry.removed = true;
      entry.reason = "no live publisher, reader or waiter";
      if (!dry_run) KeepIfNotRemoved(options, name, &entry);
    }
    report.entries.push_back(std::move(entry));
  }
  // Removes hidden file `f` for `reason` (not in a dry run), or says why
  // it could not.
  const auto remove_hidden = [&](const std::string& f, CleanEntry* entry,
                                 std::string reason) {
    entry->removed = true;
    entry->reason = std::move(reason);
    const std::string path = report.directory + "/" + f;
    if (!dry_run && ::unlink(path.c_str()) != 0 && errno != ENOENT) {
      entry->removed = false;
      entry->reason =
          absl::StrCat("kept: cannot remove (", std::strerror(errno), ")");
    }
  };
  for (const std::string& f : hidden) {
    CleanEntry entry{.name = f};
    if (f == kInstanceLockFile) {
      // A launcher that runs the instance keeps its folder.
      if (std::optional<pid_t> holder = InstanceLock::Holder(options)) {
        entry.reason = *holder > 0
            ? absl::StrCat("kept: launcher pid ", *holder,
                           " runs this instance")
            : "kept: a launcher runs this instance";
      } else if (dry_run) {
        entry.removed = true;
        entry.reason = "lock of no running launcher";
      } else if (absl::StatusOr<bool> gone =
                     InstanceLock::RemoveIfUnused(options);
                 !gone.ok()) {
        entry.reason = absl::StrCat("kept: cannot remove (",
                                    gone.status().message(), ")");
      } else {
        entry.removed = *gone;
        entry.reason = *gone ? "lock of no running launcher"
                             : "kept: a launcher runs this instance";
      }
      report.entries.push_back(std::move(entry));
      continue;
    }
    // A file about a channel (the net bridge's forwarding cursor) goes
    // with its channel: kept while the channel is, so a restarted bridge
    // still counts what was sent while it was down.
    if (const std::optional<std::string> of = shm::Channel::CompanionOf(f)) {
      // Every channel of the folder has an entry above (List finds them
      // all): no entry, no channel.
      bool channel_stays = false;
      for (const CleanEntry& e : report.entries) {
        if (e.name == *of) channel_stays = !e.removed;
      }
      if (channel_stays) {
        entry.reason = absl::StrCat("kept: belongs to channel ", *of,
                                    ", which stays");
      } else {
        remove_hidden(f, &entry,
                      absl::StrCat("belonged to channel ", *of,
                                   ", which is gone"));
      }
      report.entries.push_back(std::move(entry));
      continue;
    }
    const pid_t pid = TmpCreator(f);
    if (pid < 0) {
      entry.reason = "kept: not a tether temporary file";
    } else if (shm::ProcessToken(pid) != shm::kNoOwner) {
      entry.reason = absl::StrCat("kept: temporary file of live creator pid ",
                                  pid);
    } else {
      remove_hidden(f, &entry,
                    absl::StrCat("temporary file of dead creator pid ", pid));
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
      "registered publisher, pinning reader or waiter, that no process has\n"
      "open, is removed. A file that is not a channel of this tether build\n"
      "(an older layout version, junk) is removed when no process has it\n"
      "mapped. Also removes temporary files of channel creators that died,\n"
      "and the instance directory if it ends up empty. A corrupt channel is\n"
      "removed by the same rule, with the liveness of the processes\n"
      "registered in it looked up (a corrupt channel cannot be swept). A\n"
      "corrupt channel or a file that cannot be opened as one that is kept\n"
      "(a live process uses it, or whether one does cannot be told) makes\n"
      "the exit status 1. Prints what it removed and what it kept, and why.");
  AddRootInstanceOptions(parser);
  parser.AddFlag("dry-run", "only print what would be removed");
  parser.AddFlag("force",
                 "also remove files that cannot be opened as channels when "
                 "some process's maps cannot be read to check them");
  return parser;
}

int RunCleanCommand(const ParsedArgs& args, std::ostream& out,
                    std::ostream& err) {
  const bool dry_run = args.Flag("dry-run");
  shm::ChannelOptions where;
  if (!RootInstanceFrom(args, "tether clean", &where, err)) return kExitUsage;
  absl::StatusOr<CleanReport> report =
      CleanInstance(where, dry_run, args.Flag("force"));
  if (!report.ok()) {
    err << "tether clean: " << report.status().message() << "\n";
    return kExitFailure;
  }
  out << FormatCleanReport(*report, dry_run);
  // A corrupt channel or a file that is not one left behind is a problem
  // still to solve (the reason says what to do): scripts see it in the
  // exit status.
  for (const CleanEntry& e : report->entries) {
    if ((e.corrupt || e.unopenable) && !e.removed) return kExitFailure;
  }
  return kExitOk;
}

}  // namespace tether::tools
