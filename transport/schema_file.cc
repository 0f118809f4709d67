#include "transport/schema_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "capnp/message.h"
#include "capnp/schema-parser.h"
#include "capnp/schema.capnp.h"
#include "capnp/serialize.h"
#include "kj/exception.h"
#include "kj/filesystem.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;

// Larger files are refused: no schema is this big.
constexpr uintmax_t kMaxSchemaFileBytes = uintmax_t{64} << 20;

// Searched after SchemaFileOptions::import_path, as `capnp compile` does.
constexpr const char* kSystemImportPath[] = {"/usr/local/include",
                                             "/usr/include"};

fs::path Normal(const fs::path& path) {
  std::error_code ec;
  fs::path absolute = fs::absolute(path, ec);
  if (ec) absolute = path;
  absolute = absolute.lexically_normal();
  if (absolute.has_parent_path() && absolute.filename().empty()) {
    absolute = absolute.parent_path();  // "/a/b/" -> "/a/b"
  }
  return absolute;
}

// An absolute path as a kj::Path from the filesystem root.
kj::Path KjPath(const fs::path& absolute) {
  const std::string relative = absolute.relative_path().string();
  return relative.empty() ? kj::Path(nullptr)
                          : kj::Path::parse(kj::StringPtr(relative.c_str()));
}

// True, with `*below` set, if `path` lies below the directory `dir`.
bool Below(const fs::path& path, const fs::path& dir, fs::path* below) {
  const fs::path relative = path.lexically_relative(dir);
  if (relative.empty() || *relative.begin() == "..") return false;
  *below = relative;
  return true;
}

absl::Status CannotRead(const fs::path& file) {
  return absl::NotFoundError(
      absl::StrCat("schema file ", file.string(),
                   ": cannot read it: ", std::strerror(errno)));
}

// The structs a parsed file declares, nested ones included, in order.
void CollectDeclared(const capnp::ParsedSchema& schema,
                     std::vector<capnp::StructSchema>* out) {
  const capnp::schema::Node::Reader node = schema.getProto();
  if (node.isStruct() && !node.getStruct().getIsGroup() &&
      !node.getIsGeneric()) {
    out->push_back(schema.asStruct());
  }
  for (const capnp::ParsedSchema nested : schema.getAllNested()) {
    CollectDeclared(nested, out);
  }
}

absl::StatusOr<std::vector<std::string>> AddCapnpSource(
    const fs::path& file, const SchemaFileOptions& options,
    SchemaRegistry* registry) {
  if (!std::ifstream(file)) return CannotRead(file);
  std::vector<std::string> names;
  try {
    const kj::Own<kj::Filesystem> disk = kj::newDiskFilesystem();
    const kj::ReadableDirectory& root = disk->getRoot();
    // The import directories that exist, kept open for the parse; the file
    // is opened through the first one containing it, so an import of the
    // same file from another schema is recognised as the same file.
    std::vector<fs::path> dir_paths;
    std::vector<kj::Own<const kj::ReadableDirectory>> dirs;
    auto open = [&](const fs::path& dir) {
      const fs::path normal = Normal(dir);
      KJ_IF_MAYBE (opened, root.tryOpenSubdir(KjPath(normal))) {
        dir_paths.push_back(normal);
        dirs.push_back(kj::mv(*opened));
      }
    };
    for (const fs::path& dir : options.import_path) open(dir);
    for (const char* dir : kSystemImportPath) open(dir);
    std::vector<const kj::ReadableDirectory*> import_path;
    for (const auto& dir : dirs) import_path.push_back(dir.get());

    const kj::ReadableDirectory* base = nullptr;
    kj::Path path(nullptr);
    kj::Own<const kj::ReadableDirectory> own_base;
    for (size_t i = 0; i < dirs.size(); ++i) {
      fs::path below;
      if (Below(file, dir_paths[i], &below)) {
        base = dirs[i].get();
        path = KjPath(fs::path("/") / below);
        break;
      }
    }
    if (base == nullptr) {
      own_base = root.openSubdir(KjPath(file.parent_path()));
      base = own_base.get();
      path = kj::Path(kj::heapString(file.filename().string().c_str()));
    }
    capnp::SchemaParser parser;
    const capnp::ParsedSchema parsed = parser.parseFromDirectory(
        *base, kj::mv(path),
        kj::arrayPtr(import_path.data(), import_path.size()));
    std::vector<capnp::StructSchema> declared;
    CollectDeclared(parsed, &declared);
    for (const capnp::StructSchema& type : declared) {
      registry->Register(type);
      names.push_back(registry->NameOf(type.getProto().getId()));
    }
  } catch (const kj::Exception& e) {
    // Compiler errors carry the schema's display path and a 0-based line;
    // others (I/O) the KJ source location, which is of no use here.
    const std::string where =
        absl::EndsWith(e.getFile(), ".capnp")
            ? absl::StrCat(e.getFile(), ":", e.getLine() + 1, ": ")
            : "";
    return absl::InvalidArgumentError(absl::StrCat(
        "schema file ", file.string(), ": ", where, e.getDescription().cStr()));
  }
  return names;
}

