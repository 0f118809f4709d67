// transport: raw publish/subscribe endpoints — bytes plus message context —
// over a ChannelHandle. The logger, replay, bridge and CLI use these; typed
// endpoints (typed_endpoints.h) are built on them.
#ifndef TETHER_TRANSPORT_RAW_ENDPOINTS_H_
#define TETHER_TRANSPORT_RAW_ENDPOINTS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"

namespace tether::transport {

// Everything known about one received message besides its bytes.
struct MessageContext {
  int64_t monotonic_send_ns = 0;
  int64_t realtime_send_ns = 0;
  // When this reader got it (CLOCK_MONOTONIC).
  int64_t monotonic_receive_ns = 0;
  uint64_t queue_index = 0;        // the message's index in the channel
  uint32_t publisher_pid = 0;
  uint32_t publisher_index = 0;    // publisher registry slot
  uint64_t publisher_sequence = 0; // n-th message of that publisher
  // Where it entered tether from outside (SendTimes::origin): 0 for a
  // message made by a tether node; a bridge's tag otherwise.
  uint64_t origin = 0;
  // Messages lost before this one (overwritten before this reader got to
  // them). Never lost silently: this is where loss shows up.
  uint64_t missed = 0;
};

enum class [[nodiscard]] PublishStatus {
  kOk,
  kTooLarge,  // larger than the channel's max size; nothing sent
  kNoLoan,    // no slot to build in; see shm::SendStatus::kNoLoan
  kCorrupt,   // channel memory is corrupt; nothing sent
  kMalformed, // not a valid message: raw Publish of bytes whose framing or
              // pointers are bad, or a typed build with a bad InitBlob or
              // external data (last_finish() says which)
};
const char* ToString(PublishStatus status);
// What a failed build or copy means for the send: kTooLarge for kOverflow,
// kMalformed for any other failure (kOk when it succeeded). RT-safe.
inline PublishStatus PublishStatusOf(const FinishResult& finished) {
  if (finished.ok()) return PublishStatus::kOk;
  return finished.status == FramingStatus::kOverflow
             ? PublishStatus::kTooLarge
             : PublishStatus::kMalformed;
}

// Send times; zero fields are stamped at commit. Log replay passes the
// recorded ones.
using SendTimes = shm::SendTimes;

// What a send did. [[nodiscard]]: a failed send is counted
// (send_failures()), but only the caller can act on it, so ignoring it
// takes a (void).
struct [[nodiscard]] PublishResult {
  PublishStatus status = PublishStatus::kOk;
  uint64_t queue_index = 0;
  bool ok() const { return status == PublishStatus::kOk; }
};

// What an event loop hooks into the endpoints it hands out, so that send and
// receive times follow the loop's clock (real or simulated), and bad input
// is reported the loop's way. transport never depends on loop: the loop
// implements this. Called on the endpoint's thread; must be RT-safe except
// where said.
class EndpointHooks {
 public:
  virtual ~EndpointHooks() = default;
  // Fills the send times of the next send (fields left zero are stamped
  // from the real clocks at commit).
  virtual void StampSend(SendTimes* times) = 0;
  // The receive time stamped on messages (CLOCK_MONOTONIC or virtual).
  virtual int64_t MonotonicNowNs() = 0;
  // A typed reader skipped the message `context` of `channel`: its bytes
  // failed the check (framing.h; `why` is Cap'n Proto's description). A
  // failure path: it may allocate and write a line (the loop logs one per
  // channel), never block; it runs inside the reader's real-time scope, if
  // any, so it allows itself what it allocates. Default: nothing.
  virtual void MessageMalformed(const ChannelHandle& channel,
                                const MessageContext& context,
                                const std::string& why) {
    (void)channel, (void)context, (void)why;
  }
  // A publisher made with these hooks came or went (its constructor and
  // destructor, on whichever thread those run), so that a loop can catch a
  // sender that outlives it (its next Send() would call a freed loop).
  // Setup; any thread. Default: nothing.
  virtual void PublisherMade(const ChannelHandle& channel) { (void)channel; }
  virtual void PublisherGone(const ChannelHandle& channel) { (void)channel; }
  // The same for a subscriber (a loop's fetcher would call the freed loop
  // for its receive time).
  virtual void SubscriberMade(const ChannelHandle& channel) { (void)channel; }
  virtual void SubscriberGone(const ChannelHandle& channel) { (void)channel; }
};

// One publisher on a channel. Not copyable or movable; one thread at a time
// (one publisher per thread). Destroy it before its ChannelHandle.
//
// Failed sends are never silent: every Send() or Publish() that returns a
// status other than kOk has been counted once in send_failures(), which is
// the channel's shared per-publisher counter that `tether list`/`stat`,
// EventLoop::Peers() and the demo's monitor read (ChannelHandle::stats()).
class RawPublisher {
 public:
  // Registers a publisher (ResourceExhausted naming maxPublishers when the
  // channel has as many as its config allows). Setup only.
  // `hooks` (may be null; must outlive the publisher) come from an event
  // loop.
  static absl::StatusOr<std::unique_ptr<RawPublisher>> Create(
      ChannelHandle* channel, EndpointHooks* hooks = nullptr);

