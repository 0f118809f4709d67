// Test helpers for running part of a test as another user: a unique test
// group created for the test and removed afterwards (groupadd/groupdel; a
// bare number when those are missing), and a forked child that drops to
// user nobody with chosen supplementary groups and reports through its exit
// code. Root only, outside Bazel's sandbox (tag the test "no-sandbox").
#ifndef TETHER_TESTS_SHM_MULTI_USER_TEST_H_
#define TETHER_TESTS_SHM_MULTI_USER_TEST_H_

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace tether::testing {

inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;

// A group that exists for the test's lifetime.
class ScopedGroup {
 public:
  ScopedGroup() {
    std::random_device rd;
    char name[32];
    std::snprintf(name, sizeof(name), "tt%d%05x", static_cast<int>(::getpid()) % 100000,
                  rd() & 0xfffff);
    name_ = name;
    const std::string cmd = "groupadd " + name_ + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) == 0) {
      if (struct group* g = ::getgrnam(name_.c_str()); g != nullptr) {
        gid_ = g->gr_gid;
        created_ = true;
        return;
      }
    }
    gid_ = 40000 + (rd() % 20000);  // no groupadd: a bare gid works too
    name_ = std::to_string(gid_);
  }
  ~ScopedGroup() {
    if (created_) {
      const std::string cmd = "groupdel " + name_ + " >/dev/null 2>&1";
      if (std::system(cmd.c_str()) != 0) {
        // Best effort: a group left behind is harmless (a bare gid).
      }
    }
  }
  ScopedGroup(const ScopedGroup&) = delete;
  ScopedGroup& operator=(const ScopedGroup&) = delete;

  gid_t gid() const { return gid_; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  gid_t gid_ = 0;
  bool created_ = false;
};

// Runs `fn` in a child as user nobody (primary group nogroup) with the
// supplementary `groups`; returns its exit code (fn's return value), 100 if
// dropping privileges failed, 200 + signal if it died of a signal.
inline int RunAsNobody(const std::vector<gid_t>& groups,
                       const std::function<int()>& fn) {
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return 101;
  if (pid == 0) {
    if (::setgroups(groups.size(), groups.data()) != 0 ||
        ::setgid(kNogroup) != 0 || ::setuid(kNobody) != 0 ||
        ::geteuid() != kNobody) {
      ::_exit(100);
    }
    std::fflush(nullptr);
    ::_exit(fn());
  }
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return 102;
  if (WIFSIGNALED(status)) return 200 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_SHM_MULTI_USER_TEST_H_
