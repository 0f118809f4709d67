@0xd6a0b1c2e3f40516;
# A tiny schema that proves capnp_cc_library works: generated header, generated
# source compiled under Bazel, and an import of another generated schema.

using Base = import "/tests/third_party/capnp_rule_base.capnp";

struct Pose {
  x @0 :Float64;
  y @1 :Float64;
  theta @2 :Float64;
  frame @3 :Text;
  stamp @4 :Base.Stamp;
  covariance @5 :List(Float32);
}
