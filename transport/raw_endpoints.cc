#include "transport/raw_endpoints.h"

#include "absl/strings/str_cat.h"
#include "shm/clock.h"
#include "transport/framing.h"

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
      return "bytes are not a framed Cap'n Proto message";
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

PublishResult RawPublisher::Send(size_t size, const SendTimes* times,
                                 size_t offset) {
  if (size > channel_->max_size()) return {PublishStatus::kTooLarge};
  SendTimes stamped;
  if (hooks_ != nullptr && times == nullptr) {
    hooks_->StampSend(&stamped);
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
  std::span<std::byte> loan = publisher_->Loan();
  if (loan.empty()) return {PublishStatus::kNoLoan};
  if (framed.size() > channel_->max_size()) return {PublishStatus::kTooLarge};
  FinishResult copied = CopyMessageIntoSlot(framed, loan, channel_->name());
  if (copied.status == FramingStatus::kOverflow) return {PublishStatus::kTooLarge};
  if (!copied.ok()) return {PublishStatus::kMalformed};
  return Send(copied.size, times);
}

absl::StatusOr<std::unique_ptr<RawSubscriber>> RawSubscriber::Create(
    ChannelHandle* channel, const SubscriberOptions& options,
    EndpointHooks* hooks) {
  shm::ReaderOptions ro;
  ro.pin = options.pin;
  ro.start = options.from_oldest ? shm::ReaderOptions::Start::kOldest
                                 : shm::ReaderOptions::Start::kNew;
  absl::StatusOr<std::unique_ptr<shm::Reader>> r =
      shm::Reader::Create(channel->shm(), ro);
  if (!r.ok()) return r.status();
  return std::unique_ptr<RawSubscriber>(
      new RawSubscriber(channel, std::move(*r), hooks));
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
  c.missed = view.missed;
  return ReceiveStatus::kOk;
}

ReceiveStatus RawSubscriber::Next(RawMessage* message) {
  return Fill(reader_->Next(&view_), view_, message);
}

ReceiveStatus RawSubscriber::Latest(RawMessage* message) {
  return Fill(reader_->Latest(&view_), view_, message);
}

bool RawSubscriber::StillValid(const RawMessage& message) const {
  shm::MessageView v = view_;
  v.queue_index = message.context.queue_index;
  return reader_->StillValid(v);
}

}  // namespace tether::transport
