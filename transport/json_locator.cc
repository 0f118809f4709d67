#include "transport/json_locator.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace tether::transport::internal {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, int max_depth, JsonLocations& out)
      : text_(text), max_depth_(max_depth), out_(out) {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\n') newlines_.push_back(i);
    }
  }

  void Run() {
    SkipSpace();
    if (AtEnd()) {
      Fail("the file is empty; expected a JSON object");
      return;
    }
    std::string path;
    if (!Value(path, 0)) return;
    SkipSpace();
    if (!AtEnd()) {
      Fail(absl::StrCat("unexpected '", std::string(1, text_[pos_]),
                        "' after the end of the top-level value"));
    }
  }

 private:
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return text_[pos_]; }

  int LineOf(size_t pos) const {
    return static_cast<int>(
               std::lower_bound(newlines_.begin(), newlines_.end(), pos) -
               newlines_.begin()) +
           1;
  }
  int ColumnOf(size_t pos) const {
    const int line = LineOf(pos);
    const size_t line_start = line == 1 ? 0 : newlines_[line - 2] + 1;
    return static_cast<int>(pos - line_start) + 1;
  }

  bool Fail(std::string message) {
    if (!out_.error) {
      out_.error =
          JsonSyntaxError{LineOf(pos_), ColumnOf(pos_), std::move(message)};
    }
    return false;
  }

  std::string Describe() const {
    if (AtEnd()) return "end of file";
    const char c = Peek();
    if (static_cast<unsigned char>(c) < 0x20) return "a control character";
    return absl::StrCat("'", std::string(1, c), "'");
  }

  void SkipSpace() {
    while (!AtEnd() && (Peek() == ' ' || Peek() == '\t' || Peek() == '\n' ||
                        Peek() == '\r')) {
      ++pos_;
    }
  }

  void Record(const std::string& path, size_t pos) {
    out_.lines.try_emplace(path, LineOf(pos));
  }

  bool Value(const std::string& path, int depth) {
    SkipSpace();
    Record(path, pos_);
    if (AtEnd()) return Fail("unexpected end of file; expected a value");
    switch (Peek()) {
      case '{':
        return Object(path, depth + 1);
      case '[':
        return Array(path, depth + 1);
      case '"': {
        std::string ignored;
        return String(ignored);
      }
      case 't':
        return Literal("true");
      case 'f':
        return Literal("false");
      case 'n':
        return Literal("null");
      default:
        if (Peek() == '-' || (Peek() >= '0' && Peek() <= '9')) return Number();
        return Fail(absl::StrCat("unexpected ", Describe(),
                                 "; expected a value (object, array, "
                                 "string, number, true, false or null)"));
    }
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) {
      return Fail(absl::StrCat("unexpected ", Describe(), "; expected ",
                               word == "null" ? "null" : "true or false"));
    }
    pos_ += word.size();
    return true;
  }

  bool Digits() {
    if (AtEnd() || Peek() < '0' || Peek() > '9') {
      return Fail(absl::StrCat("unexpected ", Describe(),
                               " in a number; expected a digit"));
    }
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') ++pos_;
    return true;
  }

  bool Number() {
    if (Peek() == '-') ++pos_;
    if (!AtEnd() && Peek() == '0') {
      ++pos_;
      if (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
        return Fail(
            "a number cannot have a leading zero (write octal modes as "
            "strings, e.g. \"0660\")");
      }
    } else if (!Digits()) {
      return false;
    }
    if (!AtEnd() && Peek() == '.') {
      ++pos_;
      if (!Digits()) return false;
    }
    if (!AtEnd() && (Peek() == 'e' || Peek() == 'E')) {
      ++pos_;
      if (!AtEnd() && (Peek() == '+' || Peek() == '-')) ++pos_;
      if (!Digits()) return false;
    }
    return true;
  }

  static int HexValue(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Scans a string at pos_ (which is '"'); `out` gets the text with simple
  // escapes decoded (\u escapes are kept as written).
  bool String(std::string& out) {
    ++pos_;
    while (true) {
      if (AtEnd()) return Fail("unterminated string");
      const char c = Peek();
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail(c == '\n' ? "unterminated string (newline inside)"
                              : "control character inside a string; escape "
                                "it");
      }
      if (c != '\\') {
        out.push_back(c);
        ++pos_;
        continue;
      }
      ++pos_;
      if (AtEnd()) return Fail("unterminated string");
      const char e = Peek();
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u':
          for (int i = 1; i <= 4; ++i) {
            if (pos_ + i >= text_.size() || HexValue(text_[pos_ + i]) < 0) {
              pos_ += i;
              return Fail("\\u must be followed by four hex digits");
            }
          }
          out.append(text_.substr(pos_ - 1, 6));
          pos_ += 4;
          break;
        default:
          return Fail(absl::StrCat("invalid escape '\\", std::string(1, e),
                                   "' in a string"));
      }
      ++pos_;
    }
  }

  bool CheckDepth(int depth) {
    if (depth > max_depth_) {
      return Fail(absl::StrCat("nested deeper than ", max_depth_, " levels"));
    }
    return true;
  }

  bool Object(const std::string& path, int depth) {
    if (!CheckDepth(depth)) return false;
    ++pos_;  // '{'
    SkipSpace();
    if (!AtEnd() && Peek() == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      SkipSpace();
      if (AtEnd() || Peek() != '"') {
        return Fail(absl::StrCat("unexpected ", Describe(),
                                 "; expected a quoted member name"));
      }
      const size_t key_pos = pos_;
      std::string key;
      if (!String(key)) return false;
      const std::string member_path = path.empty() ? key : path + "." + key;
      SkipSpace();
      if (AtEnd() || Peek() != ':') {
        return Fail(absl::StrCat("unexpected ", Describe(),
                                 "; expected ':' after \"", key, "\""));
      }
      ++pos_;
      Record(member_path, key_pos);
      if (!Value(member_path, depth)) return false;
      SkipSpace();
      if (!AtEnd() && Peek() == ',') {
        ++pos_;
        continue;
      }
      if (!AtEnd() && Peek() == '}') {
        ++pos_;
        return true;
      }
      return Fail(absl::StrCat("unexpected ", Describe(),
                               "; expected ',' or '}' after the value of \"",
                               key, "\""));
    }
  }

  bool Array(const std::string& path, int depth) {
    if (!CheckDepth(depth)) return false;
    ++pos_;  // '['
    SkipSpace();
    if (!AtEnd() && Peek() == ']') {
      ++pos_;
      return true;
    }
    for (size_t i = 0;; ++i) {
      if (!Value(absl::StrCat(path, "[", i, "]"), depth)) return false;
      SkipSpace();
      if (!AtEnd() && Peek() == ',') {
        ++pos_;
        continue;
      }
      if (!AtEnd() && Peek() == ']') {
        ++pos_;
        return true;
      }
      return Fail(absl::StrCat("unexpected ", Describe(),
                               "; expected ',' or ']' in an array"));
    }
  }

  std::string_view text_;
  int max_depth_;
  JsonLocations& out_;
  std::vector<size_t> newlines_;
  size_t pos_ = 0;
};

}  // namespace

JsonLocations LocateJson(std::string_view text, int max_depth) {
  JsonLocations out;
  Scanner(text, max_depth, out).Run();
  return out;
}

}  // namespace tether::transport::internal
