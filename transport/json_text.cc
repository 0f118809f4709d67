#include "transport/json_text.h"

#include <cstdint>
#include <optional>
#include <string>

#include "kj/exception.h"

namespace tether::transport {
namespace {

// The four hex digits at text[at..at+4), or nullopt.
std::optional<uint32_t> Hex4(std::string_view text, size_t at) {
  if (at + 4 > text.size()) return std::nullopt;
  uint32_t v = 0;
  for (size_t i = at; i < at + 4; ++i) {
    const char c = text[i];
    uint32_t d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return std::nullopt;
    }
    v = v << 4 | d;
  }
  return v;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | cp >> 6));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | cp >> 12));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | cp >> 18));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

[[noreturn]] void Fail(std::string_view what, std::string_view escape) {
  kj::throwFatalException(KJ_EXCEPTION(
      FAILED, std::string(what).c_str(), std::string(escape).c_str()));
}

// `text` with every \uXXXX escape inside a string replaced by its
// character: UTF-8 bytes, a control character as the raw byte (which the
// codec takes), and '"' and '\' as their own two-character escapes (which
// it reads right). Everything else is copied as it is; malformed text is
// left for the codec to refuse.
std::string WithoutUnicodeEscapes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (!in_string) {
      in_string = c == '"';
      out.push_back(c);
      continue;
    }
    if (c == '"') {
      in_string = false;
      out.push_back(c);
      continue;
    }
    if (c != '\\' || i + 1 >= text.size()) {
      out.push_back(c);
      continue;
    }
    if (text[i + 1] != 'u') {
      out.append(text.substr(i, 2));
      ++i;
      continue;
    }
    const std::optional<uint32_t> unit = Hex4(text, i + 2);
    if (!unit.has_value()) {
      out.push_back(c);  // not an escape: the codec says so
      continue;
    }
    uint32_t cp = *unit;
    size_t used = 6;
    if (cp >= 0xd800 && cp <= 0xdbff) {
      const std::optional<uint32_t> low =
          i + 12 <= text.size() && text[i + 6] == '\\' && text[i + 7] == 'u'
              ? Hex4(text, i + 8)
              : std::nullopt;
      if (!low.has_value() || *low < 0xdc00 || *low > 0xdfff) {
        Fail("a \\u escape of a lone UTF-16 high surrogate is no character: "
             "write the character itself, or a surrogate pair",
             text.substr(i, 6));
      }
      cp = 0x10000 + ((cp - 0xd800) << 10) + (*low - 0xdc00);
      used = 12;
    } else if (cp >= 0xdc00 && cp <= 0xdfff) {
      Fail("a \\u escape of a lone UTF-16 low surrogate is no character: "
           "write the character itself, or a surrogate pair",
           text.substr(i, 6));
    }
    if (cp == '"' || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else {
      AppendUtf8(cp, &out);
    }
    i += used - 1;
  }
  return out;
}

}  // namespace

void DecodeRawJson(std::string_view text, capnp::JsonValue::Builder out) {
  const std::string plain = WithoutUnicodeEscapes(text);
  capnp::JsonCodec().decodeRaw(kj::ArrayPtr<const char>(plain.data(), plain.size()),
                               out);
}

}  // namespace tether::transport
