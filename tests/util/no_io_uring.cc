// Runs a command where io_uring is refused, as Docker's default seccomp
// profile (and RHEL 9's) refuses it: a seccomp filter makes io_uring_setup,
// io_uring_enter and io_uring_register fail with EPERM (or the errno given
// with --errno=ENOSYS), for the command and everything it starts.
//
//   no_io_uring [--errno=EPERM|ENOSYS] COMMAND [ARGS...]
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

int Install(int err) {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_enter, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_register, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K,
               SECCOMP_RET_ERRNO | (static_cast<unsigned>(err) &
                                    SECCOMP_RET_DATA)),
  };
  struct sock_fprog program = {
      .len = static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])),
      .filter = filter,
  };
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return errno;
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    return errno;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int err = EPERM;
  int first = 1;
  if (argc > 1 && std::strncmp(argv[1], "--errno=", 8) == 0) {
    err = std::strcmp(argv[1] + 8, "ENOSYS") == 0 ? ENOSYS : EPERM;
    first = 2;
  }
  if (first >= argc) {
    std::fprintf(stderr,
                 "usage: no_io_uring [--errno=EPERM|ENOSYS] COMMAND [ARGS...]\n"
                 "Runs COMMAND with io_uring refused by a seccomp filter.\n");
    return 2;
  }
  if (int e = Install(err); e != 0) {
    std::fprintf(stderr, "no_io_uring: cannot install the filter: %s\n",
                 std::strerror(e));
    return 1;
  }
  ::execvp(argv[first], argv + first);
  std::fprintf(stderr, "no_io_uring: cannot run %s: %s\n", argv[first],
               std::strerror(errno));
  return 127;
}
