// tests: runs a shell command and captures its standard output (add 2>&1
// to the command for its errors too).
#ifndef TETHER_TESTS_UTIL_RUN_COMMAND_H_
#define TETHER_TESTS_UTIL_RUN_COMMAND_H_

#include <stdio.h>

#include <cstdio>
#include <string>

namespace tether::testing {

// Runs `command` through /bin/sh; its stdout, and its wait status in
// *status (-1 when it could not be started).
inline std::string RunCommand(const std::string& command, int* status) {
  std::string out;
  *status = -1;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  *status = ::pclose(p);
  return out;
}

}  // namespace tether::testing

#endif  // TETHER_TESTS_UTIL_RUN_COMMAND_H_
