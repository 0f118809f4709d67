// A busy background load for `./tether bench`: pinned to --cpu=N, it streams
// through a 32 MiB buffer (memcpy between two halves) until killed, keeping
// that CPU and the memory bus busy the way a perception or planning process
// does. Dies with its parent (PR_SET_PDEATHSIG).
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  int cpu = -1;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--cpu=", 0) == 0) {
      cpu = std::atoi(a.c_str() + 6);
    } else {
      std::fprintf(stderr,
                   "usage: bench_load --cpu=N\n"
                   "Keeps CPU N busy copying memory until killed.\n");
      return a == "--help" || a == "-h" ? 0 : 2;
    }
  }
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (::sched_setaffinity(0, sizeof(set), &set) != 0) {
      std::perror("bench_load: sched_setaffinity");
      return 1;
    }
  }
  constexpr size_t kHalf = 16 << 20;
  std::vector<char> buffer(2 * kHalf, 1);
  for (size_t i = 0;; ++i) {
    char* a = buffer.data() + (i % 2) * kHalf;
    char* b = buffer.data() + ((i + 1) % 2) * kHalf;
    std::memcpy(a, b, kHalf);
    asm volatile("" ::"r"(a) : "memory");
  }
}
