// net: the net bridge's frames — a tether message out as a Frame on its
// channel's DDS topic, and a received Frame into the local channel, with
// loss, duplicate and latency accounting (bridge_impl.h).
#include <algorithm>
#include <cstdio>
#include <span>

#include "absl/strings/str_cat.h"
#include "dds/dds.h"
#include "net/bridge_impl.h"
#include "net/frame.h"
#include "transport/raw_endpoints.h"

namespace tether::net {
namespace {

using internal::ClockNs;
using internal::DdsError;
using internal::kTakeBatch;

}  // namespace

void Bridge::Impl::Forward(ChannelRun& c, const transport::RawMessage& m) {
  const transport::MessageContext& ctx = m.context;
  // Overwritten before this run read them (the gap since the last run was
  // counted when the cursor opened, up to where this run's watcher starts).
  if (ctx.missed != 0) {
    c.lost_at_sender.fetch_add(ctx.missed);
    c.stream.lost += ctx.missed;
  }
  // Loop prevention: what this process published came from the network.
  if (ctx.publisher_pid == static_cast<uint32_t>(pid)) {
    // The count is kept before the position passes the messages it counts.
    if (ctx.missed != 0 && c.cursor != nullptr) {
      c.cursor->Record(c.stream.last_seq, c.stream.lost, ctx.queue_index);
    }
    AdvanceCursor(c, ctx.queue_index);
    return;
  }
  tether_net_Frame f{};
  f.bridge_id = id;
  f.stream_id = c.stream.id;
  f.seq = ++c.stream.last_seq;
  f.lost_total = c.stream.lost;
  f.type_id = c.described.type_id;
  f.schema_hash = c.described.schema_hash;
  f.upstream_missed = ctx.missed;
  // The peers hear of the restart gap with the first frame they can get
  // (one written before any reader matched reaches nobody).
  if (c.untold_lost != 0 && c.peers.load(std::memory_order_relaxed) > 0) {
    f.upstream_missed += c.untold_lost;
    c.untold_lost = 0;
  }
  f.monotonic_send_ns = ctx.monotonic_send_ns;
  f.realtime_send_ns = ctx.realtime_send_ns;
  f.publisher_pid = ctx.publisher_pid;
  f.publisher_sequence = ctx.publisher_sequence;
  f.queue_index = ctx.queue_index;
  f.origin = ctx.origin;
  f.payload._buffer =
      const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(m.bytes.data()));
  f.payload._length = f.payload._maximum =
      static_cast<uint32_t>(m.bytes.size());
  f.payload._release = false;
  // Before the write: a run killed after it never reuses this number.
  if (c.cursor != nullptr) {
    c.cursor->Record(f.seq, f.lost_total, ctx.queue_index);
  }
  const dds_return_t rc = dds_write(c.writer, &f);
  // Handled either way: written, or counted as dropped.
  AdvanceCursor(c, ctx.queue_index);
  if (rc < 0) {
    c.dropped.fetch_add(1);
    c.SetDetail(DdsError("DDS write failed", rc));
    return;
  }
  c.messages.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(m.bytes.size(), std::memory_order_relaxed);
  c.latency.Add(ClockNs(CLOCK_MONOTONIC) - ctx.monotonic_send_ns);
}

void Bridge::Impl::AdvanceCursor(ChannelRun& c, uint64_t index) {
  if (c.cursor == nullptr) return;
  c.cursor->Advance(index);
  if (!c.cursor->damaged()) return;
  RemakeCursor(c, "was truncated while this bridge ran (another process)");
}

void Bridge::Impl::CheckCursor(ChannelRun& c) {
  if (c.cursor == nullptr) return;
  const std::string gone = c.cursor->Gone();
  if (!gone.empty()) RemakeCursor(c, gone);
}

void Bridge::Impl::RemakeCursor(ChannelRun& c, const std::string& what) {
  const std::string why = absl::StrCat(
      "the forwarding cursor ", c.cursor->path(), " ", what,
      ": made again at its position");
  c.SetDetail(why);
  std::fprintf(stderr, "net-bridge %s: %s: %s\n", options.name.c_str(),
               c.config.name.c_str(), why.c_str());
  const uint64_t position = c.cursor->position();
  c.cursor.reset();
  const ForwardCursor::Stream keep = c.stream;
  OpenCursor(c, position, /*again=*/true, &keep);
}

