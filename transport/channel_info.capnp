@0xc3b5e0f2a1d49e27;
# transport: what a channel file says about itself, stored in the shm
# channel's metadata bytes at creation (stream framed). Every process opening
# the channel must agree on it; tools read it to decode messages without the
# compiled schema.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::transport::wire");

struct ChannelInfo {
  name @0 :Text;
  typeId @1 :UInt64;
  typeName @2 :Text;
  # Display name of the root struct, "examples/demo.capnp:JointState".
  maxSize @3 :UInt32;
  frequencyHz @4 :Float64;
  schema @5 :Data;
  # CodeGeneratorRequest of the type and its dependencies (stream framed).
}
