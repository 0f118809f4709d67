// transport: loads a stack configuration (JSON decoded into config.capnp
// structs, with includes merged) and validates it. The parts: this loader
// (files, includes, placing problems at file:line), json_check.h (the strict
// JSON-against-schema check), config_validate.h (the semantic rules), and
// queue_shape.h (each channel's shm::QueueParams).
#ifndef TETHER_TRANSPORT_CONFIG_H_
#define TETHER_TRANSPORT_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "capnp/message.h"
#include "shm/queue_params.h"
#include "transport/config.capnp.h"
#include "transport/queue_shape.h"

namespace tether::transport {

// Message types a stack may name. Filled by the caller (later: from the
// schema registry); a channel's `type` must be one of `names` (struct display
// names such as "examples/demo.capnp:JointState") or, written as "0x..." hex,
// one of `ids`.
struct KnownTypes {
  absl::flat_hash_set<std::string> names;
  absl::flat_hash_set<uint64_t> ids;
};

// Where a channel or node was declared.
struct ConfigOrigin {
  std::string file;    // as resolved from the top file and include paths
  uint32_t index = 0;  // position in that file's `channels` / `nodes`
};

// A loaded, validated stack: includes merged (the `includes` list of the
// result is empty; its `schemas` lists every file's schema files as absolute
// paths, see ListStackSchemaFiles), every channel's queueDepth resolved (a
// power of two, also when the file gave historySeconds), plus the warnings
// found. Immutable; readers may be used from any thread. Movable, not
// copyable.
class StackConfig {
 public:
  StackConfig(StackConfig&&) noexcept;
  StackConfig& operator=(StackConfig&&) noexcept;
  ~StackConfig();

  config::Stack::Reader stack() const;
  capnp::List<config::Channel>::Reader channels() const {
    return stack().getChannels();
  }
  capnp::List<config::Node>::Reader nodes() const { return stack().getNodes(); }
  // Where channels()[i] / nodes()[i] was declared.
  const ConfigOrigin& channel_origin(size_t i) const {
    return channel_origins_.at(i);
  }
  const ConfigOrigin& node_origin(size_t i) const {
    return node_origins_.at(i);
  }
  // Problems that do not stop the stack from running (e.g. a node reads a
  // channel no node writes), each "file:line: path: what".
  const std::vector<std::string>& warnings() const { return warnings_; }

  // Linear lookups by name. Do not allocate.
  std::optional<config::Channel::Reader> FindChannel(
      std::string_view name) const;
  std::optional<config::Node::Reader> FindNode(std::string_view name) const;

 private:
  friend class StackConfigLoader;
  StackConfig();

  std::unique_ptr<capnp::MallocMessageBuilder> message_;
  std::vector<ConfigOrigin> channel_origins_;
  std::vector<ConfigOrigin> node_origins_;
  std::vector<std::string> warnings_;
};

// One problem found in a stack config, as data (the Status message has the
// same lines as text). Programs that add hints use `kind`, never the text.
struct ConfigProblem {
  enum class Kind {
    kInvalid,      // a field's value or the stack's structure is wrong
    kSyntax,       // the file is not JSON, or cannot be read
    kUnknownType,  // a channel names a message type the caller does not know
    kWarning,      // not an error: the stack runs (e.g. a channel no node
                   // writes)
  };
  Kind kind = Kind::kInvalid;
  std::string file;   // as displayed; empty when not in a file
  int line = 0;       // 0 when unknown
  std::string field;  // field path, e.g. "channels[2].queueDepth"; may be ""
  std::string message;
  // "file:line: field: message".
  std::string ToString() const;
};

// Reads the stack file at `path` and the files it includes (recursively;
// paths relative to the including file; a file included twice is read once),
// checks every field against config.capnp (unknown or mistyped fields are
// errors, unlike capnp::JsonCodec's default) and validates the merged stack.
//
// Errors: NotFound if `path` cannot be read; otherwise InvalidArgument whose
// message lists every problem found (up to 25), one per line, each as
// "file:line: field.path: what is wrong; what would be valid", e.g.
//   stack.json:12: channels[2].queueDepth: 100 is not a power of two; use 128
// When `problems` is given it receives every error (and warning) as data.
// Setup only: reads files, allocates, not RT-safe. Thread-safe (no shared
// state).
absl::StatusOr<StackConfig> LoadStackConfig(
    const std::filesystem::path& path, const KnownTypes& types,
    std::vector<ConfigProblem>* problems = nullptr);

// A schema file a stack names (an entry of a file's `schemas`).
struct StackSchemaFile {
  std::filesystem::path path;  // absolute, lexically normal (no symlinks
                               // resolved), relative to the file naming it
  std::string origin;          // "file:line: schemas[i]", for messages
};

// The schema files the stack at `path` and its includes name, included
// files' first, each once, without validating anything else: a caller reads
// them (transport/schema_file.h) to learn the stack's message types before
// LoadStackConfig() checks channel types against them. Errors are those of
// LoadStackConfig() for files that cannot be read or parsed (NotFound,
// InvalidArgument); a stack with other problems lists its schema files and
// LoadStackConfig() reports the problems. Setup only; reads files;
// allocates. Thread-safe.
absl::StatusOr<std::vector<StackSchemaFile>> ListStackSchemaFiles(
    const std::filesystem::path& path);

// The same for a stack given as JSON text (built in code, or from a test, a
// log or a bridge): `name` is what errors call it (e.g. "<replay stack>"),
// and includes are resolved relative to `include_dir` (the working
// directory when empty). Same errors and threading as LoadStackConfig().
absl::StatusOr<StackConfig> ParseStackConfig(
    std::string_view json, const std::string& name, const KnownTypes& types,
    const std::filesystem::path& include_dir = {},
    std::vector<ConfigProblem>* problems = nullptr);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_CONFIG_H_
