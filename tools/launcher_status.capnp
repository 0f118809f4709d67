@0xe1809b9362bb6749;
# tools: the state of a stack as `tether launch` sees it. The launcher
# publishes one LauncherStatus on the channel /tether/launcher/status of its
# instance once a second and whenever a node changes state, so `tether list`
# and `tether echo` (or any node) can watch the stack.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::tools::wire");

struct LauncherStatus {
  timeNs @0 :Int64;
  # CLOCK_REALTIME when this status was made.

  launcherPid @1 :Int32;
  stackFile @2 :Text;
  # Absolute path of the stack config.

  phase @3 :Phase;
  nodes @4 :List(NodeStatus);
  # In the order of the stack config.

  enum Phase {
    running @0;
    # Nodes are being started, run and restarted.
    stopping @1;
    # Shutdown: nodes are stopped in reverse start order.
    stopped @2;
    # Every node has ended; this is the launcher's last message.
  }
}

struct NodeStatus {
  name @0 :Text;

  pid @1 :Int32;
  # While running or stopping; 0 otherwise.

  state @2 :NodeState;

  restarts @3 :UInt32;
  # Restarts so far (not counting the first start).

  starts @4 :UInt32;
  # Successful starts (the program was executed).

  lastExit @5 :ExitKind;
  lastExitValue @6 :Int32;
  # The exit code (code) or signal number (signal) of the last run.

  lastError @7 :Text;
  # Why the last start failed (startFailed), else empty.

  enum ExitKind {
    none @0;
    code @1;
    signal @2;
    startFailed @3;
  }
}

enum NodeState {
  pending @0;
  # Not started yet: waits for the nodes in its startAfter.
  running @1;
  backoff @2;
  # Ended; restarts when its backoff delay is over.
  stopping @3;
  # Sent SIGTERM (then SIGKILL) by the launcher's shutdown.
  exited @4;
  # Ended with code 0 and its restart policy does not restart it.
  failed @5;
  # Ended abnormally and is not restarted (policy, or restarts exhausted).
  stopped @6;
  # Stopped by the launcher's shutdown (or never started before it).
  blocked @7;
  # Never started: a node in its startAfter failed before it ever started.
  starting @8;
  # Forked; its program is not executed yet (normally for microseconds).
}
