@0x86e432ede03b3675;
# ros_bridge/ros1msg: a ROS 1 message carried on a tether channel, as the
# bridge forwards it: the serialized bytes exactly as ROS put them on the wire
# (TCPROS payload without its 4-byte length), plus what a reader needs to
# decode or re-publish it without compiled ROS types. ROS-independent: a ROS 2
# side can carry its CDR bytes the same way (encoding "cdr").

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::ros1msg");

struct RosEnvelope {
  type @0 :Text;
  # ROS message type, "pkg/Name" (e.g. "geometry_msgs/Twist").

  md5sum @1 :Text;
  # The type's MD5 sum as ROS computes it (32 hex digits).

  definition @2 :Text;
  # The full message definition (the type's .msg text, then every type it
  # uses after a line of 80 '=' and "MSG: pkg/Name"), as in the TCPROS
  # connection header and in bags: enough to decode `data` without ROS.

  latching @3 :Bool;
  # The ROS publisher is latched (new subscribers get its last message).

  callerid @4 :Text;
  # The ROS node that published it (ROS -> tether), or the tether-side
  # publisher's name (tether -> ROS, informational).

  topic @5 :Text;
  # The ROS topic it was published on (ROS -> tether) or is meant for.

  receiveTimeNs @6 :Int64;
  # ROS time (ros::Time::now(), ns since the epoch; simulated time under
  # /use_sim_time) when the bridge received it; 0 for messages made in
  # tether. What a bag records as the message time.

  data @7 :Data;
  # The serialized message.

  origin @8 :Origin;
  # Where the message entered tether: loop prevention. A bridge never
  # forwards into a ROS graph a message that came from that graph.

  struct Origin {
    graph @0 :Text;
    # The ROS graph it came from: its id, 16 hex digits, the ROS parameter
    # /tether/graph that the graph's bridges share (ros_bridge/master_link.h);
    # empty for messages made in tether.

    bridge @1 :Text;
    # The bridge node that forwarded it (its ROS node name).
  }

  encoding @9 :Text = "ros1";
  # Serialization of `data`: "ros1" (MCAP's message encoding name).
}