absl::StatusOr<std::vector<std::string>> AddCodeGeneratorRequestFile(
    const fs::path& file, SchemaRegistry* registry) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return CannotRead(file);
  const std::string bytes((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  const std::string not_a_request = absl::StrCat(
      "schema file ", file.string(),
      " is not a CodeGeneratorRequest (name the .capnp file itself, or make "
      "one with `capnp compile -o- x.capnp > x.schema`)");
  if (bytes.empty() || bytes.size() % sizeof(capnp::word) != 0) {
    return absl::InvalidArgumentError(not_a_request);
  }
  std::vector<capnp::word> words(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.data(), bytes.data(), bytes.size());
  const std::span<const std::byte> blob(
      reinterpret_cast<const std::byte*>(words.data()), bytes.size());
  std::vector<uint64_t> structs;
  try {
    capnp::ReaderOptions reader_options;
    reader_options.traversalLimitInWords = 64 * 1024 * 1024;
    capnp::FlatArrayMessageReader reader(
        kj::arrayPtr(words.data(), words.size()), reader_options);
    auto request = reader.getRoot<capnp::schema::CodeGeneratorRequest>();
    for (capnp::schema::Node::Reader node : request.getNodes()) {
      if (node.isStruct() && !node.getStruct().getIsGroup() &&
          !node.getIsGeneric()) {
        structs.push_back(node.getId());
      }
    }
  } catch (const kj::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(not_a_request, ": ", e.getDescription().cStr()));
  }
  std::vector<std::string> names;
  for (uint64_t id : structs) {
    if (absl::Status s = registry->AddCodeGeneratorRequest(blob, id); !s.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("schema file ", file.string(), ": ", s.message()));
    }
    names.push_back(registry->NameOf(id));
  }
  return names;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> AddSchemaFile(
    const fs::path& file, const SchemaFileOptions& options,
    SchemaRegistry* registry) {
  const fs::path path = Normal(file);
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_regular_file(path, ec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "schema file ", path.string(),
        fs::is_directory(path, ec) ? " is a directory" : " is not a file",
        "; name a .capnp file (or a compiled CodeGeneratorRequest)"));
  }
  if (fs::file_size(path, ec) > kMaxSchemaFileBytes && !ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("schema file ", path.string(), " is larger than ",
                     kMaxSchemaFileBytes >> 20, " MiB: not a schema"));
  }
  if (path.extension() == ".capnp") {
    return AddCapnpSource(path, options, registry);
  }
  return AddCodeGeneratorRequestFile(path, registry);
}

absl::Status AddStackSchemaFiles(const std::vector<StackSchemaFile>& files,
                                 const SchemaFileOptions& options,
                                 SchemaRegistry* registry) {
  for (const StackSchemaFile& file : files) {
    absl::StatusOr<std::vector<std::string>> added =
        AddSchemaFile(file.path, options, registry);
    if (!added.ok()) {
      return absl::Status(
          added.status().code(),
          absl::StrCat(file.origin, ": ", added.status().message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace tether::transport
