#include "ros_bridge/ros1msg/typed.h"

#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "kj/exception.h"
#include "ros_bridge/ros1msg/common_types.h"
#include "ros_bridge/ros1msg/envelope.capnp.h"
#include "ros_bridge/ros1msg/geometry_msgs.capnp.h"
#include "ros_bridge/ros1msg/sensor_msgs.capnp.h"
#include "ros_bridge/ros1msg/std_msgs.capnp.h"
#include "ros_bridge/ros1msg/wire.h"

namespace tether::ros1msg {
namespace {

using internal::WireReader;
using internal::WireWriter;

struct Table {
  std::vector<CommonType> types;
  std::vector<std::unique_ptr<MessageDefinition>> parsed;
};

const Table& GetTable() {
  static const Table* table = [] {
    auto* t = new Table();
    for (const internal::CommonTypeText& c : internal::CommonTypeTexts()) {
      absl::StatusOr<std::unique_ptr<MessageDefinition>> d =
          MessageDefinition::Parse(c.ros_type, c.definition);
      // The table is ours: a definition that does not parse is a bug.
      if (!d.ok()) {
        std::fprintf(stderr, "ros1msg: built-in definition of %s: %s\n",
                     c.ros_type, std::string(d.status().message()).c_str());
        std::abort();
      }
      t->types.push_back(
          {c.ros_type, c.md5sum, c.definition, c.schema, d->get()});
      t->parsed.push_back(std::move(*d));
    }
    return t;
  }();
  return *table;
}

absl::Status FieldError(const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("field ", path, ": ", why));
}

// Looks up the Cap'n Proto field of ROS field `f`.
absl::StatusOr<capnp::StructSchema::Field> TwinField(
    capnp::StructSchema schema, const Field& f, const std::string& path) {
  KJ_IF_MAYBE(field, schema.findFieldByName(CamelCase(f.name))) {
    return *field;
  }
  return FieldError(path, absl::StrCat(
                              "the Cap'n Proto type ",
                              schema.getProto().getDisplayName().cStr(),
                              " has no field ", CamelCase(f.name)));
}

bool IsBytes(const Field& f) {
  return f.is_array && f.type == Primitive::kUInt8;
}

// --- ROS -> Cap'n Proto --------------------------------------------------

class Decoder {
 public:
  explicit Decoder(std::span<const uint8_t> data) : in_(data) {}

