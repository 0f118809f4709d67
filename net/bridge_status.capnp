@0xe1b27c94a5d3f6b8;
# net: what a net bridge publishes on /tether/net/<name>/status about itself,
# once a second (`tether echo /tether/net/<name>/status` shows it).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::net::status");

struct BridgeStatus {
  bridge @0 :Text;
  host @1 :Text;
  bridgeId @2 :UInt64;
  domain @3 :UInt32;
  partition @4 :Text;
  interface @5 :Text;
  uptimeSeconds @6 :Float64;
  channels @7 :List(ChannelStatus);
}

enum Direction {
  out @0;
  in @1;
}

enum State {
  waiting @0;
  # in: no sender has announced the channel yet.
  active @1;
  # Matched with at least one peer.
  noPeer @2;
  # out: no remote reader; in: no remote writer (link down or peer gone).
  refused @3;
  # in: the sender's channel does not match this host's (see detail).
  failed @4;
  # The local side could not be set up (see detail).
}

struct ChannelStatus {
  name @0 :Text;
  direction @1 :Direction;
  state @2 :State;
  detail @3 :Text;
  # Why refused/failed, or who the peers are.
  reliable @4 :Bool;
  historyDepth @5 :UInt32;
  deadlineMs @6 :Float64;
  peers @7 :UInt32;
  # DDS endpoints matched now (remote readers for out, writers for in).
  reconnects @8 :UInt32;
  # Times a peer was matched again after being lost.

  messages @9 :UInt64;
  # out: forwarded to DDS; in: received and published on the channel.
  bytes @10 :UInt64;
  lostNetwork @11 :UInt64;
  # in: frames that never arrived (gaps in each sender's sequence).
  lostAtSender @12 :UInt64;
  # out: overwritten in this host's channel before the bridge read them.
  # in: what the senders reported lost on their hosts.
  dropped @13 :UInt64;
  # Frames not published: wrong type or schema, malformed, too large, or
  # publish/write failures (see detail).
  duplicates @14 :UInt64;
  # in: frames older than one already seen (a sender restart counts none).
  deadlineMissed @15 :UInt64;

  latencyP50Us @16 :Float64;
  latencyP99Us @17 :Float64;
  latencyMaxUs @18 :Float64;
  # Over the last status interval. out: original send -> written to DDS.
  # in: original send on the remote host -> published here (across
  # machines, as good as their clock sync).
}
