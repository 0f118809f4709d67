// Dispatch through a made-up command table.
#include "tools/cli.h"

#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;

int g_greet_runs = 0;

ArgParser GreetParser() {
  ArgParser parser("tether greet", "Greets someone.");
  parser.AddFlag("loud", "shout");
  parser.AddPositional("name", "who to greet");
  return parser;
}

int RunGreet(const ParsedArgs& args, std::ostream& out, std::ostream&) {
  ++g_greet_runs;
  out << (args.Flag("loud") ? "HELLO " : "hello ") << args.Positional("name")
      << "\n";
  return 7;
}

ArgParser QuietParser() { return ArgParser("tether quiet", "Does nothing."); }
int RunQuiet(const ParsedArgs&, std::ostream&, std::ostream&) { return 0; }

constexpr Command kTable[] = {
    {"greet", "say hello", &GreetParser, &RunGreet},
    {"quiet", "do nothing at all", &QuietParser, &RunQuiet},
};

struct Outcome {
  int code;
  std::string out;
  std::string err;
};

Outcome Dispatch(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = RunCli(kTable, args, out, err);
  return {code, out.str(), err.str()};
}

TEST(Cli, TopLevelHelpListsEveryCommandWithItsSummary) {
  const std::string help = TopLevelHelp(kTable);
  EXPECT_THAT(help, HasSubstr("usage: tether <command>"));
  EXPECT_THAT(help, HasSubstr("greet  say hello"));
  EXPECT_THAT(help, HasSubstr("quiet  do nothing at all"));
}

TEST(Cli, HelpGoesToStdoutAndExitsZero) {
  for (const char* help : {"--help", "-h", "help"}) {
    const Outcome o = Dispatch({help});
    EXPECT_EQ(o.code, kExitOk) << help;
    EXPECT_EQ(o.out, TopLevelHelp(kTable)) << help;
    EXPECT_THAT(o.err, IsEmpty()) << help;
  }
}

TEST(Cli, NoCommandPrintsUsageToStderrAndExitsTwo) {
  const Outcome o = Dispatch({});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.out, IsEmpty());
  EXPECT_THAT(o.err, HasSubstr("greet"));
}

TEST(Cli, UnknownCommandSaysSoListsTheCommandsAndExitsTwo) {
  const Outcome o = Dispatch({"frobnicate", "--help"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.out, IsEmpty());
  EXPECT_THAT(o.err, HasSubstr("unknown command 'frobnicate'"));
  EXPECT_THAT(o.err, HasSubstr("greet  say hello"));

  const Outcome h = Dispatch({"help", "frobnicate"});
  EXPECT_EQ(h.code, kExitUsage);
  EXPECT_THAT(h.err, HasSubstr("unknown command 'frobnicate'"));
}

TEST(Cli, CommandHelpShowsItsOwnUsageWithoutRunningIt) {
  g_greet_runs = 0;
  for (std::vector<std::string> args :
       {std::vector<std::string>{"greet", "--help"},
        std::vector<std::string>{"help", "greet"}}) {
    const Outcome o = Dispatch(args);
    EXPECT_EQ(o.code, kExitOk);
    EXPECT_EQ(o.out, GreetParser().Help());
    EXPECT_THAT(o.out, HasSubstr("--loud"));
  }
  EXPECT_EQ(g_greet_runs, 0);
}

TEST(Cli, BadArgumentsExitTwoWithoutRunningTheCommand) {
  g_greet_runs = 0;
  const Outcome o = Dispatch({"greet", "--bogus", "bob"});
  EXPECT_EQ(o.code, kExitUsage);
  EXPECT_THAT(o.err, HasSubstr("tether greet: unknown option '--bogus'"));
  EXPECT_EQ(Dispatch({"greet"}).code, kExitUsage);
  EXPECT_EQ(g_greet_runs, 0);
}

TEST(Cli, RunsTheCommandWithItsArgumentsAndReturnsItsExitCode) {
  g_greet_runs = 0;
  const Outcome o = Dispatch({"greet", "--loud", "bob"});
  EXPECT_EQ(o.code, 7);
  EXPECT_EQ(o.out, "HELLO bob\n");
  EXPECT_EQ(g_greet_runs, 1);
}

}  // namespace
}  // namespace tether::tools