  absl::Status Struct(const MessageSpec& spec,
                      capnp::DynamicStruct::Builder out,
                      const std::string& path) {
    for (const Field& f : spec.fields) {
      const std::string p = path.empty() ? f.name : absl::StrCat(path, ".", f.name);
      absl::StatusOr<capnp::StructSchema::Field> twin =
          TwinField(out.getSchema(), f, p);
      if (!twin.ok()) return twin.status();
      if (absl::Status s = FieldValue(f, *twin, out, p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  size_t remaining() const { return in_.remaining(); }

 private:
  absl::Status Truncated(const std::string& path) {
    return FieldError(path, absl::StrCat("message truncated or corrupt (byte ",
                                         in_.offset(), ")"));
  }

  absl::Status FieldValue(const Field& f, capnp::StructSchema::Field twin,
                          capnp::DynamicStruct::Builder out,
                          const std::string& path) {
    if (!f.is_array) {
      if (f.type == Primitive::kMessage || f.type == Primitive::kTime ||
          f.type == Primitive::kDuration) {
        return Nested(f, out.init(twin).as<capnp::DynamicStruct>(), path);
      }
      absl::StatusOr<capnp::DynamicValue::Reader> v = Scalar(f, path);
      if (!v.ok()) return v.status();
      out.set(twin, *v);
      return absl::OkStatus();
    }
    uint32_t n = 0;
    if (f.array_length >= 0) {
      n = static_cast<uint32_t>(f.array_length);
    } else if (!in_.Length(&n, internal::MinSerializedSize(f))) {
      return Truncated(path);
    }
    if (IsBytes(f)) {
      std::span<const uint8_t> bytes;
      if (!in_.Bytes(n, &bytes)) return Truncated(path);
      capnp::Data::Builder data = out.init(twin, n).as<capnp::Data>();
      if (n > 0) std::memcpy(data.begin(), bytes.data(), n);
      return absl::OkStatus();
    }
    capnp::DynamicList::Builder list = out.init(twin, n).as<capnp::DynamicList>();
    for (uint32_t i = 0; i < n; ++i) {
      if (f.type == Primitive::kMessage || f.type == Primitive::kTime ||
          f.type == Primitive::kDuration) {
        if (absl::Status s =
                Nested(f, list[i].as<capnp::DynamicStruct>(), path);
            !s.ok()) {
          return s;
        }
        continue;
      }
      absl::StatusOr<capnp::DynamicValue::Reader> v = Scalar(f, path);
      if (!v.ok()) return v.status();
      list.set(i, *v);
    }
    return absl::OkStatus();
  }

  absl::Status Nested(const Field& f, capnp::DynamicStruct::Builder out,
                      const std::string& path) {
    if (f.type == Primitive::kMessage) return Struct(*f.message, out, path);
    uint32_t a, b;
    if (!in_.Scalar(&a) || !in_.Scalar(&b)) return Truncated(path);
    if (f.type == Primitive::kTime) {
      out.set("sec", a);
      out.set("nsec", b);
    } else {
      out.set("sec", static_cast<int32_t>(a));
      out.set("nsec", static_cast<int32_t>(b));
    }
    return absl::OkStatus();
  }

  template <typename T>
  absl::StatusOr<capnp::DynamicValue::Reader> Read(const std::string& path) {
    T v;
    if (!in_.Scalar(&v)) return Truncated(path);
    return capnp::DynamicValue::Reader(v);
  }

  absl::StatusOr<capnp::DynamicValue::Reader> Scalar(const Field& f,
                                                     const std::string& path) {
    switch (f.type) {
      case Primitive::kBool: {
        uint8_t v;
        if (!in_.Scalar(&v)) return Truncated(path);
        return capnp::DynamicValue::Reader(v != 0);
      }
      case Primitive::kInt8: return Read<int8_t>(path);
      case Primitive::kUInt8: return Read<uint8_t>(path);
      case Primitive::kInt16: return Read<int16_t>(path);
      case Primitive::kUInt16: return Read<uint16_t>(path);
      case Primitive::kInt32: return Read<int32_t>(path);
      case Primitive::kUInt32: return Read<uint32_t>(path);
      case Primitive::kInt64: return Read<int64_t>(path);
      case Primitive::kUInt64: return Read<uint64_t>(path);
      case Primitive::kFloat32: return Read<float>(path);
      case Primitive::kFloat64: return Read<double>(path);
      case Primitive::kString: {
        uint32_t n;
        std::span<const uint8_t> bytes;
        if (!in_.Length(&n, 1) || !in_.Bytes(n, &bytes)) return Truncated(path);
        // Text needs a NUL after the bytes; kept in text_ until set().
        text_.assign(reinterpret_cast<const char*>(bytes.data()), n);
        return capnp::DynamicValue::Reader(
            capnp::Text::Reader(text_.data(), text_.size()));
      }
      default:
        return FieldError(path, "not a scalar");
    }
  }

  WireReader in_;
  std::string text_;
};

// --- Cap'n Proto -> ROS --------------------------------------------------

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>* out) : out_(out) {}

  absl::Status Struct(const MessageSpec& spec, capnp::DynamicStruct::Reader in,
                      const std::string& path) {
    for (const Field& f : spec.fields) {
      const std::string p = path.empty() ? f.name : absl::StrCat(path, ".", f.name);
      absl::StatusOr<capnp::StructSchema::Field> twin =
          TwinField(in.getSchema(), f, p);
      if (!twin.ok()) return twin.status();
      if (absl::Status s = FieldValue(f, in.get(*twin), p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  absl::Status FieldValue(const Field& f, capnp::DynamicValue::Reader v,
                          const std::string& path) {
    if (!f.is_array) return One(f, v, path);
    uint32_t n = 0;
    if (IsBytes(f)) {
      capnp::Data::Reader data = v.as<capnp::Data>();
      n = static_cast<uint32_t>(data.size());
      if (absl::Status s = Count(f, n, path); !s.ok()) return s;
      out_.Bytes(data.begin(), n);
      return absl::OkStatus();
    }
    capnp::DynamicList::Reader list = v.as<capnp::DynamicList>();
    n = list.size();
    if (absl::Status s = Count(f, n, path); !s.ok()) return s;
    for (uint32_t i = 0; i < n; ++i) {
      if (absl::Status s = One(f, list[i], path); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::Status Count(const Field& f, uint32_t n, const std::string& path) {
    if (f.array_length < 0) {
      out_.Scalar<uint32_t>(n);
      return absl::OkStatus();
    }
    if (n != static_cast<uint64_t>(f.array_length)) {
      return FieldError(path, absl::StrCat("ROS type ", f.type_text, " needs ",
                                           f.array_length, " entries, got ", n));
    }
    return absl::OkStatus();
  }

  absl::Status One(const Field& f, capnp::DynamicValue::Reader v,
                   const std::string& path) {
    switch (f.type) {
      case Primitive::kBool: out_.Scalar<uint8_t>(v.as<bool>() ? 1 : 0); break;
      case Primitive::kInt8: out_.Scalar(v.as<int8_t>()); break;
      case Primitive::kUInt8: out_.Scalar(v.as<uint8_t>()); break;
      case Primitive::kInt16: out_.Scalar(v.as<int16_t>()); break;
      case Primitive::kUInt16: out_.Scalar(v.as<uint16_t>()); break;
      case Primitive::kInt32: out_.Scalar(v.as<int32_t>()); break;
      case Primitive::kUInt32: out_.Scalar(v.as<uint32_t>()); break;
      case Primitive::kInt64: out_.Scalar(v.as<int64_t>()); break;
      case Primitive::kUInt64: out_.Scalar(v.as<uint64_t>()); break;
      case Primitive::kFloat32: out_.Scalar(v.as<float>()); break;
      case Primitive::kFloat64: out_.Scalar(v.as<double>()); break;
      case Primitive::kString: {
        capnp::Text::Reader t = v.as<capnp::Text>();
        out_.Scalar<uint32_t>(static_cast<uint32_t>(t.size()));
        out_.Bytes(t.begin(), t.size());
        break;
      }
      case Primitive::kTime: {
        capnp::DynamicStruct::Reader s = v.as<capnp::DynamicStruct>();
        out_.Scalar(s.get("sec").as<uint32_t>());
        out_.Scalar(s.get("nsec").as<uint32_t>());
        break;
      }
      case Primitive::kDuration: {
        capnp::DynamicStruct::Reader s = v.as<capnp::DynamicStruct>();
        out_.Scalar(s.get("sec").as<int32_t>());
        out_.Scalar(s.get("nsec").as<int32_t>());
        break;
      }
      case Primitive::kMessage:
        return Struct(*f.message, v.as<capnp::DynamicStruct>(), path);
    }
    return absl::OkStatus();
  }

  WireWriter out_;
};

}  // namespace

std::span<const CommonType> CommonTypes() { return GetTable().types; }

const CommonType* FindCommonType(absl::string_view ros_type) {
  for (const CommonType& t : CommonTypes()) {
    if (t.ros_type == ros_type) return &t;
  }
  return nullptr;
}

const CommonType* FindCommonTypeById(uint64_t capnp_type_id) {
  for (const CommonType& t : CommonTypes()) {
    if (t.schema.getProto().getId() == capnp_type_id) return &t;
  }
  return nullptr;
}

void RegisterRosSchemas(transport::SchemaRegistry* schemas) {
  schemas->Register<RosEnvelope>();
  schemas->Register<std_msgs::BoolMsg>();
  schemas->Register<std_msgs::Int8Msg>();
  schemas->Register<std_msgs::UInt8Msg>();
  schemas->Register<std_msgs::Int16Msg>();
  schemas->Register<std_msgs::UInt16Msg>();
  schemas->Register<std_msgs::Int32Msg>();
  schemas->Register<std_msgs::UInt32Msg>();
  schemas->Register<std_msgs::Int64Msg>();
  schemas->Register<std_msgs::UInt64Msg>();
  schemas->Register<std_msgs::Float32Msg>();
  schemas->Register<std_msgs::Float64Msg>();
  schemas->Register<std_msgs::String>();
  schemas->Register<std_msgs::Header>();
  schemas->Register<std_msgs::TimeMsg>();
  schemas->Register<std_msgs::DurationMsg>();
  schemas->Register<geometry_msgs::Vector3>();
  schemas->Register<geometry_msgs::Point>();
  schemas->Register<geometry_msgs::Quaternion>();
  schemas->Register<geometry_msgs::Pose>();
  schemas->Register<geometry_msgs::PoseStamped>();
  schemas->Register<geometry_msgs::Twist>();
  schemas->Register<geometry_msgs::TwistStamped>();
  schemas->Register<sensor_msgs::JointState>();
  schemas->Register<sensor_msgs::Imu>();
  schemas->Register<sensor_msgs::Image>();
}

absl::Status RosToCapnp(const MessageDefinition& definition,
                        std::span<const uint8_t> data,
                        capnp::DynamicStruct::Builder out) {
  try {
    Decoder decoder(data);
    if (absl::Status s = decoder.Struct(definition.root(), out, ""); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(definition.root().full_name, ": ", s.message()));
    }
    if (decoder.remaining() != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          definition.root().full_name, ": ", decoder.remaining(),
          " bytes left over after the message"));
    }
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(definition.root().full_name, " -> ",
                     out.getSchema().getProto().getDisplayName().cStr(), ": ",
                     e.getDescription().cStr()));
  }
  return absl::OkStatus();
}

absl::Status CapnpToRos(const MessageDefinition& definition,
                        capnp::DynamicStruct::Reader in,
                        std::vector<uint8_t>* out) {
  out->clear();
  try {
    Encoder encoder(out);
    if (absl::Status s = encoder.Struct(definition.root(), in, ""); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(definition.root().full_name, ": ", s.message()));
    }
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(in.getSchema().getProto().getDisplayName().cStr(), " -> ",
                     definition.root().full_name, ": ",
                     e.getDescription().cStr()));
  }
  return absl::OkStatus();
}

std::string CamelCase(absl::string_view ros_name) {
  std::string out;
  bool upper = false;
  for (char c : ros_name) {
    if (c == '_') {
      upper = !out.empty();
      continue;
    }
    out.push_back(upper ? absl::ascii_toupper(static_cast<unsigned char>(c)) : c);
    upper = false;
  }
  return out;
}

}  // namespace tether::ros1msg
