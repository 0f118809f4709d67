// transport: the Cap'n Proto schemas a process knows — compiled in, or loaded
// from a channel's metadata or a log — and their self-describing form, a
// CodeGeneratorRequest blob (what channels and MCAP logs carry, so tools can
// decode a channel without its compiled schema).
#ifndef TETHER_TRANSPORT_SCHEMA_REGISTRY_H_
#define TETHER_TRANSPORT_SCHEMA_REGISTRY_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "capnp/schema-loader.h"
#include "capnp/schema.h"
#include "transport/config.h"

namespace tether::transport {

// Not thread-safe to mutate; const lookups may run on any thread once
// registration is done. Setup only: everything here allocates.
class SchemaRegistry {
 public:
  SchemaRegistry() = default;
  // capnp::SchemaLoader's destructor is noexcept(false); ours is not, so a
  // registry can be a member of ordinary classes.
  ~SchemaRegistry() noexcept;
  SchemaRegistry(const SchemaRegistry&) = delete;
  SchemaRegistry& operator=(const SchemaRegistry&) = delete;

  // Registers the compiled-in struct T (and everything it refers to).
  template <typename T>
  void Register() {
    loader_.loadCompiledTypeAndDependencies<T>();
    AddRoot(capnp::typeId<T>());
  }

  // Registers `type` -- a struct of another loader, e.g. one parsed from a
  // schema file (transport/schema_file.h) -- and every struct and enum it
  // refers to, copying their nodes. Types already known keep their schema.
  void Register(capnp::StructSchema type);

  // Loads every node of a CodeGeneratorRequest blob (stream framed, as
  // CodeGeneratorRequestFor() makes it) and makes `root_type_id` a known
  // type. InvalidArgument if the blob is malformed or lacks that type.
  absl::Status AddCodeGeneratorRequest(std::span<const std::byte> request,
                                       uint64_t root_type_id);

  // A known struct by id or display name ("examples/demo.capnp:JointState").
  std::optional<capnp::StructSchema> Find(uint64_t type_id) const;
  std::optional<capnp::StructSchema> FindByName(const std::string& name) const;

  // Type display name for errors; "0x<hex id>" when unknown.
  std::string NameOf(uint64_t type_id) const;

  // The schema of `type_id` and every struct and enum it refers to, as a
  // stream-framed CodeGeneratorRequest (nodes only; no requested files).
  // NotFound if the type is not known. Deterministic for the same schemas.
  absl::StatusOr<std::vector<std::byte>> CodeGeneratorRequestFor(
      uint64_t type_id) const;

  // Names and ids of every registered root type, for config validation.
  KnownTypes known_types() const;

 private:
  void AddRoot(uint64_t id);

  capnp::SchemaLoader loader_;
  std::vector<uint64_t> roots_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_SCHEMA_REGISTRY_H_
