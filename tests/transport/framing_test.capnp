@0xa44bd1ac245efc9a;
# Message shapes for tests/transport/framing_test.cc.

struct Scalars {
  i64 @0 :Int64;
  u8 @1 :UInt8;
  f64 @2 :Float64;
  flag @3 :Bool;
  i32 @4 :Int32 = -7;
}

struct Joint {
  name @0 :Text;
  position @1 :Float64;
  velocity @2 :Float64;
}

struct Sample {
  stamp @0 :UInt64;
  label @1 :Text;
  values @2 :List(Float32);
  joints @3 :List(Joint);
  inner @4 :Joint;
  blob @5 :Data;
  names @6 :List(Text);
  child @7 :Sample;
}

# Same layout as Sample's first pointer, but a struct where Sample has Text:
# reading one as the other is a pointer of the wrong kind.
struct StructFirst {
  stamp @0 :UInt64;
  inner @1 :Joint;
}

# A Data field inside a union: not a blob (its tag would not be set).
struct Choice {
  union {
    none @0 :Void;
    image @1 :Data;
  }
}

# Every kind of list and pointer, for wire_bounds_test.cc.
struct Kinds {
  flags @0 :List(Bool);
  matrix @1 :List(List(Int16));
  voids @2 :List(Void);
  bytes @3 :List(UInt8);
  shorts @4 :List(Int16);
  ints @5 :List(Int32);
  longs @6 :List(Int64);
  samples @7 :List(Sample);
  sample @8 :Sample;
  empties @9 :List(Empty);
  empty @10 :Empty;
  scalars @11 :Scalars;
}

struct Empty {}
