#include "tools/arg_parser.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::tools {
namespace {

using ::testing::HasSubstr;

ArgParser EchoLikeParser() {
  ArgParser parser("tether echo", "Prints messages of a channel.");
  parser.AddFlag("json", "print messages as JSON");
  parser.AddOption("count", "N", "stop after N messages", "0");
  parser.AddPositional("channel", "the channel name");
  parser.AddPositional("field", "one field to print", /*required=*/false);
  return parser;
}

absl::StatusOr<ParsedArgs> Parse(std::vector<std::string> args) {
  return EchoLikeParser().Parse(args);
}

TEST(ArgParser, ParsesFlagsOptionsAndPositionalsInAnyOrder) {
  absl::StatusOr<ParsedArgs> p =
      Parse({"--json", "/robot/imu", "--count=5", "x"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->help_requested());
  EXPECT_TRUE(p->Flag("json"));
  EXPECT_EQ(p->Option("count"), "5");
  EXPECT_TRUE(p->HasOption("count"));
  EXPECT_EQ(p->Positional("channel"), "/robot/imu");
  EXPECT_EQ(p->Positional("field"), "x");
}

TEST(ArgParser, OptionValueMayBeTheNextWord) {
  absl::StatusOr<ParsedArgs> p = Parse({"--count", "7", "ch"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Option("count"), "7");
  EXPECT_EQ(p->Positional("channel"), "ch");
}

TEST(ArgParser, AbsentArgumentsTakeTheirDefaults) {
  absl::StatusOr<ParsedArgs> p = Parse({"ch"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->Flag("json"));
  EXPECT_EQ(p->Option("count"), "0");
  EXPECT_FALSE(p->HasOption("count"));
  EXPECT_EQ(p->Positional("field"), "");
}

TEST(ArgParser, HelpWinsOverOtherErrors) {
  for (const char* help : {"--help", "-h"}) {
    absl::StatusOr<ParsedArgs> p = Parse({"--bogus", help});
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_TRUE(p->help_requested());
  }
}

TEST(ArgParser, DoubleDashEndsOptions) {
  absl::StatusOr<ParsedArgs> p = Parse({"--", "--json", "-h"});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->help_requested());
  EXPECT_FALSE(p->Flag("json"));
  EXPECT_EQ(p->Positional("channel"), "--json");
  EXPECT_EQ(p->Positional("field"), "-h");
}

TEST(ArgParser, ErrorsNameTheBadWordAndPointAtHelp) {
  struct Case {
    std::vector<std::string> args;
    std::string expected;
  };
  const Case cases[] = {
      {{"--bogus", "ch"}, "unknown option '--bogus'"},
      {{"-x", "ch"}, "unknown option '-x'"},
      {{"--json=1", "ch"}, "flag '--json' takes no value"},
      {{"ch", "--count"}, "option '--count' needs a N"},
      {{}, "missing argument <channel>"},
      {{"a", "b", "c"}, "unexpected argument 'c'"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ParsedArgs> p = Parse(c.args);
    ASSERT_FALSE(p.ok()) << c.expected;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(c.expected));
    EXPECT_THAT(p.status().message(), HasSubstr("tether echo --help"));
  }
}

TEST(ArgParser, HelpListsUsageArgumentsOptionsAndDefaults) {
  const std::string help = EchoLikeParser().Help();
  EXPECT_THAT(help,
              HasSubstr("usage: tether echo [options] <channel> [<field>]"));
  EXPECT_THAT(help, HasSubstr("Prints messages of a channel."));
  EXPECT_THAT(help, HasSubstr("<channel>"));
  EXPECT_THAT(help, HasSubstr("--count N"));
  EXPECT_THAT(help, HasSubstr("(default: 0)"));
  EXPECT_THAT(help, HasSubstr("--json"));
  EXPECT_THAT(help, HasSubstr("-h, --help"));
}

TEST(ArgParser, PositionalListCollectsTheRemainingWords) {
  ArgParser parser("tether log plot", "Plots fields.");
  parser.AddOption("out", "PNG", "output file", "plot.png");
  parser.AddPositional("file", "the log");
  parser.AddPositionalList("field", "fields to plot", /*required=*/true);
  const std::vector<std::string> args = {"run.mcap", "/a.x", "--out=p.png",
                                         "/b.y"};
  absl::StatusOr<ParsedArgs> p = parser.Parse(args);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->Positional("file"), "run.mcap");
  EXPECT_THAT(p->PositionalList("field"), ::testing::ElementsAre("/a.x", "/b.y"));
  const std::vector<std::string> file_only = {"run.mcap"};
  absl::StatusOr<ParsedArgs> none = parser.Parse(file_only);
  ASSERT_FALSE(none.ok());
  EXPECT_THAT(std::string(none.status().message()), HasSubstr("<field...>"));
  EXPECT_THAT(parser.Help(), HasSubstr("<file> <field>..."));
}

}  // namespace
}  // namespace tether::tools
