@0xa1f6c3b2d4e50617;
# Imported by capnp_rule_test.capnp to prove cross-schema imports resolve.

struct Stamp {
  monotonicNs @0 :Int64;
  sequence @1 :UInt32;
}
