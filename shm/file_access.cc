#include "shm/file_access.h"

#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tether::shm::internal {
namespace {

std::string UserName(uid_t uid) {
  struct passwd entry;
  struct passwd* found = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &entry, buf, sizeof(buf), &found) == 0 &&
      found != nullptr) {
    return found->pw_name;
  }
  return absl::StrCat(uid);
}

std::string GroupName(gid_t gid) {
  struct group entry;
  struct group* found = nullptr;
  char buf[8192];
  if (::getgrgid_r(gid, &entry, buf, sizeof(buf), &found) == 0 &&
      found != nullptr) {
    return found->gr_name;
  }
  return absl::StrCat(gid);
}

std::vector<gid_t> Groups() {
  std::vector<gid_t> groups(::getgroups(0, nullptr) + 1);
  const int n = ::getgroups(static_cast<int>(groups.size()), groups.data());
  groups.resize(n < 0 ? 0 : n);
  groups.push_back(::getegid());
  return groups;
}

}  // namespace

bool InGroup(gid_t gid) {
  for (gid_t g : Groups()) {
    if (g == gid) return true;
  }
  return false;
}

std::string DescribeSelf() {
  std::string groups;
  std::vector<gid_t> all = Groups();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i + 1 == all.size() && i > 0 && all[i] == all[0]) break;
    bool seen = false;
    for (size_t j = 0; j < i; ++j) seen = seen || all[j] == all[i];
    if (seen) continue;
    absl::StrAppend(&groups, groups.empty() ? "" : ", ", GroupName(all[i]));
  }
  const uid_t uid = ::geteuid();
  return absl::StrCat("uid ", uid, " (", UserName(uid), "), groups ", groups);
}

std::string DescribeFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "not statable";
  return absl::StrFormat("mode %04o, owner %s, group %s", st.st_mode & 07777,
                         UserName(st.st_uid), GroupName(st.st_gid));
}

std::string AccessFix(const std::string& path, const std::string& verb) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return "check the file";
  const std::string group = GroupName(st.st_gid);
  const mode_t group_bit = verb == "write" ? S_IWGRP : S_IRGRP;
  const mode_t others_bit = verb == "write" ? S_IWOTH : S_IROTH;
  if (st.st_uid == ::geteuid()) {
    return absl::StrCat("you own it but its mode denies you: chmod u+",
                        verb == "write" ? "w" : "r", " ", path);
  }
  if (InGroup(st.st_gid)) {
    if ((st.st_mode & group_bit) == 0) {
      return absl::StrCat("you are in its group ", group,
                          " but the group may not ", verb,
                          " it: give the group access in the stack config "
                          "(the channel's mode/readerMode)");
    }
    return "check ACLs or the folder's permissions";
  }
  if ((st.st_mode & group_bit) != 0 && st.st_gid == 0) {
    // Group root is what a file gets when nobody gave it a group (root made
    // it for a stack that names none): joining it is never the fix.
    const std::string advice =
        "its group is root, not a group of the stack's own, and joining "
        "group root would give you far more than this stack: have the "
        "stack's config give its channels a group of their own (\"group\")";
    if (S_ISDIR(st.st_mode)) {
      return absl::StrCat(
          advice, ", which tether gives the instance folders it makes (root "
          "can give this one that group: chgrp GROUP ", path, " && chmod g+s ",
          path, "), then ask for membership of that group");
    }
    return absl::StrCat(advice, ", then ask for membership of that group");
  }
  if ((st.st_mode & group_bit) != 0) {
    return absl::StrCat("ask for membership of group ", group,
                        " (usermod -aG ", group, " ", UserName(::geteuid()),
                        ", then log in again)");
  }
  if ((st.st_mode & others_bit) == 0) {
    return absl::StrCat(
        "nobody but its owner may ", verb,
        " it: have the stack's config give its group access (the channel's "
        "mode/readerMode and group), then join that group");
  }
  return "check ACLs or the folder's permissions";
}

absl::Status AccessDenied(const std::string& path, const std::string& what,
                          const std::string& verb) {
  // The first folder on the way that we cannot enter is the real cause.
  for (size_t pos = path.find('/', 1); pos != std::string::npos;
       pos = path.find('/', pos + 1)) {
    const std::string dir = path.substr(0, pos);
    if (::faccessat(AT_FDCWD, dir.c_str(), X_OK, AT_EACCESS) != 0 &&
        errno == EACCES) {
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot ", verb, " ", what, ": you (", DescribeSelf(),
          ") cannot enter the folder ", dir, " (", DescribeFile(dir), "): ",
          AccessFix(dir, "read"),
          "; tether creates instance folders with the stack's group"));
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "cannot ", verb, " ", what, ": you (", DescribeSelf(), ") may not ",
      verb, " ", path, " (", DescribeFile(path), "): ", AccessFix(path, verb)));
}

absl::StatusOr<OpenedFile> OpenBestAccess(const std::string& path,
                                          const std::string& what) {
  int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) return OpenedFile{fd, true};
  int err = errno;
  if (err == EACCES || err == EPERM || err == EROFS) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0) return OpenedFile{fd, false};
    err = errno;
  }
  if (err == ENOENT) {
    return absl::NotFoundError(absl::StrCat(what, " does not exist (no file ",
                                            path, ")"));
  }
  if (err == EACCES || err == EPERM) return AccessDenied(path, what, "read");
  if (err == ELOOP) {
    return absl::PermissionDeniedError(absl::StrCat(
        path, " is a symbolic link: channel files never are, so tether "
              "refuses it (someone with write access to the folder planted "
              "it); remove it"));
  }
  return absl::InternalError(
      absl::StrCat("cannot open ", what, " (", path, "): ", std::strerror(err)));
}

}  // namespace tether::shm::internal
