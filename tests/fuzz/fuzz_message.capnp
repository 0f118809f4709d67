@0xd7e0c1b2a3f49e51;
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::fuzz");
# Message shapes for tests/fuzz/slot_reader_fuzzer.cc: every kind of field a
# reader of slot bytes walks (scalars, text, data, lists of scalars, structs
# and text, nested structs, a union, an enum, recursion).

enum Mode {
  idle @0;
  run @1;
  fault @2;
}

struct Joint {
  name @0 :Text;
  position @1 :Float64;
  velocity @2 :Float32;
}

struct Sample {
  stamp @0 :UInt64;
  label @1 :Text;
  values @2 :List(Float32);
  joints @3 :List(Joint);
  blob @4 :Data;
  names @5 :List(Text);
  child @6 :Sample;
  mode @7 :Mode;
  flags @8 :List(Bool);
  matrix @9 :List(List(Int16));
  payload :union {
    none @10 :Void;
    count @11 :Int64;
    joint @12 :Joint;
    text @13 :Text;
  }
}