  RawPublisher(const RawPublisher&) = delete;
  RawPublisher& operator=(const RawPublisher&) = delete;
  ~RawPublisher() {
    if (hooks_ != nullptr) hooks_->PublisherGone(*channel_);
  }

  // The loaned slot to build the next message in (slot size bytes, 64-byte
  // aligned); empty if none can be had now. An empty loan is not counted by
  // itself: Send() then fails with kNoLoan (counted), and a caller that
  // gives up instead calls CountFailure(PublishStatus::kNoLoan). RT-safe.
  std::span<std::byte> Loan() { return publisher_->Loan(); }

  // Commits `size` bytes of the loan starting `offset` bytes into it (a
  // multiple of 8: where SlotMessageBuilder::Finish() says the message
  // starts). A failure (kTooLarge past the channel's maxSize, kNoLoan,
  // kCorrupt) is counted once in send_failures(). `times` with both times
  // 0 (or null) takes them from the hooks' clock when there are hooks
  // (keeping `times->origin`), else from the real clocks at commit.
  // RT-safe: no allocation, no lock, at most one syscall (the wake, only
  // when a reader sleeps).
  PublishResult Send(size_t size, const SendTimes* times = nullptr,
                     size_t offset = 0);

  // Copies already framed bytes (a log record, a bridged message) into the
  // loan and sends them if they are a valid message: the framing, then
  // every pointer, as a typed reader checks them (CheckWholeMessage);
  // kMalformed, and nothing sent, if not. RT-safe for valid one-segment
  // messages (what tether's builders make): O(size) copy and walk, no
  // allocation; the check's failure path may allocate (framing.h,
  // "Failure path"). A message of several segments
  // (another writer's, or a log recorded before blobs were one segment) is
  // checked whole and rebuilt as one segment in a private arena (mapped on
  // first use), so that readers of the channel never allocate for it: that
  // path is O(message) and not RT-safe (Cap'n Proto's reader allocates a
  // table per extra segment); kMalformed if the check fails. Every failure
  // (no loan, too large, malformed, corrupt) is counted once in
  // send_failures().
  PublishResult Publish(std::span<const std::byte> framed,
                        const SendTimes* times = nullptr);

  // Counts one send that failed before it reached Send() -- a layer above
  // found no loan (an empty Loan() it gives up on), or its build outgrew
  // the slot or was malformed -- in send_failures(), and returns `status`
  // as the result. Send() and Publish() count their own failures: never
  // call this for one of their results. RT-safe: one relaxed atomic add in
  // shared memory; no allocation, no lock, no syscall.
  PublishResult CountFailure(PublishStatus status) {
    publisher_->CountFailure();
    return {status};
  }

  ChannelHandle* channel() const { return channel_; }
  uint64_t messages_sent() const { return publisher_->messages_sent(); }
  // Sends of this publisher that failed, at any layer (what its entry in
  // the channel's registry says, for tools). RT-safe.
  uint64_t send_failures() const { return publisher_->send_failures(); }

 private:
  RawPublisher(ChannelHandle* channel, std::unique_ptr<shm::Publisher> p,
               EndpointHooks* hooks)
      : channel_(channel), publisher_(std::move(p)), hooks_(hooks) {
    if (hooks_ != nullptr) hooks_->PublisherMade(*channel_);
  }
  // Rebuilds the multi-segment message now in `loan` as one segment there.
  PublishResult Reframe(std::span<std::byte> loan, const FinishResult& copied,
                        const SendTimes* times);

