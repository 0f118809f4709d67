// transport internal: how stack-config problems are collected before they
// are placed at a file and line — shared by the loader (config.cc) and the
// semantic validation (config_validate.h).
#ifndef TETHER_TRANSPORT_CONFIG_REPORT_H_
#define TETHER_TRANSPORT_CONFIG_REPORT_H_

#include <string>
#include <utility>
#include <vector>

#include "transport/config.h"

namespace tether::transport::internal {

// One problem, before it is placed at a file and line.
struct Problem {
  int file = -1;     // index of the source file, -1: none (already placed)
  std::string path;  // field path inside the file, "" for the file itself
  std::string message;
  ConfigProblem::Kind kind = ConfigProblem::Kind::kInvalid;
};

// Errors and warnings found so far.
struct Problems {
  std::vector<Problem> errors;
  std::vector<Problem> warnings;

  void Error(int file, std::string path, std::string message,
             ConfigProblem::Kind kind = ConfigProblem::Kind::kInvalid) {
    errors.push_back({file, std::move(path), std::move(message), kind});
  }
  void Warning(int file, std::string path, std::string message) {
    warnings.push_back({file, std::move(path), std::move(message),
                        ConfigProblem::Kind::kWarning});
  }
};

}  // namespace tether::transport::internal

#endif  // TETHER_TRANSPORT_CONFIG_REPORT_H_
