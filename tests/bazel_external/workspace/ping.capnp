@0xd2a3c4b5e6f70819;
# The external workspace's own schema.

struct Ping {
  sequence @0 :UInt64;
  note @1 :Text;
}
