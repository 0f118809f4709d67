#include "examples/gains_file.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tether::examples {
namespace {

using ::testing::HasSubstr;

TEST(GainsFile, TheDemoGainsFileLoads) {
  absl::StatusOr<ControllerGains> g =
      LoadControllerGains("examples/config/gains.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_GT(g->kx, 0);
  EXPECT_GT(g->wheel_kp, 0);
}

TEST(GainsFile, KeysLeftOutKeepTheirDefaults) {
  ControllerGains defaults;
  defaults.ky = 7;
  absl::StatusOr<ControllerGains> g =
      ParseControllerGains(R"({"kx": 1.5, "wheel_ki": 0})", "g.json", defaults);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->kx, 1.5);
  EXPECT_EQ(g->wheel_ki, 0.0);
  EXPECT_EQ(g->ky, 7.0);
}

TEST(GainsFile, ErrorsNameTheFileAndTheKey) {
  auto unknown = ParseControllerGains(R"({"kp": 1})", "g.json");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("g.json: unknown key \"kp\"; known keys: kx"));
  auto text = ParseControllerGains(R"({"kx": "fast"})", "g.json");
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("\"kx\""));
  EXPECT_FALSE(ParseControllerGains("[1, 2]", "g.json").ok());
  EXPECT_FALSE(ParseControllerGains("{\"kx\": ", "g.json").ok());
  EXPECT_EQ(LoadControllerGains("no/such/gains.json").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace tether::examples
