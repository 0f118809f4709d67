#include "examples/gains_file.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "capnp/compat/json.h"
#include "capnp/message.h"
#include "kj/exception.h"
#include "transport/json_text.h"

namespace tether::examples {
namespace {

// The keys and the fields they set.
constexpr std::pair<const char*, double ControllerGains::*> kKeys[] = {
    {"kx", &ControllerGains::kx},
    {"ky", &ControllerGains::ky},
    {"ktheta", &ControllerGains::ktheta},
    {"wheel_kp", &ControllerGains::wheel_kp},
    {"wheel_ki", &ControllerGains::wheel_ki},
    {"feedforward", &ControllerGains::feedforward},
};

std::string KnownKeys() {
  std::vector<std::string> names;
  for (const auto& [name, field] : kKeys) names.push_back(name);
  return absl::StrJoin(names, ", ");
}

}  // namespace

absl::StatusOr<ControllerGains> ParseControllerGains(
    const std::string& json, const std::string& origin,
    const ControllerGains& defaults) {
  ControllerGains gains = defaults;
  capnp::MallocMessageBuilder message;
  capnp::JsonValue::Builder root = message.initRoot<capnp::JsonValue>();
  try {
    transport::DecodeRawJson(json, root);
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": not valid JSON: ", e.getDescription().cStr()));
  }
  if (!root.isObject()) {
    return absl::InvalidArgumentError(absl::StrCat(
        origin, ": expected a JSON object like {\"kx\": 3.0}"));
  }
  for (capnp::JsonValue::Field::Reader field : root.asReader().getObject()) {
    const std::string key = field.getName().cStr();
    double ControllerGains::*target = nullptr;
    for (const auto& [name, member] : kKeys) {
      if (key == name) target = member;
    }
    if (target == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          origin, ": unknown key \"", key, "\"; known keys: ", KnownKeys()));
    }
    capnp::JsonValue::Reader value = field.getValue();
    if (!value.isNumber() || !std::isfinite(value.getNumber())) {
      return absl::InvalidArgumentError(
          absl::StrCat(origin, ": \"", key, "\" must be a finite number"));
    }
    gains.*target = value.getNumber();
  }
  return gains;
}

absl::StatusOr<ControllerGains> LoadControllerGains(
    const std::string& path, const ControllerGains& defaults) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "cannot read the gains file ", path,
        " (relative paths are from the working directory)"));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseControllerGains(text.str(), path, defaults);
}

}  // namespace tether::examples
