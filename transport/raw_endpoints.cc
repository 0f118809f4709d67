#include "transport/raw_endpoints.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "shm/clock.h"
#include "transport/framing.h"
#include "util/hot_path.h"

namespace tether::transport {

const char* ToString(PublishStatus status) {
  switch (status) {
    case PublishStatus::kOk:
      return "ok";
    case PublishStatus::kTooLarge:
      return "message larger than the channel's maxSize";
    case PublishStatus::kNoLoan:
      return "no slot to build in (all slots pinned or held)";
    case PublishStatus::kCorrupt:
      return "channel shared memory is corrupt";
    case PublishStatus::kMalformed:
      return "bytes are not a valid Cap'n Proto message (framing or "
             "pointers)";
  }
  return "unknown";
}

const char* ToString(ReceiveStatus status) {
  switch (status) {
    case ReceiveStatus::kOk:
      return "ok";
    case ReceiveStatus::kNothingNew:
      return "nothing new";
    case ReceiveStatus::kCorrupt:
      return "channel shared memory is corrupt";
    case ReceiveStatus::kMalformed:
      return "message is not a valid message of the channel's type";
  }
  return "unknown";
}

absl::StatusOr<std::unique_ptr<RawPublisher>> RawPublisher::Create(
    ChannelHandle* channel, EndpointHooks* hooks) {
  absl::StatusOr<std::unique_ptr<shm::Publisher>> p =
      shm::Publisher::Create(channel->shm());
  if (!p.ok()) return p.status();
  return std::unique_ptr<RawPublisher>(
      new RawPublisher(channel, std::move(*p), hooks));
}

TETHER_HOT_PATH PublishResult RawPublisher::Send(size_t size,
                                                 const SendTimes* times,
                                                 size_t offset) {
  // Failures past this line are counted by shm::Publisher::Send.
  if (size > channel_->max_size()) {
    return CountFailure(PublishStatus::kTooLarge);
  }
  // The loop's clock unless the caller gave times (an origin alone, a
  // bridge's tag, is not times: it is kept and the times are stamped).
  SendTimes stamped;
  if (hooks_ != nullptr &&
      (times == nullptr || (times->monotonic_ns == 0 && times->realtime_ns == 0))) {
    hooks_->StampSend(&stamped);
    stamped.origin = times != nullptr ? times->origin : 0;
    times = &stamped;
  }
  shm::SendResult r = publisher_->Send(size, times, offset);
  switch (r.status) {
    case shm::SendStatus::kOk:
      return {PublishStatus::kOk, r.queue_index};
    case shm::SendStatus::kTooLarge:
      return {PublishStatus::kTooLarge};
    case shm::SendStatus::kNoLoan:
      return {PublishStatus::kNoLoan};
    case shm::SendStatus::kCorrupt:
      return {PublishStatus::kCorrupt};
  }
  return {PublishStatus::kCorrupt};
}

PublishResult RawPublisher::Publish(std::span<const std::byte> framed,
                                    const SendTimes* times) {
  // Each early return counts its failure; Send() counts its own.
  std::span<std::byte> loan = publisher_->Loan();
  if (loan.empty()) return CountFailure(PublishStatus::kNoLoan);
  if (framed.size() > channel_->max_size()) {
    return CountFailure(PublishStatus::kTooLarge);
  }
  FinishResult copied = CopyMessageIntoSlot(framed, loan, channel_->name());
  if (!copied.ok()) return CountFailure(PublishStatusOf(copied));
  uint32_t segments_minus_one = 0;
  std::memcpy(&segments_minus_one, loan.data(), sizeof(segments_minus_one));
  if (segments_minus_one != 0) return Reframe(loan, copied, times);
  // The check every typed reader makes, so that bytes with bad pointers
  // never reach them from here (they would skip them; tools would show
  // them as undecodable). Allocation-free unless it fails.
  SlotMessageReader reader(loan.first(copied.size));
  if (internal::CheckWholeMessage(reader, nullptr) != FramingStatus::kOk) {
    return {PublishStatus::kMalformed};
  }
  return Send(copied.size, times);
}

PublishResult RawPublisher::Reframe(std::span<std::byte> loan,
                                    const FinishResult& copied,
                                    const SendTimes* times) {
  // Not RT-safe (see Publish). The copy in the loan is read by Cap'n Proto
  // into the private arena (setRoot) before Finish() writes the slot: the
  // builder does not touch the slot until then.
  const std::span<std::byte> slot = loan.first(channel_->max_size() & ~size_t{7});
  SlotMessageReader reader(loan.first(copied.size));
  capnp::AnyPointer::Reader root;
  if (internal::CheckWholeMessage(reader, nullptr, &root) !=
      FramingStatus::kOk) {
    return CountFailure(PublishStatus::kMalformed);
  }
  if (reframe_arena_ == nullptr) {
    reframe_arena_ = std::make_unique<BuildArena>(channel_->max_size());
  }
  FinishResult rebuilt;
  {
    SlotMessageBuilder builder(reframe_arena_.get(), slot, channel_->name());
    try {
      builder.setRoot(root);
    } catch (const kj::Exception&) {
      return CountFailure(PublishStatus::kMalformed);
    }
    rebuilt = builder.Finish();
  }
  if (!rebuilt.ok()) return CountFailure(PublishStatusOf(rebuilt));
  return Send(rebuilt.size, times, rebuilt.offset);
}

absl::StatusOr<std::unique_ptr<RawSubscriber>> RawSubscriber::Create(
    ChannelHandle* channel, const SubscriberOptions& options,
    EndpointHooks* hooks) {
  SubscriberOptions o = options;
  bool guest = false;
  if (o.pin && channel->guest() && o.guest_fallback) {
    o.pin = false;
    o.copy = true;
    guest = true;
  }
  shm::ReaderOptions ro;
  ro.pin = o.pin;
  ro.start = o.from_oldest ? shm::ReaderOptions::Start::kOldest
                           : shm::ReaderOptions::Start::kNew;
  absl::StatusOr<std::unique_ptr<shm::Reader>> r =
      shm::Reader::Create(channel->shm(), ro);
  std::string guest_reason;
  if (!r.ok() && absl::IsResourceExhausted(r.status()) && ro.pin &&
      o.guest_fallback) {
    // Every pinning entry is taken: read, as a guest, rather than not at
    // all (a writer of the reader-state file can fill the registry).
    guest_reason = absl::StrCat(
        r.status().message(),
        "; this reader reads as a guest meanwhile: unpinned copies checked "
        "after copying");
    ro.pin = false;
    o.pin = false;
    o.copy = true;
    guest = true;
    r = shm::Reader::Create(channel->shm(), ro);
  }
  if (!r.ok()) return r.status();
  std::unique_ptr<RawSubscriber> s(
      new RawSubscriber(channel, std::move(*r), hooks));
  s->guest_ = guest;
  s->guest_reason_ = std::move(guest_reason);
  if (o.copy && !o.pin) {
    s->copy_.resize((channel->params().slot_size + 7) / 8 + 1);
  }
  return s;
}

bool RawSubscriber::CopyIntact() {
  std::memcpy(copy_.data(), view_.data.data(), view_.data.size());
  if (reader_->StillValid(view_)) {
    view_.data = {reinterpret_cast<const std::byte*>(copy_.data()),
                  view_.data.size()};
    return true;
  }
  ++torn_;
  ++torn_unreported_;
  return false;
}

ReceiveStatus RawSubscriber::Fill(shm::ReadStatus status,
                                  const shm::MessageView& view,
                                  RawMessage* message) {
  switch (status) {
    case shm::ReadStatus::kNothingNew:
      return ReceiveStatus::kNothingNew;
    case shm::ReadStatus::kCorrupt:
      return ReceiveStatus::kCorrupt;
    case shm::ReadStatus::kOk:
      break;
  }
  message->bytes = view.data;
  MessageContext& c = message->context;
  c.monotonic_send_ns = static_cast<int64_t>(view.monotonic_send_ns);
  c.realtime_send_ns = static_cast<int64_t>(view.realtime_send_ns);
  c.monotonic_receive_ns =
      hooks_ != nullptr ? hooks_->MonotonicNowNs()
                       : static_cast<int64_t>(shm::MonotonicNs());
  c.queue_index = view.queue_index;
  c.publisher_pid = view.publisher_pid;
  c.publisher_index = view.publisher_index;
  c.publisher_sequence = view.publisher_sequence;
  c.origin = view.origin;
  c.missed = view.missed + torn_unreported_;
  torn_unreported_ = 0;
  return ReceiveStatus::kOk;
}

TETHER_HOT_PATH ReceiveStatus RawSubscriber::Next(RawMessage* message) {
  // Copy mode: a message overwritten while copied is lost (counted, as
  // any overwrite); the next one is tried. Bounded: each retry is a
  // newer message, and the queue holds queue_depth of them.
  const uint64_t tries = channel_->params().queue_depth + 1;
  for (uint64_t i = 0; i < tries; ++i) {
    const shm::ReadStatus st = reader_->Next(&view_);
    if (st != shm::ReadStatus::kOk || copy_.empty() || CopyIntact()) {
      return Fill(st, view_, message);
    }
  }
  return ReceiveStatus::kNothingNew;  // a publisher outruns every copy
}

ReceiveStatus RawSubscriber::Latest(RawMessage* message) {
  for (int i = 0; i < 4; ++i) {
    const shm::ReadStatus st = reader_->Latest(&view_);
    if (st != shm::ReadStatus::kOk || copy_.empty() || CopyIntact()) {
      return Fill(st, view_, message);
    }
  }
  return ReceiveStatus::kNothingNew;
}

bool RawSubscriber::StillValid(const RawMessage& message) const {
  if (!copy_.empty()) return true;  // a private copy, checked when taken
  shm::MessageView v = view_;
  v.queue_index = message.context.queue_index;
  return reader_->StillValid(v);
}

}  // namespace tether::transport