  ChannelHandle* const channel_;
  const std::unique_ptr<shm::Publisher> publisher_;
  EndpointHooks* const hooks_;
  std::unique_ptr<BuildArena> reframe_arena_;  // made by the first Reframe
};

enum class [[nodiscard]] ReceiveStatus {
  kOk,
  kNothingNew,
  kCorrupt,    // channel memory is corrupt
  kMalformed,  // (typed) the message's bytes are not a valid message; skipped
};
const char* ToString(ReceiveStatus status);

struct RawMessage {
  std::span<const std::byte> bytes;  // framed, in shared memory, in place
  MessageContext context;
};

struct SubscriberOptions {
  // Pin messages while read (in place, safe from reuse). Needs one of the
  // channel's maxPinned entries. Unpinned subscribers must copy and check
  // StillValid() — tools only.
  bool pin = true;
  // Start with the oldest message still in the channel instead of only new
  // ones.
  bool from_oldest = false;
  // Unpinned, but each message is copied into the subscriber's own buffer
  // (allocated at creation: slot size) and checked intact after the copy;
  // one overwritten while copied counts as missed. Messages stay valid
  // until the next read. What a guest reads with.
  bool copy = false;
  // Pinning was asked for but this process cannot write the channel's
  // reader-state file (ChannelHandle::guest()), or every maxPinned entry
  // is taken: read as a guest instead (pin = false, copy = true; guest()
  // and guest_reason() say so). false: Create fails with PermissionDenied
  // or ResourceExhausted saying why.
  bool guest_fallback = true;
};

// One subscriber cursor. Not copyable or movable; one thread at a time.
class RawSubscriber {
 public:
  // A cursor at the newest message (or the oldest, options.from_oldest).
  // Pinning takes one of the channel's maxPinned entries: ResourceExhausted
  // naming maxPinned when all are taken (after sweeping dead readers). A
  // guest (see SubscriberOptions::guest_fallback) reads copies instead.
  // `channel` (and `hooks`, may be null, from an event loop) must outlive
  // the subscriber. Setup only: not RT-safe (may read /proc to sweep).
  static absl::StatusOr<std::unique_ptr<RawSubscriber>> Create(
      ChannelHandle* channel, const SubscriberOptions& options = {},
      EndpointHooks* hooks = nullptr);

  RawSubscriber(const RawSubscriber&) = delete;
  RawSubscriber& operator=(const RawSubscriber&) = delete;
  ~RawSubscriber() {
    if (hooks_ != nullptr) hooks_->SubscriberGone(*channel_);
  }

  // The next message after the cursor, valid (pinned) until the next call
  // or Release(). RT-safe: lock-free, no allocation, no syscall but the
  // vDSO clock read.
  ReceiveStatus Next(RawMessage* message);
  // The newest message if newer than the cursor (what a fetcher wants); the
  // cursor moves past it, and the messages skipped are not counted as
  // missed. Pinned like Next(). RT-safe: lock-free, no allocation.
  ReceiveStatus Latest(RawMessage* message);
  // Unpins the message the last Next()/Latest() returned (no-op when
  // unpinned or nothing is held); its bytes must not be read after. RT-safe.
  void Release() { reader_->Release(); }
  // For typed readers built on this one: `message` failed its check
  // (EndpointHooks::MessageMalformed, if the subscriber has hooks). Failure
  // path only: see there.
  void ReportMalformed(const RawMessage& message, const std::string& why) {
    if (hooks_ != nullptr) {
      hooks_->MessageMalformed(*channel_, message.context, why);
    }
  }
  // Next() has something (a message, a loss or corruption). RT-safe.
  bool HasNext() const { return reader_->HasNext(); }
  // Unpinned subscribers: the last message Next()/Latest() returned is
  // still intact (check after reading it, before the next read). RT-safe.
  bool StillValid(const RawMessage& message) const;

  ChannelHandle* channel() const { return channel_; }
  // The queue index the next Next() looks at (shm::Reader::next_index):
  // right after Create(), where this subscriber starts. RT-safe.
  uint64_t next_index() const { return reader_->next_index(); }
  uint64_t total_missed() const { return reader_->total_missed() + torn_; }
  // Reads copies (SubscriberOptions::copy, or a guest's fallback).
  bool copying() const { return !copy_.empty(); }
  // Read as a guest: asked to pin, but the reader state is not writable
  // or every pinning entry was taken.
  bool guest() const { return guest_; }
  // Why, when every pinning entry was taken (the channel's own reason,
  // ChannelHandle::GuestReason(), covers the other case); else empty.
  const std::string& guest_reason() const { return guest_reason_; }
  // Pinned messages whose slot was reused before Release(): another
  // process with write access to the reader-state file cleared this
  // subscriber's pin (shm::Reader::overwritten_while_read). RT-safe.
  uint64_t overwritten_while_read() const {
    return reader_->overwritten_while_read();
  }

 private:
  RawSubscriber(ChannelHandle* channel, std::unique_ptr<shm::Reader> r,
                EndpointHooks* hooks)
      : channel_(channel), reader_(std::move(r)), hooks_(hooks) {
    if (hooks_ != nullptr) hooks_->SubscriberMade(*channel_);
  }
  ReceiveStatus Fill(shm::ReadStatus status, const shm::MessageView& view,
                     RawMessage* message);
  // Copy mode: copies view_ into copy_; false if it was overwritten meanwhile.
  bool CopyIntact();

  ChannelHandle* const channel_;
  const std::unique_ptr<shm::Reader> reader_;
  EndpointHooks* const hooks_;
  shm::MessageView view_;
  std::vector<uint64_t> copy_;  // copy mode's buffer (8-byte aligned)
  uint64_t torn_ = 0;           // copies found overwritten (lost)
  uint64_t torn_unreported_ = 0;  // ... not yet in a message's `missed`
  bool guest_ = false;
  std::string guest_reason_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_RAW_ENDPOINTS_H_