void Bridge::Impl::ResumeCursor(ChannelRun& c, uint64_t first) {
  if (c.resumed || c.cursor == nullptr) return;
  c.resumed = true;
  const std::optional<uint64_t> gap = c.cursor->Resume(first);
  if (!gap.has_value() || *gap == 0) return;
  c.lost_at_sender.fetch_add(*gap);
  c.untold_lost += *gap;
  c.stream.lost += *gap;  // the cursor has it too (Resume)
  const std::string why = absl::StrCat(
      *gap, " messages were sent on ", c.config.name,
      " while this bridge was not running (between where its last run got "
      "to and where this run started): not forwarded, counted in LOST "
      "SRC");
  c.SetDetail(why);
  std::fprintf(stderr, "net-bridge %s: %s\n", options.name.c_str(),
               why.c_str());
}

void Bridge::Impl::TakeFrames(ChannelRun& c) {
  const dds_entity_t reader = c.reader.load();
  if (reader <= 0) return;
  for (;;) {
    void* samples[kTakeBatch] = {};
    dds_sample_info_t infos[kTakeBatch];
    const int n = dds_take(reader, samples, infos, kTakeBatch, kTakeBatch);
    if (n <= 0) return;
    for (int i = 0; i < n; ++i) {
      if (infos[i].valid_data) {
        Deliver(c, *static_cast<const tether_net_Frame*>(samples[i]));
      }
    }
    dds_return_loan(reader, samples, n);
    if (n < kTakeBatch) return;
  }
}

void Bridge::Impl::Deliver(ChannelRun& c, const tether_net_Frame& f) {
  if (f.bridge_id == id) return;  // our own (ignorelocal should stop these)
  if (c.refused_senders.contains(f.bridge_id) ||
      f.type_id != c.accepted->type_id ||
      f.schema_hash != c.accepted->schema_hash) {
    c.dropped.fetch_add(1);
    return;
  }
  const SequenceTracker::Result r =
      c.sequences.Observe(f.stream_id, f.seq, f.lost_total);
  if (r.verdict == SequenceTracker::Verdict::kOld) {
    c.duplicates.fetch_add(1);
    return;
  }
  if (r.lost != 0) c.lost_network.fetch_add(r.lost);
  // A stream seen before: its lost count since the last frame, also what
  // frames that never arrived reported; a new one: what its frame says.
  const uint64_t at_sender = r.verdict == SequenceTracker::Verdict::kFirst
                                 ? f.upstream_missed
                                 : r.lost_at_sender;
  if (at_sender != 0) c.lost_at_sender.fetch_add(at_sender);

  // Send times in this host's clocks: one kernel keeps CLOCK_MONOTONIC;
  // across machines the realtime send time is mapped onto this host's
  // monotonic clock (as good as the hosts' clock sync).
  const int64_t mono_now = ClockNs(CLOCK_MONOTONIC);
  auto same = c.same_clock.find(f.bridge_id);
  int64_t mono_send = f.monotonic_send_ns;
  if (same == c.same_clock.end() || !same->second) {
    mono_send = f.realtime_send_ns - (ClockNs(CLOCK_REALTIME) - mono_now);
  }
  transport::SendTimes times;
  times.monotonic_ns = static_cast<uint64_t>(std::max<int64_t>(mono_send, 1));
  times.realtime_ns =
      static_cast<uint64_t>(std::max<int64_t>(f.realtime_send_ns, 1));
  times.origin = f.origin;
  const std::span<const std::byte> payload(
      reinterpret_cast<const std::byte*>(f.payload._buffer),
      f.payload._length);
  const transport::PublishResult p = c.publisher->Publish(payload, &times);
  if (p.status != transport::PublishStatus::kOk) {
    c.dropped.fetch_add(1);
    c.SetDetail(absl::StrCat("publishing a received message failed: ",
                             transport::ToString(p.status)));
    return;
  }
  c.messages.fetch_add(1, std::memory_order_relaxed);
  c.bytes.fetch_add(payload.size(), std::memory_order_relaxed);
  c.latency.Add(mono_now - mono_send);
}

}  // namespace tether::net
