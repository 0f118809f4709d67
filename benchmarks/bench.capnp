@0xe7bed1219b82101f;
# The message of the ping-pong benchmarks (benchmarks/tether_pingpong.cc):
# a payload of the case's size. Its first 16 bytes are the bench header
# {sequence, send time} (benchmarks/harness/protocol.h); the rest is written
# or left alone per the case's write mode.

struct Payload {
  data @0 :Data;
}
