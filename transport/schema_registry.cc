#include "transport/schema_registry.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "capnp/message.h"
#include "capnp/schema.capnp.h"
#include "capnp/serialize.h"
#include "kj/exception.h"

namespace tether::transport {
namespace {

// Collects `type`'s node and those of every struct/enum it mentions.
void Collect(capnp::Type type, std::set<uint64_t>* seen,
             std::vector<capnp::Schema>* out) {
  while (type.isList()) type = type.asList().getElementType();
  if (type.isEnum()) {
    capnp::EnumSchema e = type.asEnum();
    if (seen->insert(e.getProto().getId()).second) out->push_back(e);
    return;
  }
  if (!type.isStruct()) return;
  capnp::StructSchema s = type.asStruct();
  if (!seen->insert(s.getProto().getId()).second) return;
  out->push_back(s);
  for (capnp::StructSchema::Field f : s.getFields()) Collect(f.getType(), seen, out);
}

// Bits a slot field of `type` takes in the data section (0: a pointer or
// void).
uint64_t DataBits(capnp::schema::Type::Reader type) {
  using T = capnp::schema::Type;
  switch (type.which()) {
    case T::BOOL: return 1;
    case T::INT8: case T::UINT8: return 8;
    case T::INT16: case T::UINT16: case T::ENUM: return 16;
    case T::INT32: case T::UINT32: case T::FLOAT32: return 32;
    case T::INT64: case T::UINT64: case T::FLOAT64: return 64;
    default: return 0;
  }
}

bool IsPointer(capnp::schema::Type::Reader type) {
  using T = capnp::schema::Type;
  switch (type.which()) {
    case T::TEXT: case T::DATA: case T::LIST: case T::STRUCT:
    case T::INTERFACE: case T::ANY_POINTER: return true;
    default: return false;
  }
}

bool KnownBrand(capnp::schema::Brand::Reader brand, int depth);

// Whether every kind in `type` is one this Cap'n Proto knows: its
// StructSchema::Field::getType() aborts on others (KJ_UNREACHABLE) that
// the loader let through ("unknown types are allowed").
bool KnownType(capnp::schema::Type::Reader type, int depth = 0) {
  using T = capnp::schema::Type;
  if (depth > 64) return false;
  switch (type.which()) {
    case T::VOID: case T::BOOL: case T::INT8: case T::INT16: case T::INT32:
    case T::INT64: case T::UINT8: case T::UINT16: case T::UINT32:
    case T::UINT64: case T::FLOAT32: case T::FLOAT64: case T::TEXT:
    case T::DATA:
      return true;
    case T::LIST:
      return KnownType(type.getList().getElementType(), depth + 1);
    case T::ENUM:
      return KnownBrand(type.getEnum().getBrand(), depth + 1);
    case T::STRUCT:
      return KnownBrand(type.getStruct().getBrand(), depth + 1);
    case T::INTERFACE:
      return KnownBrand(type.getInterface().getBrand(), depth + 1);
    case T::ANY_POINTER: {
      auto a = type.getAnyPointer();
      switch (a.which()) {
        case T::AnyPointer::UNCONSTRAINED:
          return a.getUnconstrained().which() <=
                 T::AnyPointer::Unconstrained::CAPABILITY;
        case T::AnyPointer::PARAMETER:
        case T::AnyPointer::IMPLICIT_METHOD_PARAMETER:
          return true;
      }
      return false;
    }
  }
  return false;
}

bool KnownBrand(capnp::schema::Brand::Reader brand, int depth) {
  using B = capnp::schema::Brand;
  for (auto scope : brand.getScopes()) {
    if (scope.which() == B::Scope::INHERIT) continue;
    if (scope.which() != B::Scope::BIND) return false;
    for (auto binding : scope.getBind()) {
      if (binding.which() == B::Binding::UNBOUND) continue;
      if (binding.which() != B::Binding::TYPE ||
          !KnownType(binding.getType(), depth + 1)) {
        return false;
      }
    }
  }
  return true;
}

// Checks what Cap'n Proto 0.9.2's SchemaLoader gets wrong on hostile
// nodes (fixed in later releases, not in Debian's): a name it cannot read
// inside its KJ_CONTEXT recurses until the stack overflows; slot offsets
// are checked in 32-bit arithmetic that overflows (a DynamicStruct builder
// then writes out of bounds); more non-union fields than the count leaves
// room for overrun its member table; a field or type of an unknown kind
// passes it, then aborts the first reader. Names are read here (a bad pointer
// throws, caught by the caller); the rest is an error message.
std::string CheckUntrustedNode(capnp::schema::Node::Reader node) {
  (void)node.getDisplayName();
  if (node.isEnum()) {
    for (auto e : node.getEnum().getEnumerants()) (void)e.getName();
  } else if (node.isInterface()) {
    for (auto m : node.getInterface().getMethods()) (void)m.getName();
  }
  if (!node.isStruct()) return "";
  auto st = node.getStruct();
  const uint64_t data_bits = uint64_t{st.getDataWordCount()} * 64;
  const uint64_t pointers = st.getPointerCount();
  uint64_t in_union = 0;
  for (auto f : st.getFields()) {
    (void)f.getName();
    if (f.getDiscriminantValue() != capnp::schema::Field::NO_DISCRIMINANT) {
      ++in_union;
    }
    if (f.isGroup()) continue;
    if (!f.isSlot() || !KnownType(f.getSlot().getType())) {
      return absl::StrCat("field ", f.getName().cStr(), " of ",
                          node.getDisplayName().cStr(),
                          " is of a kind this Cap'n Proto does not know");
    }
    auto slot = f.getSlot();
    const uint64_t end = uint64_t{slot.getOffset()} + 1;
    if (DataBits(slot.getType()) * end > data_bits ||
        (IsPointer(slot.getType()) && end > pointers)) {
      return absl::StrCat("field ", f.getName().cStr(), " of ",
                          node.getDisplayName().cStr(),
                          " lies outside its struct (offset ",
                          slot.getOffset(), ")");
    }
  }
  if (in_union != st.getDiscriminantCount()) {
    return absl::StrCat(node.getDisplayName().cStr(), " has ", in_union,
                        " union fields but says ", st.getDiscriminantCount());
  }
  return "";
}

}  // namespace

SchemaRegistry::~SchemaRegistry() noexcept = default;

void SchemaRegistry::AddRoot(uint64_t id) {
  if (std::find(roots_.begin(), roots_.end(), id) == roots_.end()) {
    roots_.push_back(id);
  }
}

void SchemaRegistry::Register(capnp::StructSchema type) {
  std::set<uint64_t> seen;
  std::vector<capnp::Schema> nodes;
  Collect(capnp::Type(type), &seen, &nodes);
  for (const capnp::Schema& node : nodes) loader_.loadOnce(node.getProto());
  AddRoot(type.getProto().getId());
}

absl::Status SchemaRegistry::AddCodeGeneratorRequest(
    std::span<const std::byte> request, uint64_t root_type_id) {
  if (request.size() % sizeof(capnp::word) != 0 ||
      reinterpret_cast<uintptr_t>(request.data()) % alignof(capnp::word) != 0) {
    return absl::InvalidArgumentError(
        "schema blob is not a whole number of aligned 8-byte words");
  }
  try {
    // A traversal budget in proportion to the blob: lists of empty structs
    // cost Cap'n Proto one word each, so a few hundred bytes could
    // otherwise make checking and loading walk millions of "fields".
    capnp::ReaderOptions options;
    options.traversalLimitInWords = 8 * (request.size() / 8) + 4096;
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(reinterpret_cast<const capnp::word*>(request.data()),
                     request.size() / sizeof(capnp::word)),
        options);
    auto req = reader.getRoot<capnp::schema::CodeGeneratorRequest>();
    // Every node is checked before any is loaded (the loader keeps what it
    // loaded).
    for (capnp::schema::Node::Reader node : req.getNodes()) {
      if (std::string bad = CheckUntrustedNode(node); !bad.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("schema blob is not a valid CodeGeneratorRequest: ",
                         bad));
      }
    }
    for (capnp::schema::Node::Reader node : req.getNodes()) {
      loader_.loadOnce(node);
    }
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schema blob is not a valid CodeGeneratorRequest: ",
        e.getDescription().cStr()));
  }
  if (!Find(root_type_id).has_value()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "schema blob does not describe struct type 0x%016x", root_type_id));
  }
  AddRoot(root_type_id);
  return absl::OkStatus();
}

