#include "ros_bridge/ros1msg/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include "absl/strings/string_view.h"

#include "absl/strings/str_cat.h"
#include "ros_bridge/ros1msg/wire.h"

namespace tether::ros1msg {
namespace internal {

size_t MinSerializedSize(const MessageSpec& spec) {
  size_t n = 0;
  for (const Field& f : spec.fields) {
    if (f.is_array && f.array_length < 0) {
      n += 4;
    } else {
      n += MinSerializedSize(f) *
           static_cast<size_t>(f.is_array ? f.array_length : 1);
    }
  }
  return n;
}

size_t MinSerializedSize(const Field& f) {
  if (f.type == Primitive::kString) return 4;
  if (f.type == Primitive::kMessage) return MinSerializedSize(*f.message);
  return PrimitiveSize(f.type);
}

}  // namespace internal

namespace {

using internal::WireReader;

// Arrays of elements that take no bytes (empty messages) are bounded so a
// corrupt count cannot make the output unbounded.
constexpr uint32_t kMaxEmptyElements = 1u << 20;

bool ValidUtf8(absl::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    int extra = 0;
    if (c < 0x80) {
      extra = 0;
    } else if ((c & 0xE0) == 0xC0 && c >= 0xC2) {
      extra = 1;
    } else if ((c & 0xF0) == 0xE0) {
      extra = 2;
    } else if ((c & 0xF8) == 0xF0 && c <= 0xF4) {
      extra = 3;
    } else {
      return false;
    }
    if (extra > 0 && i + static_cast<size_t>(extra) >= s.size()) return false;
    for (int k = 1; k <= extra; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
    }
    i += 1 + extra;
  }
  return true;
}

template <typename F>
void AppendFloat(F v, std::string* out) {
  if (std::isnan(v)) {
    out->append("\"NaN\"");
  } else if (std::isinf(v)) {
    out->append(v > 0 ? "\"Infinity\"" : "\"-Infinity\"");
  } else {
    char buf[64];
    auto r = std::to_chars(buf, buf + sizeof(buf), v);
    out->append(buf, r.ptr);
  }
}

class JsonDecoder {
 public:
  JsonDecoder(std::span<const uint8_t> data, std::string* out)
      : in_(data), out_(out) {}

  absl::Status Message(const MessageSpec& spec, const std::string& path) {
    out_->push_back('{');
    bool first = true;
    for (const Field& f : spec.fields) {
      if (!first) out_->push_back(',');
      first = false;
      AppendJsonString(f.name, out_);
      out_->push_back(':');
      const std::string field_path =
          path.empty() ? f.name : absl::StrCat(path, ".", f.name);
      if (absl::Status s = FieldValue(f, field_path); !s.ok()) return s;
    }
    out_->push_back('}');
    return absl::OkStatus();
  }

  size_t remaining() const { return in_.remaining(); }
  size_t offset() const { return in_.offset(); }

 private:
  absl::Status Truncated(const std::string& path) {
    return absl::InvalidArgumentError(
        absl::StrCat("message is truncated or corrupt at field ", path,
                     " (byte offset ", in_.offset(), ")"));
  }

  absl::Status FieldValue(const Field& f, const std::string& path) {
    if (!f.is_array) return One(f, path);
    uint32_t n = 0;
    if (f.array_length >= 0) {
      n = static_cast<uint32_t>(f.array_length);
    } else {
      const size_t min = internal::MinSerializedSize(f);
      if (!in_.Length(&n, min) || (min == 0 && n > kMaxEmptyElements)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "array ", path, " claims ", n, " elements, more than the ",
            in_.remaining(), " bytes left can hold (byte offset ",
            in_.offset(), ")"));
      }
    }
    out_->push_back('[');
    for (uint32_t i = 0; i < n; ++i) {
      if (i > 0) out_->push_back(',');
      if (absl::Status s = One(f, path); !s.ok()) return s;
    }
    out_->push_back(']');
    return absl::OkStatus();
  }

  template <typename T>
  absl::Status Integer(const std::string& path) {
    T v;
    if (!in_.Scalar(&v)) return Truncated(path);
    absl::StrAppend(out_, static_cast<std::conditional_t<std::is_signed_v<T>,
                                                         int64_t, uint64_t>>(v));
    return absl::OkStatus();
  }

  absl::Status One(const Field& f, const std::string& path) {
    switch (f.type) {
      case Primitive::kBool: {
        uint8_t v;
        if (!in_.Scalar(&v)) return Truncated(path);
        out_->append(v != 0 ? "true" : "false");
        return absl::OkStatus();
      }
      case Primitive::kInt8: return Integer<int8_t>(path);
      case Primitive::kUInt8: return Integer<uint8_t>(path);
      case Primitive::kInt16: return Integer<int16_t>(path);
      case Primitive::kUInt16: return Integer<uint16_t>(path);
      case Primitive::kInt32: return Integer<int32_t>(path);
      case Primitive::kUInt32: return Integer<uint32_t>(path);
      case Primitive::kInt64: return Integer<int64_t>(path);
      case Primitive::kUInt64: return Integer<uint64_t>(path);
      case Primitive::kFloat32: {
        float v;
        if (!in_.Scalar(&v)) return Truncated(path);
        AppendFloat(v, out_);
        return absl::OkStatus();
      }
      case Primitive::kFloat64: {
        double v;
        if (!in_.Scalar(&v)) return Truncated(path);
        AppendFloat(v, out_);
        return absl::OkStatus();
      }
      case Primitive::kString: {
        uint32_t n;
        std::span<const uint8_t> bytes;
        if (!in_.Length(&n, 1) || !in_.Bytes(n, &bytes)) {
          return Truncated(path);
        }
        AppendJsonString(
            absl::string_view(reinterpret_cast<const char*>(bytes.data()),
                             bytes.size()),
            out_);
        return absl::OkStatus();
      }
      case Primitive::kTime:
      case Primitive::kDuration: {
        uint32_t secs, nsecs;
        if (!in_.Scalar(&secs) || !in_.Scalar(&nsecs)) return Truncated(path);
        if (f.type == Primitive::kTime) {
          absl::StrAppend(out_, "{\"secs\":", secs, ",\"nsecs\":", nsecs, "}");
        } else {
          absl::StrAppend(out_, "{\"secs\":", static_cast<int32_t>(secs),
                          ",\"nsecs\":", static_cast<int32_t>(nsecs), "}");
        }
        return absl::OkStatus();
      }
      case Primitive::kMessage:
        return Message(*f.message, path);
    }
    return absl::InternalError("unknown primitive");
  }

  WireReader in_;
  std::string* out_;
};

}  // namespace

void AppendJsonString(absl::string_view text, std::string* out) {
  const bool utf8 = ValidUtf8(text);
  out->push_back('"');
  for (char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20 || (c >= 0x80 && !utf8)) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

absl::StatusOr<std::string> MessageToJson(const MessageDefinition& definition,
                                          std::span<const uint8_t> data) {
  std::string out;
  JsonDecoder decoder(data, &out);
  if (absl::Status s = decoder.Message(definition.root(), ""); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        definition.root().full_name, ": ", s.message()));
  }
  if (decoder.remaining() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        definition.root().full_name, ": ", decoder.remaining(),
        " bytes left over after the message (", decoder.offset(),
        " bytes); the definition does not match the data"));
  }
  return out;
}

}  // namespace tether::ros1msg
