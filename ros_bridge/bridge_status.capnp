@0xc52aadb781c50a6d;
# ros_bridge: the bridge's status, published on
# /tether/ros_bridge/<node>/status every statusPeriodMs (`tether echo` it).

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::ros_bridge");

struct BridgeStatus {
  timeNs @0 :Int64;
  # CLOCK_REALTIME.
  node @1 :Text;
  # The bridge's ROS node name.
  master @2 :Text;
  graph @3 :Text;
  # This ROS graph's id (16 hex digits; the ROS parameter /tether/graph):
  # the origin graph of its envelopes and the origin tag of its messages.
  pid @4 :UInt32;
  masterUp @5 :Bool;
  masterChanges @6 :UInt32;
  # Times the master went away or was replaced by a new one (restart).
  reregistrations @7 :UInt32;
  # Times every topic was registered again with a new master.
  note @8 :Text;
  # The latest event, e.g. "master restarted (pid 123 -> 456); registered 4
  # topics again".
  routes @9 :List(Route);

  struct Route {
    rosTopic @0 :Text;
    channel @1 :Text;
    toTether @2 :Bool;
    # true: ROS -> tether; false: tether -> ROS.
    rosType @3 :Text;
    typed @4 :Bool;
    forwarded @5 :UInt64;
    droppedFull @6 :UInt64;
    # tether -> ROS: dropped because the outbox was full (ROS too slow);
    # ROS -> tether: no slot to build in.
    droppedTooLarge @7 :UInt64;
    # Larger than the channel's maxSize (raise maxSize for this pair).
    loopSkipped @8 :UInt64;
    # Not forwarded because it came from the other side (no echo).
    malformed @9 :UInt64;
    # Could not be decoded or converted (see note).
    tetherMissed @10 :UInt64;
    # tether -> ROS: lost in the channel before the bridge read them.
    connections @11 :UInt32;
    # ROS peers: publishers (ROS -> tether) or subscribers (tether -> ROS).
    error @12 :Text;
  }
}
