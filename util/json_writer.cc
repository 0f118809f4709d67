#include "util/json_writer.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace tether::util {
namespace {

[[noreturn]] void Misuse(const char* what) {
  std::fprintf(stderr, "tether: internal error: JsonWriter: %s\n", what);
  std::abort();
}

}  // namespace

std::string JsonQuote(std::string_view value) {
  std::string out;
  out.reserve(value.size() + 2);
  out.push_back('"');
  for (const char c : value) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x",
                        static_cast<unsigned>(static_cast<unsigned char>(c)));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
  return out;
}

void JsonWriter::Newline() {
  out_.push_back('\n');
  out_.append(2 * scopes_.size(), ' ');
}

void JsonWriter::BeforeValue() {
  if (done_) Misuse("value after the document ended");
  if (scopes_.empty()) return;  // The top-level value.
  if (scopes_.back() == Scope::kObject) {
    if (!after_key_) Misuse("value without a key inside an object");
    after_key_ = false;
    return;
  }
  if (!first_in_scope_) out_.push_back(',');
  first_in_scope_ = false;
  Newline();
}

void JsonWriter::Open(Scope scope, char c) {
  BeforeValue();
  out_.push_back(c);
  scopes_.push_back(scope);
  first_in_scope_ = true;
}

void JsonWriter::Close(Scope scope, char c) {
  if (scopes_.empty() || scopes_.back() != scope || after_key_) {
    Misuse("unbalanced End");
  }
  scopes_.pop_back();
  if (!first_in_scope_) Newline();
  out_.push_back(c);
  first_in_scope_ = false;
  if (scopes_.empty()) {
    done_ = true;
    out_.push_back('\n');
  }
}

JsonWriter& JsonWriter::BeginObject() {
  Open(Scope::kObject, '{');
  return *this;
}
JsonWriter& JsonWriter::EndObject() {
  Close(Scope::kObject, '}');
  return *this;
}
JsonWriter& JsonWriter::BeginArray() {
  Open(Scope::kArray, '[');
  return *this;
}
JsonWriter& JsonWriter::EndArray() {
  Close(Scope::kArray, ']');
  return *this;
}

JsonWriter& JsonWriter::Key(std::string_view key) {
  if (scopes_.empty() || scopes_.back() != Scope::kObject || after_key_) {
    Misuse("Key outside an object or twice in a row");
  }
  if (!first_in_scope_) out_.push_back(',');
  first_in_scope_ = false;
  Newline();
  out_ += JsonQuote(key);
  out_ += ": ";
  after_key_ = true;
  return *this;
}

JsonWriter& JsonWriter::String(std::string_view value) {
  BeforeValue();
  out_ += JsonQuote(value);
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::Bool(bool value) {
  BeforeValue();
  out_ += value ? "true" : "false";
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::Int(int64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::Uint(uint64_t value) {
  BeforeValue();
  out_ += std::to_string(value);
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::Double(double value, int decimals) {
  if (decimals < 0 || decimals > 17)
    Misuse("Double with decimals outside 0..17");
  BeforeValue();
  if (std::isfinite(value)) {
    char buf[400];  // DBL_MAX has 309 digits before the point.
    std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
    out_ += buf;
  } else {
    out_ += "null";
  }
  if (scopes_.empty()) done_ = true;
  return *this;
}

JsonWriter& JsonWriter::Null() {
  BeforeValue();
  out_ += "null";
  if (scopes_.empty()) done_ = true;
  return *this;
}

}  // namespace tether::util
