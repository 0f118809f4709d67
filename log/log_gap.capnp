@0xd1e5c0a3b7f24e68;
# log: what a tether log says about messages it does not hold. The logger
# writes one LogGap message on the channel /tether/log/gaps wherever it lost
# messages, so a reader of the log (also a standard MCAP tool) knows exactly
# where data is missing and why.

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tether::log::wire");

struct LogGap {
  channel @0 :Text;
  # The channel that lost messages.

  missed @1 :UInt64;
  # How many consecutive messages are missing.

  firstQueueIndex @2 :UInt64;
  lastQueueIndex @3 :UInt64;
  # The channel queue indices of the first and last missing message
  # (inclusive). Messages in the log carry their queue index too.

  reason @4 :Reason;
  enum Reason {
    overwritten @0;
    # The channel's queue wrapped before the logger read them: its depth
    # holds less than the logger's drain period at the channel's rate.
    overwrittenWhileCopying @1;
    # The slot was reused while the logger copied the message.
    writerBacklog @2;
    # The logger read them but its file writer was too far behind (disk too
    # slow); dropped to bound memory.
    corruptChannel @3;
    # The channel's shared memory is corrupt; the logger stopped reading it.
  }

  detectedMonotonicNs @5 :Int64;
  # When the logger noticed (CLOCK_MONOTONIC).

  logged :union {
    # Which of the log's MCAP channels named `channel` lost them: a channel
    # re-created with another shape while it was recorded is in the log
    # once per shape under one name, and each loss is one incarnation's.
    # Logs written before this field read as `unknown`.
    unknown @6 :Void;
    mcapChannelId @7 :UInt16;
  }
}
