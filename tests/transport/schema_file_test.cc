// Schema files as a source of message types: a parsed .capnp file and a
// compiled CodeGeneratorRequest give, type for type, the same schema bytes
// as the compiled-in registration (so a channel created by a launcher that
// parsed the schema opens in a node that links the type, and back); type
// names are relative to the import directory; errors name the file, the
// line and the fix.
#include "transport/schema_file.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "examples/demo.capnp.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/shm/shm_test_util.h"
#include "tests/transport/framing_test.capnp.h"
#include "tests/util/test_dir.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/config.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsSupersetOf;

// The test runs in the runfiles root: the workspace root for the schemas.
SchemaFileOptions WorkspaceImports() {
  SchemaFileOptions options;
  options.import_path = {fs::current_path()};
  return options;
}

using ::tether::testing::WriteFile;

// Expects the parsed registry to describe T exactly as the compiled one.
template <typename T>
void ExpectSameAsCompiled(const SchemaRegistry& parsed) {
  SchemaRegistry compiled;
  compiled.Register<T>();
  const uint64_t id = capnp::typeId<T>();
  SCOPED_TRACE(compiled.NameOf(id));
  EXPECT_EQ(parsed.NameOf(id), compiled.NameOf(id));
  absl::StatusOr<std::vector<std::byte>> want =
      compiled.CodeGeneratorRequestFor(id);
  absl::StatusOr<std::vector<std::byte>> got =
      parsed.CodeGeneratorRequestFor(id);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == *want)
      << got->size() << " vs " << want->size() << " bytes";
}

TEST(SchemaFile, ParsedSchemasGiveTheBytesOfTheCompiledTypes) {
  SchemaRegistry parsed;
  absl::StatusOr<std::vector<std::string>> demo =
      AddSchemaFile("examples/demo.capnp", WorkspaceImports(), &parsed);
  ASSERT_TRUE(demo.ok()) << demo.status();
  EXPECT_THAT(*demo,
              ElementsAre("examples/demo.capnp:Vector3",
                          "examples/demo.capnp:ImuSample",
                          "examples/demo.capnp:JointState",
                          "examples/demo.capnp:StateEstimate",
                          "examples/demo.capnp:JointCommand",
                          "examples/demo.capnp:VelocityCommand",
                          "examples/demo.capnp:MonitorStatus",
                          "examples/demo.capnp:MonitorStatus.ChannelHealth",
                          "examples/demo.capnp:MonitorStatus.TrackingHealth"));
  ExpectSameAsCompiled<ImuSample>(parsed);
  ExpectSameAsCompiled<JointState>(parsed);
  ExpectSameAsCompiled<StateEstimate>(parsed);
  ExpectSameAsCompiled<JointCommand>(parsed);
  ExpectSameAsCompiled<MonitorStatus>(parsed);

  // Defaults, lists of structs, recursion (framing_test.capnp), and unions,
  // groups, enums, annotations and imports (config.capnp).
  ASSERT_TRUE(AddSchemaFile("tests/transport/framing_test.capnp",
                            WorkspaceImports(), &parsed)
                  .ok());
  ExpectSameAsCompiled<Scalars>(parsed);
  ExpectSameAsCompiled<Sample>(parsed);
  ASSERT_TRUE(
      AddSchemaFile("transport/config.capnp", WorkspaceImports(), &parsed)
          .ok());
  ExpectSameAsCompiled<config::Stack>(parsed);
  ExpectSameAsCompiled<config::Node>(parsed);

  EXPECT_THAT(parsed.known_types().names,
              IsSupersetOf({"examples/demo.capnp:JointCommand",
                            "tests/transport/framing_test.capnp:Sample",
                            "transport/config.capnp:Stack"}));
}

TEST(SchemaFile, CompiledCodeGeneratorRequestGivesTheSameBytes) {
  // tests/transport/demo.schema: `capnp compile -o- examples/demo.capnp`.
  SchemaRegistry from_file;
  absl::StatusOr<std::vector<std::string>> names = AddSchemaFile(
      "tests/transport/demo.schema", SchemaFileOptions{}, &from_file);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, IsSupersetOf({"examples/demo.capnp:ImuSample",
                                    "examples/demo.capnp:MonitorStatus"}));
  ExpectSameAsCompiled<ImuSample>(from_file);
  ExpectSameAsCompiled<JointCommand>(from_file);
  ExpectSameAsCompiled<MonitorStatus>(from_file);
}

// A stack channel of `type`, as the launcher and the nodes create it.
absl::StatusOr<StackConfig> OneChannel(const std::string& type) {
  SchemaRegistry compiled;
  compiled.Register<JointCommand>();
  return ParseStackConfig(R"({"channels": [{"name": "/robot/joint_command",
      "type": ")" + type + R"(", "maxSize": 1024, "queueDepth": 8}]})",
                          "<test stack>", compiled.known_types());
}