std::optional<capnp::StructSchema> SchemaRegistry::Find(uint64_t type_id) const {
  KJ_IF_MAYBE(schema, loader_.tryGet(type_id)) {
    if (schema->getProto().isStruct()) return schema->asStruct();
  }
  return std::nullopt;
}

std::optional<capnp::StructSchema> SchemaRegistry::FindByName(
    const std::string& name) const {
  for (capnp::Schema s : loader_.getAllLoaded()) {
    if (s.getProto().isStruct() && name == s.getProto().getDisplayName().cStr()) {
      return s.asStruct();
    }
  }
  return std::nullopt;
}

std::string SchemaRegistry::NameOf(uint64_t type_id) const {
  if (auto s = Find(type_id)) return s->getProto().getDisplayName().cStr();
  return absl::StrFormat("0x%016x", type_id);
}

absl::StatusOr<std::vector<std::byte>> SchemaRegistry::CodeGeneratorRequestFor(
    uint64_t type_id) const {
  std::optional<capnp::StructSchema> root = Find(type_id);
  if (!root.has_value()) {
    return absl::NotFoundError(absl::StrFormat(
        "no schema for type 0x%016x: register it (SchemaRegistry::Register<T>)",
        type_id));
  }
  std::set<uint64_t> seen;
  std::vector<capnp::Schema> nodes;
  Collect(capnp::Type(*root), &seen, &nodes);
  // Deterministic order: the root first, then by id.
  std::sort(nodes.begin() + 1, nodes.end(),
            [](capnp::Schema a, capnp::Schema b) {
              return a.getProto().getId() < b.getProto().getId();
            });
  capnp::MallocMessageBuilder message;
  auto req = message.initRoot<capnp::schema::CodeGeneratorRequest>();
  auto list = req.initNodes(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    list.setWithCaveats(i, nodes[i].getProto());
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  std::vector<std::byte> out(flat.size() * sizeof(capnp::word));
  std::memcpy(out.data(), flat.begin(), out.size());
  return out;
}

KnownTypes SchemaRegistry::known_types() const {
  KnownTypes types;
  for (uint64_t id : roots_) {
    types.ids.insert(id);
    types.names.insert(NameOf(id));
  }
  return types;
}

}  // namespace tether::transport
