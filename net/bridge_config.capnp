@0xd4c1f0a7b2e98355;
# net: the net bridge's own config file (JSON, field names as below, enums as
# their names, e.g. "bestEffort"). One file per bridge; a stack runs the
# bridge as a node: `tether net-bridge --config net.json`.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::net::config");

struct Bridge {
  name @0 :Text = "net-bridge";
  # [A-Za-z0-9_-]+. Names this bridge to its peers and its status channel
  # /tether/net/<name>/status.

  domain @1 :UInt32 = 0;
  # DDS domain id (0..230). Bridges talk only within one domain and partition.

  partition @2 :Text = "tether";
  # DDS partition: stacks sharing a network keep apart by partition.

  interface @3 :Text = "lo";
  # The one network interface DDS may use (a name from `ip link`). The
  # default keeps all traffic on loopback: name an interface to leave the
  # host.

  peers @4 :List(Text);
  # Unicast discovery: addresses of the other hosts' bridges. Empty: the
  # interface's multicast (loopback has none: unicast to this host).

  multicast @5 :Bool = true;
  # Multicast discovery and data on the interface (ignored on loopback and
  # when peers are given, which turn it off).

  leaseSeconds @6 :Float64 = 3;
  # A peer not heard from for this long is declared gone (its channels show
  # state "noPeer"); it is found again when the link returns.

  announceSeconds @7 :Float64 = 1;
  # How often this bridge announces itself (DDS SPDP interval): bounds how
  # long rediscovery after a lost lease takes.

  channels @8 :List(Channel);
}

struct Channel {
  name @0 :Text;
  # The tether channel, e.g. "/robot/imu".

  direction @1 :Direction;

  reliability @2 :Reliability;
  # out: how this side writes (default reliable). in: default takes what
  # the sender announces; a reader asking reliable from a best-effort
  # writer gets nothing (shown as incompatible QoS in the status).

  historyDepth @3 :UInt32;
  # DDS history (KEEP_LAST depth): samples kept for retransmission (writer)
  # or not yet taken (reader). 0: the channel's queue depth, at most 1024.

  deadlineMs @4 :Float64;
  # Expected longest gap between messages; each longer gap is counted as a
  # missed deadline in the status. 0: none.
}

enum Direction {
  out @0;
  # tether channel on this host -> DDS.
  in @1;
  # DDS -> tether channel on this host (created from what the sender
  # announces, or checked against the existing one).
}

enum Reliability {
  default @0;
  reliable @1;
  bestEffort @2;
}
