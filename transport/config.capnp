@0xade269f19072479a;
# transport: the stack configuration schema. A stack is written as JSON (field
# names as below, enums as their names, e.g. "fifo") and decoded into these
# structs by transport/config.h, which also validates it.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::transport::config");

struct Stack {
  includes @0 :List(Text);
  # Other stack files merged into this one, relative to this file. Their
  # channels and nodes are appended; a name declared twice is an error.

  channels @1 :List(Channel);
  nodes @2 :List(Node);

  schemas @3 :List(Text);
  # Cap'n Proto schema files declaring the message types of the channels,
  # relative to this file, e.g. ["../demo.capnp"]. They are how the launcher
  # (and a node, for the types it does not link) knows a type it has no
  # compiled-in code for: it needs the schema to create the channel, which
  # stores it for tools. Parsed when the stack is launched
  # (transport/schema_file.h):
  # - a .capnp source is parsed with Cap'n Proto's own compiler. Absolute
  #   imports (import "/pkg/x.capnp") are looked up in the working directory
  #   (the launcher's --workdir; in a Bazel workspace its root, where
  #   capnp_cc_library runs `capnp compile -I.`), then /usr/local/include
  #   and /usr/include. A type's display name is its file's path below that
  #   directory ("examples/demo.capnp:JointState"), exactly as the compiled
  #   type's name, so both describe the same channel type.
  # - any other file is read as a compiled CodeGeneratorRequest
  #   (`capnp compile -o- x.capnp > x.schema`; names as that run gave them).
  # Every struct in a file becomes a type channels may carry. After loading,
  # the merged stack lists every file's entries as absolute paths, included
  # files' first, each once.
}

struct Channel {
  name @0 :Text;
  # Absolute, like "/robot/joint_state": '/'-separated parts of
  # [A-Za-z0-9_.-].

  type @1 :Text;
  # The message type: a Cap'n Proto struct display name
  # ("examples/demo.capnp:JointState") or its type id ("0x9eb32e19f86ee174").

  maxSize @2 :UInt32;
  # Largest framed message in bytes (segment table + segment), 16..256 MiB.
  # The slot holds maxSize rounded up to 8 bytes.

  frequencyHz @3 :Float64;
  # Expected publish rate; 0 for aperiodic channels.

  queueDepth @4 :UInt32;
  # Messages a reader can still read (a power of two, >= 2). Give this or
  # historySeconds; after loading it always holds the depth in use.

  historySeconds @5 :Float64;
  # Seconds of history to keep: depth = ceil(frequencyHz * historySeconds)
  # rounded up to a power of two. Needs frequencyHz.

  maxPublishers @6 :UInt32 = 1;
  # Publishers registered at once (1..1024). Must cover the nodes writing it.

  maxPinned @7 :UInt32 = 8;
  # Readers holding a message pinned at once (0..64).

  mode @8 :Text = "0660";
  # Permissions of the channel's data file, an octal string; the owner
  # needs rw. Write access lets a process publish (and so forge messages);
  # read access lets it read them. "0640": the group reads, only the owner
  # publishes.

  group @9 :Text;
  # Group owning the channel's files and its instance folder; empty: the
  # launcher's group.

  readerMode @10 :Text;
  # Permissions of the channel's reader-state file (pins, sleepers), an
  # octal string; the owner needs rw. Write access lets a reader pin
  # messages and be woken; a reader that can read the data but not write
  # this reads as a guest (unpinned copies, polling), affecting nobody.
  # Empty: `mode` plus group write where the group may read ("0640" ->
  # "0660"). See docs/security.md for what a writer of this file can do.

  readerGroup @11 :Text;
  # Group owning the reader-state file; empty: `group`.
}

struct Node {
  name @0 :Text;
  # [A-Za-z0-9_-]+, unique in the stack.

  command @1 :Text;
  # Program to run (path, or a name looked up in PATH).

  args @2 :List(Text);

  scheduling @3 :Scheduling;
  cpus @4 :List(Int32);
  # CPU ids the node may run on; empty: any.

  user @5 :Text;
  # Run as this user; empty: the launcher's user.

  restart @6 :Restart;

  startAfter @7 :List(Text);
  # Nodes that must be started before this one.

  env @8 :List(EnvVar);
  # Extra environment variables.

  reads @9 :List(Text);
  writes @10 :List(Text);
  # Channels the node subscribes to / publishes on.

  checkAllocations @11 :Bool;
  # Run every callback of the node's loop inside a RealtimeScope: a node
  # binary that links //loop:rt_alloc_check then aborts, with a stack trace,
  # on a heap allocation in a timer, phased loop or watcher. (Debug builds
  # check whatever this says.)
}

struct Scheduling {
  policy @0 :Policy;
  priority @1 :Int32;
  # 1..99 for fifo and rr; 0 for other.
  nice @2 :Int32;
  # -20..19, for policy other only.
  realtime @3 :Realtime;
}

enum Policy {
  other @0;
  fifo @1;
  rr @2;
}

enum Realtime {
  bestEffort @0;
  # If the policy, priority or CPUs cannot be applied (no CAP_SYS_NICE, CPU
  # offline), warn and run anyway.
  required @1;
  # Fail the node's start instead.
}

struct Restart {
  policy @0 :RestartPolicy;
  backoffMs @1 :UInt32 = 500;
  # Delay before the first restart; doubles per restart up to maxBackoffMs.
  maxBackoffMs @2 :UInt32 = 10000;
  maxRestarts @3 :UInt32 = 5;
  # Restarts before giving up; 0: unlimited.
}

enum RestartPolicy {
  never @0;
  onFailure @1;
  always @2;
}

struct EnvVar {
  name @0 :Text;
  value @1 :Text;
}
