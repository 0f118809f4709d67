// The launcher -> node environment contract: what the launcher writes is
// what a node reads back, unset or empty variables take the defaults, and
// relative paths are made absolute for a node in another directory.
#include "transport/node_environment.h"

#include <unistd.h>

#include <map>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::transport {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;

// A getenv over a map, as a node would see an environment made of `vars`.
GetEnvFunction Lookup(const std::map<std::string, std::string>& vars) {
  return [vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

NodeEnvironment Env(const std::string& node, const std::string& stack,
                    const std::string& root, const std::string& instance) {
  NodeEnvironment env;
  env.node_name = node;
  env.config_path = stack;
  env.channels.root = root;
  env.channels.instance = instance;
  return env;
}

TEST(NodeEnvironment, WhatTheLauncherWritesIsWhatTheNodeReads) {
  const NodeEnvironment written =
      Env("controller", "/etc/robot/stack.json", "/dev/shm/test-root", "bench");
  std::map<std::string, std::string> vars;
  for (const EnvVariable& v : NodeEnvironmentVariables(written)) {
    vars[v.name] = v.value;
  }
  EXPECT_EQ(vars.size(), 4u);
  const NodeEnvironment read =
      ReadNodeEnvironment(Lookup(vars), "default-name", "default.json");
  EXPECT_EQ(read.node_name, "controller");
  EXPECT_EQ(read.config_path, "/etc/robot/stack.json");
  EXPECT_EQ(read.channels.root, "/dev/shm/test-root");
  EXPECT_EQ(read.channels.instance, "bench");
}

TEST(NodeEnvironment, VariablesHaveTheDocumentedNamesAndOrder) {
  EXPECT_THAT(NodeEnvironmentVariables(Env("n", "/s.json", "/r", "i")),
              ElementsAre(Field(&EnvVariable::name, "TETHER_ROOT"),
                          Field(&EnvVariable::name, "TETHER_INSTANCE"),
                          Field(&EnvVariable::name, "TETHER_NODE"),
                          Field(&EnvVariable::name, "TETHER_STACK")));
}

TEST(NodeEnvironment, UnsetOrEmptyVariablesTakeTheDefaults) {
  const NodeEnvironment defaults_only = ReadNodeEnvironment(
      Lookup({{kEnvNode, ""}}), "sensors", "examples/stack.json");
  const shm::ChannelOptions stock;
  EXPECT_EQ(defaults_only.node_name, "sensors");
  EXPECT_EQ(defaults_only.config_path, "examples/stack.json");
  EXPECT_EQ(defaults_only.channels.root, stock.root);
  EXPECT_EQ(defaults_only.channels.instance, stock.instance);
  // No lookup at all (an empty function) behaves as an empty environment.
  EXPECT_EQ(ReadNodeEnvironment(nullptr, "x", "y.json").node_name, "x");
}

TEST(NodeEnvironment, RelativePathsAreWrittenAbsolute) {
  char cwd[4096];
  ASSERT_NE(::getcwd(cwd, sizeof(cwd)), nullptr);
  const std::vector<EnvVariable> vars = NodeEnvironmentVariables(
      Env("n", "config/../stack.json", "shm-root", "i"));
  EXPECT_EQ(vars[0].value, std::string(cwd) + "/shm-root");
  EXPECT_EQ(vars[3].value, std::string(cwd) + "/stack.json");
}

}  // namespace
}  // namespace tether::transport
