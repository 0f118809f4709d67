// log: a small RGB raster for plots — pixels, lines, filled rectangles and
// text in a 5x7 bitmap font (printable ASCII, drawn for tether) — written as
// a PNG file (8-bit RGB, zlib-compressed IDAT, CRCs). Our own writer: no
// image library needed, only zlib.
//
// Threading: one thread per image. Not RT-safe (allocates).
#ifndef TETHER_LOG_PNG_IMAGE_H_
#define TETHER_LOG_PNG_IMAGE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace tether::log {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};

class Image {
 public:
  // All white.
  Image(int width, int height);

  int width() const { return width_; }
  int height() const { return height_; }
  // Out-of-range pixels are ignored (clipped).
  void Set(int x, int y, Rgb c);
  Rgb Get(int x, int y) const;
  void FillRect(int x0, int y0, int x1, int y1, Rgb c);  // inclusive
  // A line of `thickness` pixels (Bresenham, square brush).
  void Line(int x0, int y0, int x1, int y1, Rgb c, int thickness = 1);
  // Text with its top-left corner at (x, y); each glyph is 5x7 pixels times
  // `scale` plus one column of spacing. Characters outside printable ASCII
  // are drawn as '?'.
  void Text(int x, int y, std::string_view text, Rgb c, int scale = 1);
  static int TextWidth(std::string_view text, int scale = 1);
  static int TextHeight(int scale = 1) { return 7 * scale; }

  // The image as PNG bytes.
  std::vector<uint8_t> EncodePng() const;
  // Writes EncodePng() to `path` (errors name the path).
  absl::Status WritePng(const std::string& path) const;

 private:
  int width_, height_;
  std::vector<uint8_t> pixels_;  // RGB, row-major
};

}  // namespace tether::log

#endif  // TETHER_LOG_PNG_IMAGE_H_
