// transport: message types from schema files, for a process that has no
// compiled-in code for them (the launcher creating a stack's channels, a
// node opening channels of types it does not link). A file is either a
// Cap'n Proto source (.capnp), parsed with Cap'n Proto's own compiler
// (capnp::SchemaParser, libcapnpc), or a compiled CodeGeneratorRequest
// (`capnp compile -o- x.capnp > x.schema`). Either way its structs become
// types of a SchemaRegistry, whose CodeGeneratorRequestFor() then gives the
// same bytes a compiled-in registration of the type gives (so a channel
// created from a parsed schema opens with the compiled one, and back;
// tests/transport/schema_file_test.cc checks it).
#ifndef TETHER_TRANSPORT_SCHEMA_FILE_H_
#define TETHER_TRANSPORT_SCHEMA_FILE_H_

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "transport/config.h"
#include "transport/schema_registry.h"

namespace tether::transport {

struct SchemaFileOptions {
  // Where a .capnp file's absolute imports (import "/pkg/x.capnp") are
  // looked up, in order, before /usr/local/include and /usr/include (Cap'n
  // Proto's own schemas). Also what its type names are relative to: a file
  // lying below import_path[i] (the first such i; paths compared as
  // written, symlinks not resolved) is named by its path below it, as
  // `capnp compile -I<dir>` run in <dir> names it (capnp_cc_library runs in
  // the workspace root, hence "examples/demo.capnp:JointState"). A file
  // below none of them is named by its file name alone. Relative
  // directories are taken against the current directory.
  std::vector<std::filesystem::path> import_path;
};

// Adds every struct type that `file` declares (nested ones too; not generic
// ones or groups) to `registry`, with every type those refer to. A file
// whose name ends in ".capnp" is parsed; any other file is read as a
// stream-framed CodeGeneratorRequest (all its structs, of every file in it,
// are added). Types the registry knows already keep their schema. Returns
// the display names of the struct types the file declares.
// Errors: NotFound when the file cannot be read; InvalidArgument for a
// schema that does not parse ("file:line: what", from the compiler) or a
// file that is not a CodeGeneratorRequest, naming the file and how to make
// one. Setup only; reads files; allocates. Not thread-safe for `registry`.
absl::StatusOr<std::vector<std::string>> AddSchemaFile(
    const std::filesystem::path& file, const SchemaFileOptions& options,
    SchemaRegistry* registry);

// AddSchemaFile() for each file a stack names (ListStackSchemaFiles()),
// stopping at the first error, which starts with the entry's origin
// ("stack.json:3: schemas[0]: ..."). Same threading as AddSchemaFile().
absl::Status AddStackSchemaFiles(const std::vector<StackSchemaFile>& files,
                                 const SchemaFileOptions& options,
                                 SchemaRegistry* registry);

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_SCHEMA_FILE_H_
