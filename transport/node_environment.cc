#include "transport/node_environment.h"

#include <filesystem>
#include <system_error>

namespace tether::transport {
namespace {

std::string Or(const GetEnvFunction& getenv, const char* name,
               const std::string& fallback) {
  const char* value = getenv ? getenv(name) : nullptr;
  return value != nullptr && value[0] != '\0' ? std::string(value) : fallback;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

}  // namespace

NodeEnvironment ReadNodeEnvironment(const GetEnvFunction& getenv,
                                    const std::string& default_node_name,
                                    const std::string& default_config_path) {
  NodeEnvironment env;
  env.node_name = Or(getenv, kEnvNode, default_node_name);
  env.config_path = Or(getenv, kEnvStack, default_config_path);
  env.channels.root = Or(getenv, kEnvRoot, env.channels.root);
  env.channels.instance = Or(getenv, kEnvInstance, env.channels.instance);
  return env;
}

std::vector<EnvVariable> NodeEnvironmentVariables(
    const NodeEnvironment& environment) {
  return {
      {kEnvRoot, Absolute(environment.channels.root)},
      {kEnvInstance, environment.channels.instance},
      {kEnvNode, environment.node_name},
      {kEnvStack, Absolute(environment.config_path)},
  };
}

}  // namespace tether::transport
