// Plots: the PNG writer produces a valid PNG (checked by decoding it with
// zlib), text and lines land where they should, fields are read by path
// (nested, list elements, booleans; from every incarnation of a re-created
// channel) with errors that list what exists, and missing messages break
// the line.
#include "log/log_plot.h"

#include <zlib.h>

#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "log/logger.h"
#include "tests/log/log_test_util.h"
#include "tests/shm/shm_test_util.h"

namespace tether::log {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using namespace ::tether::log::testing;

uint32_t BigEndian(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}

// Decodes our own PNGs (8-bit RGB, filter 0 rows, one IDAT) back to pixels,
// checking every chunk's CRC.
std::vector<uint8_t> DecodePng(const std::vector<uint8_t>& png, int* w, int* h) {
  static const uint8_t kSignature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  EXPECT_EQ(std::memcmp(png.data(), kSignature, 8), 0);
  size_t pos = 8;
  std::vector<uint8_t> idat;
  bool ended = false;
  while (pos + 12 <= png.size()) {
    const uint32_t len = BigEndian(&png[pos]);
    const std::string type(reinterpret_cast<const char*>(&png[pos + 4]), 4);
    EXPECT_EQ(::crc32(0, &png[pos + 4], 4 + len), BigEndian(&png[pos + 8 + len]))
        << type;
    if (type == "IHDR") {
      *w = static_cast<int>(BigEndian(&png[pos + 8]));
      *h = static_cast<int>(BigEndian(&png[pos + 12]));
      EXPECT_EQ(png[pos + 16], 8);  // bit depth
      EXPECT_EQ(png[pos + 17], 2);  // RGB
    } else if (type == "IDAT") {
      idat.insert(idat.end(), &png[pos + 8], &png[pos + 8 + len]);
    } else if (type == "IEND") {
      ended = true;
    }
    pos += 12 + len;
  }
  EXPECT_TRUE(ended);
  uLongf size = static_cast<uLongf>(*h) * (1 + *w * 3);
  std::vector<uint8_t> raw(size);
  EXPECT_EQ(::uncompress(raw.data(), &size, idat.data(), idat.size()), Z_OK);
  std::vector<uint8_t> pixels;
  for (int y = 0; y < *h; ++y) {
    EXPECT_EQ(raw[y * (1 + *w * 3)], 0);  // filter: none
    pixels.insert(pixels.end(), &raw[y * (1 + *w * 3) + 1], &raw[(y + 1) * (1 + *w * 3)]);
  }
  return pixels;
}

TEST(Image, EncodesAValidPngOfItsPixels) {
  Image img(37, 21);
  img.FillRect(2, 3, 5, 4, {10, 20, 30});
  img.Line(0, 20, 36, 0, {200, 0, 0});
  int w = 0, h = 0;
  const std::vector<uint8_t> px = DecodePng(img.EncodePng(), &w, &h);
  ASSERT_EQ(w, 37);
  ASSERT_EQ(h, 21);
  auto at = [&](int x, int y) {
    const uint8_t* p = &px[(y * w + x) * 3];
    return std::vector<int>{p[0], p[1], p[2]};
  };
  EXPECT_EQ(at(2, 3), (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(at(5, 4), (std::vector<int>{10, 20, 30}));
  EXPECT_EQ(at(6, 4), (std::vector<int>{255, 255, 255}));
  EXPECT_EQ(at(0, 20), (std::vector<int>{200, 0, 0}));
  EXPECT_EQ(at(36, 0), (std::vector<int>{200, 0, 0}));
}

TEST(Image, TextStaysInsideItsBox) {
  Image img(100, 30);
  img.Text(10, 5, "Hi 0.5", {0, 0, 0}, 2);
  const int right = 10 + Image::TextWidth("Hi 0.5", 2);
  int inked = 0;
  for (int y = 0; y < 30; ++y) {
    for (int x = 0; x < 100; ++x) {
      const Rgb c = img.Get(x, y);
      if (c.r == 0) {
        ++inked;
        EXPECT_GE(x, 10);
        EXPECT_LT(x, right);
        EXPECT_GE(y, 5);
        EXPECT_LT(y, 5 + Image::TextHeight(2));
      }
    }
  }
  EXPECT_GT(inked, 50);
}

TEST(NiceTicks, UsesRoundSteps) {
  EXPECT_THAT(NiceTicks(0, 1, 6), ElementsAre(0, 0.2, 0.4, 0.6000000000000001, 0.8, 1));
  EXPECT_THAT(NiceTicks(-1.7, 0.1, 6), ElementsAre(-1.5, -1, -0.5, 0));
  EXPECT_THAT(NiceTicks(3, 3, 6), ElementsAre(3));
}

class LogPlotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RegisterTestTypes(schemas_);
    auto scalars = MakeChannel(root_.options(), schemas_, "/p/scalars", kScalarsType,
                               {.max_size = 128, .depth = 8});
    auto samples = MakeChannel(root_.options(), schemas_, "/p/samples", kSampleType);
    LoggerOptions o = LogTo(root_.options(), TempFile("plot.mcap"));
    o.period = std::chrono::milliseconds(40);
    auto logger = Logger::Start(o);
    ASSERT_TRUE(logger.ok());
    auto pc = transport::RawPublisher::Create(scalars.get());
    auto ps = transport::RawPublisher::Create(samples.get());
    for (int i = 0; i < 20; ++i) {
      PublishBytes(**pc, ScalarsMessage(i));
      PublishBytes(**ps, SampleMessage(i));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // A burst the 8-deep queue cannot hold before the next drain: losses.
    for (int i = 20; i < 60; ++i) PublishBytes(**pc, ScalarsMessage(i));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    for (int i = 60; i < 70; ++i) {
      PublishBytes(**pc, ScalarsMessage(i));
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ASSERT_TRUE(WaitFor([&] {
      const LoggerStats s = (*logger)->stats();
      return s.messages + s.missed == 90;
    }));
    ASSERT_TRUE((*logger)->Stop().ok());
    missed_ = (*logger)->stats().missed;
    auto r = LogReader::Open(o.path);
    ASSERT_TRUE(r.ok());
    reader_ = std::move(*r);
  }
  shm::testing::ScopedRoot root_;
  transport::SchemaRegistry schemas_;
  std::unique_ptr<LogReader> reader_;
  uint64_t missed_ = 0;
};

TEST_F(LogPlotTest, ReadsFieldsByPathWithTheirTimes) {
  auto series = ReadPlotSeries(
      *reader_, {"/p/scalars.f64", "/p/scalars.flag", "/p/samples.values[2]",
                 "/p/samples.joints[1].position", "/p/samples.inner.position"});
  ASSERT_TRUE(series.ok()) << series.status();
  const PlotSeries& f64 = (*series)[0];
  ASSERT_EQ(f64.value.size() + missed_, 70u);
  EXPECT_EQ(f64.missed, missed_);
  EXPECT_GT(missed_, 0u);
  for (size_t i = 1; i < f64.value.size(); ++i) {
    EXPECT_GT(f64.value[i], f64.value[i - 1]);  // 0.5 * i, in send order
    EXPECT_GE(f64.time_s[i], f64.time_s[i - 1]);
  }
  // Which messages the burst cost depends on timing; each sample is still
  // message i's: f64 = 0.5 i and flag = (i % 2 == 0), from the same messages.
  const PlotSeries& flag = (*series)[1];
  ASSERT_EQ(flag.value.size(), f64.value.size());
  for (size_t k = 0; k < f64.value.size(); ++k) {
    const int i = static_cast<int>(f64.value[k] / 0.5);
    EXPECT_EQ(f64.value[k], 0.5 * i);
    EXPECT_EQ(flag.value[k], i % 2 == 0 ? 1.0 : 0.0);
    EXPECT_EQ(flag.time_s[k], f64.time_s[k]);
  }
  // values[2] exists when i % 9 > 2: i = 3..8, 12..17.
  EXPECT_EQ((*series)[2].value.size(), 12u);
  EXPECT_FLOAT_EQ((*series)[2].value[0], 0.5f + 3);
  // joints[1] exists when i % 3 == 2: position = i * 0.001 + 1.
  ASSERT_FALSE((*series)[3].value.empty());
  EXPECT_DOUBLE_EQ((*series)[3].value[0], 2 * 0.001 + 1);
  EXPECT_EQ((*series)[4].value.size(), 20u);
}

TEST_F(LogPlotTest, BadFieldsSayWhatExists) {
  auto r = ReadPlotSeries(*reader_, {"/p/scalars.nope"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("it has: i64, u8, f64, flag, i32"));
  r = ReadPlotSeries(*reader_, {"/q.x"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("/p/samples, /p/scalars"));
  r = ReadPlotSeries(*reader_, {"/p/samples.label"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a number"));
  r = ReadPlotSeries(*reader_, {"/p/samples.inner[0]"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("not a list"));
}

TEST_F(LogPlotTest, AChannelWithoutAFieldListsItsNumericFields) {
  for (const char* field : {"/p/samples", "/p/samples."}) {
    auto r = ReadPlotSeries(*reader_, {field});
    ASSERT_FALSE(r.ok()) << field;
    const std::string e(r.status().message());
    EXPECT_THAT(e, HasSubstr("names the channel /p/samples but no field"));
    EXPECT_THAT(e, HasSubstr("write /p/samples.FIELD"));
    // Leaves only, nested and in lists; text, data and lists of text are not.
    EXPECT_THAT(e, HasSubstr(": stamp, values[i], joints[i].position, "
                             "joints[i].velocity, inner.position, "
                             "inner.velocity, child.stamp"));
    EXPECT_THAT(e, Not(HasSubstr("label")));
    EXPECT_THAT(e, Not(HasSubstr("blob")));
    EXPECT_THAT(e, Not(HasSubstr("names[i]")));
  }
  auto r = ReadPlotSeries(*reader_, {"/p/scalars"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("fields (name[i] for list elements): i64, u8, f64, "
                        "flag, i32"));
}

TEST_F(LogPlotTest, AnIndexPastTheEndInEveryMessageIsAnError) {
  auto r = ReadPlotSeries(
      *reader_, {"/p/scalars.f64", "/p/samples.joints[999].position"});
  ASSERT_FALSE(r.ok());
  const std::string e(r.status().message());
  EXPECT_THAT(e, HasSubstr("field /p/samples.joints[999].position: index 999 "
                           "is past the end of joints in every message of "
                           "/p/samples (20 messages; the longest joints has 2 "
                           "elements: use an index below 2)"));
  // Past the end in some messages only: those are skipped, as before.
  auto some = ReadPlotSeries(*reader_, {"/p/samples.joints[1].position"});
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_FALSE((*some)[0].value.empty());
  // An empty range reads no message: nothing to say about the index.
  PlotRange none;
  none.start_s = 1000;
  EXPECT_TRUE(
      ReadPlotSeries(*reader_, {"/p/samples.joints[999].position"}, none).ok());
}

// A channel re-created while it was recorded is in the log once per
// incarnation under one name: a field is read from every incarnation whose
// type has it, in order (only the first incarnation used to be read).
TEST(LogPlotReCreated, ReadsEveryIncarnationThatHasTheField) {
  shm::testing::ScopedRoot root;
  transport::SchemaRegistry schemas;
  RegisterTestTypes(schemas);
  const std::string path = TempFile("plot-recreated.mcap");
  LoggerOptions o = LogTo(root.options(), path);
  o.period = std::chrono::milliseconds(2);
  auto logger = Logger::Start(o);
  ASSERT_TRUE(logger.ok());
  size_t logged = 0;
  // Scalars (depth 8) i = 0..2, Sample 0..1, Scalars (depth 32) i = 10..13.
  const auto incarnation = [&](const char* type, uint32_t depth, int from,
                               int count) {
    auto c = MakeChannel(root.options(), schemas, "/p/a", type,
                         {.max_size = 1024, .depth = depth});
    auto pub = transport::RawPublisher::Create(c.get());
    for (int i = from; i < from + count; ++i) {
      PublishBytes(**pub, type == std::string(kScalarsType) ? ScalarsMessage(i)
                                                             : SampleMessage(i));
    }
    logged += count;
    EXPECT_TRUE(WaitFor([&] { return (*logger)->stats().messages == logged; }));
    pub->reset();
    c.reset();
    EXPECT_TRUE(shm::Channel::Remove(root.options(), "/p/a").ok());
  };
  incarnation(kScalarsType, 8, 0, 3);
  incarnation(kSampleType, 8, 0, 2);
  incarnation(kScalarsType, 32, 10, 4);
  ASSERT_TRUE((*logger)->Stop().ok());
  auto reader = LogReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto series = ReadPlotSeries(**reader, {"/p/a.f64", "/p/a.inner.position"});
  ASSERT_TRUE(series.ok()) << series.status();
  EXPECT_THAT((*series)[0].value, ElementsAre(0, 0.5, 1, 5, 5.5, 6, 6.5));
  EXPECT_EQ((*series)[1].value.size(), 2u);
  EXPECT_EQ((*series)[0].undecodable + (*series)[1].undecodable, 0u);
}

TEST_F(LogPlotTest, DrawsEachFieldAndMarksWhereMessagesAreMissing) {
  auto series = ReadPlotSeries(*reader_, {"/p/scalars.f64", "/p/samples.stamp"});
  ASSERT_TRUE(series.ok());
  PlotOptions options;
  options.width = 800;
  options.panel_height = 200;
  const Image img = RenderPlot(*series, options);
  int blue = 0, red = 0, gap_marks = 0;
  for (int y = 0; y < img.height(); ++y) {
    for (int x = 0; x < img.width(); ++x) {
      const Rgb c = img.Get(x, y);
      blue += c.r == 31 && c.g == 119 && c.b == 180;
      red += c.r == 214 && c.g == 39 && c.b == 40;
      gap_marks += c.r == 200 && c.g == 60 && c.b == 60;
    }
  }
  EXPECT_GT(blue, 200);      // first panel's line and title
  EXPECT_GT(red, 200);       // second panel's
  EXPECT_GT(gap_marks, 0);   // the burst's losses broke the first line
  int w = 0, h = 0;
  EXPECT_FALSE(DecodePng(img.EncodePng(), &w, &h).empty());
  EXPECT_EQ(h, img.height());
}

}  // namespace
}  // namespace tether::log
