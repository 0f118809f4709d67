// examples: reads the demo controller's gains from a JSON file (the
// controller's `--gains=examples/config/gains.json`), e.g.
//   {"kx": 3.0, "ky": 25.0, "ktheta": 10.0, "wheel_kp": 3.0,
//    "wheel_ki": 30.0, "feedforward": 1.0}
// Keys left out keep their defaults; an unknown key or a non-number is an
// error naming the file and the key.
#ifndef TETHER_EXAMPLES_GAINS_FILE_H_
#define TETHER_EXAMPLES_GAINS_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "examples/controller.h"

namespace tether::examples {

// Parses `json` (named `origin` in errors). Any thread; allocates.
absl::StatusOr<ControllerGains> ParseControllerGains(
    const std::string& json, const std::string& origin,
    const ControllerGains& defaults = {});

// Reads and parses the file at `path`: NotFound if it cannot be read.
// Setup only.
absl::StatusOr<ControllerGains> LoadControllerGains(
    const std::string& path, const ControllerGains& defaults = {});

}  // namespace tether::examples

#endif  // TETHER_EXAMPLES_GAINS_FILE_H_