TEST(SchemaFile, ChannelCreatedFromAParsedSchemaOpensWithTheCompiledType) {
  shm::testing::ScopedRoot root;
  absl::StatusOr<StackConfig> stack =
      OneChannel("examples/demo.capnp:JointCommand");
  ASSERT_TRUE(stack.ok()) << stack.status();
  // The launcher: the type only from the schema file.
  SchemaRegistry parsed;
  ASSERT_TRUE(
      AddSchemaFile("examples/demo.capnp", WorkspaceImports(), &parsed).ok());
  absl::StatusOr<std::unique_ptr<ChannelHandle>> created =
      ChannelHandle::Create(root.options(), stack->channels()[0], parsed);
  ASSERT_TRUE(created.ok()) << created.status();
  // A node: the compiled type. Opening compares the channel's metadata
  // (type and schema bytes) with its own.
  SchemaRegistry compiled;
  compiled.Register<JointCommand>();
  absl::StatusOr<std::unique_ptr<ChannelHandle>> opened =
      ChannelHandle::Create(root.options(), stack->channels()[0], compiled);
  ASSERT_TRUE(opened.ok()) << opened.status();
  auto pub = Publisher<JointCommand>::Create(opened->get());
  auto sub = Subscriber<JointCommand>::Create(created->get());
  ASSERT_TRUE(pub.ok()) << pub.status();
  ASSERT_TRUE(sub.ok()) << sub.status();
  Loan<JointCommand> loan = (*pub)->MakeLoan();
  ASSERT_TRUE(loan.valid());
  loan.root().setCycle(42);
  EXPECT_EQ((*pub)->Send(std::move(loan)).status, PublishStatus::kOk);
  Message<JointCommand> message;
  ASSERT_EQ((*sub)->Next(&message), ReceiveStatus::kOk);
  EXPECT_EQ(message.root.getCycle(), 42u);

  // And the other way round: created compiled, opened parsed.
  shm::testing::ScopedRoot other;
  ASSERT_TRUE(
      ChannelHandle::Create(other.options(), stack->channels()[0], compiled)
          .ok());
  EXPECT_TRUE(
      ChannelHandle::Create(other.options(), stack->channels()[0], parsed)
          .ok());
}

TEST(SchemaFile, NamesAreRelativeToTheImportDirectoryAndImportsResolve) {
  const fs::path dir = tether::testing::FreshTestDir();
  WriteFile(dir / "pkg/b.capnp",
            "@0xbf5147cbbecf40c3;\nstruct B { v @0 :Text; }\n");
  WriteFile(dir / "pkg/a.capnp",
            "@0xbf5147cbbecf40c2;\nusing B = import \"/pkg/b.capnp\";\n"
            "using Json = import \"/capnp/compat/json.capnp\";\n"
            "struct A { b @0 :B.B; n @1 :UInt32 $Json.name(\"count\"); "
            "struct Inner { x @0 :Int8; } }\n");
  SchemaFileOptions options;
  options.import_path = {dir};
  SchemaRegistry registry;
  absl::StatusOr<std::vector<std::string>> names =
      AddSchemaFile(dir / "pkg/a.capnp", options, &registry);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("pkg/a.capnp:A", "pkg/a.capnp:A.Inner"));
  // The imported struct is loaded (A refers to it), not a declared type.
  EXPECT_TRUE(registry.FindByName("pkg/b.capnp:B").has_value());
  EXPECT_FALSE(registry.known_types().names.contains("pkg/b.capnp:B"));

  // Outside every import directory: named by its file name.
  SchemaRegistry elsewhere;
  WriteFile(dir / "loose.capnp", "@0xbf5147cbbecf40c4;\nstruct L { }\n");
  names = AddSchemaFile(dir / "loose.capnp", SchemaFileOptions{}, &elsewhere);
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("loose.capnp:L"));
}

TEST(SchemaFile, ErrorsNameTheFileTheLineAndTheFix) {
  const fs::path dir = tether::testing::FreshTestDir();
  SchemaRegistry registry;
  absl::StatusOr<std::vector<std::string>> missing =
      AddSchemaFile(dir / "missing.capnp", SchemaFileOptions{}, &registry);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("missing.capnp: cannot read it"));

  WriteFile(dir / "bad.capnp",
            "@0xbf5147cbbecf40c1;\nstruct A {\n  x @0 :UInt32;\n"
            "  y @1 :Nope;\n}\n");
  SchemaFileOptions options;
  options.import_path = {dir};
  absl::StatusOr<std::vector<std::string>> bad =
      AddSchemaFile(dir / "bad.capnp", options, &registry);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("bad.capnp:4: Not defined: Nope"));

  absl::StatusOr<std::vector<std::string>> directory =
      AddSchemaFile(dir, options, &registry);
  EXPECT_TRUE(absl::IsInvalidArgument(directory.status()))
      << directory.status();
  EXPECT_THAT(std::string(directory.status().message()),
              HasSubstr("is a directory"));

  WriteFile(dir / "junk.schema", "this is not a CodeGeneratorRequest");
  absl::StatusOr<std::vector<std::string>> junk =
      AddSchemaFile(dir / "junk.schema", options, &registry);
  EXPECT_TRUE(absl::IsInvalidArgument(junk.status())) << junk.status();
  EXPECT_THAT(std::string(junk.status().message()),
              HasSubstr("capnp compile -o-"));
  EXPECT_TRUE(registry.known_types().names.empty());

  // From a stack: the error starts with the entry that named the file.
  const std::vector<StackSchemaFile> files = {
      {dir / "bad.capnp", "stack.json:3: schemas[0]"}};
  const absl::Status stack = AddStackSchemaFiles(files, options, &registry);
  EXPECT_THAT(std::string(stack.message()),
              HasSubstr("stack.json:3: schemas[0]: schema file "));
}

}  // namespace
}  // namespace tether::transport
