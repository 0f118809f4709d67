// transport: typed endpoints — Publisher<T> and Subscriber<T> for a Cap'n
// Proto struct T — over the raw ones. A message is built in place in the
// loaned slot (never on the heap) and read in place, checked.
//
//   auto pub = Publisher<JointState>::Create(channel);       // setup
//   Loan<JointState> loan = (*pub)->MakeLoan();               // RT-safe
//   loan.root().setPosition(1.5);
//   PublishResult r = (*pub)->Send(std::move(loan));          // RT-safe
//
//   auto sub = Subscriber<JointState>::Create(channel);
//   Message<JointState> m;
//   if ((*sub)->Next(&m) == ReceiveStatus::kOk) use(m.root, m.context);
#ifndef TETHER_TRANSPORT_TYPED_ENDPOINTS_H_
#define TETHER_TRANSPORT_TYPED_ENDPOINTS_H_

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "capnp/schema.h"
#include "transport/channel_handle.h"
#include "transport/framing.h"
#include "transport/raw_endpoints.h"
#include "util/hot_path.h"

namespace tether::transport {

// OK if `channel` carries T, else FailedPrecondition naming both types.
template <typename T>
absl::Status CheckChannelType(const ChannelHandle& channel) {
  const uint64_t want = capnp::typeId<T>();
  if (channel.type_id() == want) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "channel %s carries %s (0x%016x), not %s (0x%016x): use the channel's "
      "type or another channel",
      channel.name(), channel.type_name(), channel.type_id(),
      capnp::Schema::from<T>().getProto().getDisplayName().cStr(), want));
}

template <typename T>
class Publisher;

namespace internal {

// The fields InitBlob(name) was last asked for, resolved
// (SlotMessageBuilder::ResolveBlobField), so that a send looks a field up
// by name and checks its kind once, not every time (Cap'n Proto's look-up
// compares names through the schema). Keys are copies of the names (up to
// kMaxName bytes; longer names are looked up every time). RT-safe after the
// first look-up of a name: a few strcmp. One thread (the publisher's).
class BlobFieldCache {
 public:
  using BlobField = SlotMessageBuilder::BlobField;

  // Invalid when S has no field `name` (or it is not a Data field).
  template <typename S>
  BlobField Find(const char* name) {
    const uint64_t type = capnp::typeId<S>();
    for (const Entry& e : entries_) {
      if (e.type == type && std::strcmp(e.name, name) == 0) return e.field;
    }
    BlobField field;
    KJ_IF_MAYBE (f, capnp::Schema::from<S>().findFieldByName(name)) {
      field = SlotMessageBuilder::ResolveBlobField(*f);
    }
    if (std::strlen(name) < kMaxName) {
      Entry& e = entries_[next_];
      next_ = (next_ + 1) % kEntries;
      e.type = type;
      std::strcpy(e.name, name);
      e.field = field;
    }
    return field;
  }

 private:
  static constexpr int kEntries = 4;
  static constexpr size_t kMaxName = 48;
  struct Entry {
    uint64_t type = 0;  // no schema has id 0: an empty entry never matches
    char name[kMaxName] = {};
    BlobField field;
  };
  Entry entries_[kEntries];
  int next_ = 0;
};

}  // namespace internal

// The message being built: move-only; at most one per publisher at a time.
// Dropping it unsent abandons the build (the slot stays the loan).
template <typename T>
class Loan {
 public:
  Loan(Loan&& other) noexcept
      : publisher_(std::exchange(other.publisher_, nullptr)),
        root_(other.root_) {}
  Loan& operator=(Loan&&) = delete;
  Loan(const Loan&) = delete;
  ~Loan();

  // The root being built (in the publisher's private arena; it lands in the
  // slot at Send()). Valid until Send(): the publisher may build its next
  // message in the same words.
  typename T::Builder root() { return root_; }
  // False when no slot could be loaned (see PublishStatus::kNoLoan).
  bool valid() const { return publisher_ != nullptr; }

  // A large Data field written in place in the slot, never zeroed or
  // copied (framing.h, "Blobs"): makes `field` of `s` (the root, or a struct
  // inside it; S is its type) a blob of `size` bytes and returns them.
  // With BlobFill::kUninitialized (the default) they hold whatever the slot
  // held: write every byte. Do not read or set the field through Cap'n Proto
  // afterwards. Empty span if `field` is not a Data field of S (outside a
  // union), the message
  // has SlotMessageBuilder::kMaxBlobs blobs, or they do not fit (Send() then
  // reports kMalformed or kTooLarge; last_finish() says why). RT-safe.
  template <typename S>
  std::span<std::byte> InitBlob(typename S::Builder s, const char* field,
                                size_t size,
                                BlobFill fill = BlobFill::kUninitialized);
  // The same for a Data field of the root.
  std::span<std::byte> InitBlob(const char* field, size_t size,
                                BlobFill fill = BlobFill::kUninitialized) {
    return InitBlob<T>(root_, field, size, fill);
  }

 private:
  friend class Publisher<T>;
  Loan(Publisher<T>* publisher, typename T::Builder root)
      : publisher_(publisher), root_(root) {}
  Publisher<T>* publisher_;
  typename T::Builder root_;
};

// Not copyable or movable; one thread at a time (one publisher per thread).
// Destroy it before its ChannelHandle (and, when an event loop made it,
// before that loop).
//
// A failed send is counted once in the channel's shared per-publisher
// send_failures (RawPublisher::send_failures(); what `tether list`/`stat`,
// EventLoop::Peers() and the demo's monitor read), whichever layer found
// it: MakeLoan() that finds no slot, Send() whose build outgrew the slot or
// was malformed, or the raw and shm sends below.
template <typename T>
class Publisher {
 public:
  // FailedPrecondition if the channel carries another type; the raw
  // publisher's errors otherwise. Setup only.
  static absl::StatusOr<std::unique_ptr<Publisher>> Create(
      ChannelHandle* channel, EndpointHooks* hooks = nullptr) {
    if (absl::Status s = CheckChannelType<T>(*channel); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<RawPublisher>> raw =
        RawPublisher::Create(channel, hooks);
    if (!raw.ok()) return raw.status();
    return std::unique_ptr<Publisher>(new Publisher(std::move(*raw)));
  }

  Publisher(const Publisher&) = delete;
  Publisher& operator=(const Publisher&) = delete;

  // Starts a message for the loaned slot, built in this publisher's private
  // arena (framing.h). An invalid loan (valid() false) when no slot can be
  // had (every slot pinned or held): that send has failed with kNoLoan and
  // is counted in send_failures() here, once (a Send() of the invalid loan
  // counts nothing more). RT-safe: no allocation, no lock (one relaxed
  // atomic add when it fails). When the last message sent was its root
  // struct alone (scalars, blobs: SlotMessageBuilder::Reuse()), the same
  // builder goes on with the root zeroed; otherwise a new builder zeroes
  // the words the previous message used. Aborts if a loan is already out
  // (misuse: build one message at a time).
  TETHER_HOT_PATH Loan<T> MakeLoan() {
    if (loan_out_) {
      std::fprintf(stderr, "tether: Publisher<T>::MakeLoan on %s while a loan "
                   "is out: send or drop it first\n",
                   raw_->channel()->name().c_str());
      std::abort();
    }
    std::span<std::byte> slot = raw_->Loan();
    if (slot.empty()) {
      (void)raw_->CountFailure(PublishStatus::kNoLoan);
      return Loan<T>(nullptr, typename T::Builder(nullptr));
    }
    slot = slot.first(raw_->channel()->max_size() & ~size_t{7});
    if (!builder_.has_value() || !builder_->Reuse(slot)) {
      builder_.reset();
      builder_.emplace(&arena_, slot, raw_->channel()->name());
      root_ = builder_->template initRoot<T>();
    }
    loan_out_ = true;
    return Loan<T>(this, root_);
  }

  // Finishes and commits the loan's message. kTooLarge if it outgrew the
  // slot, kMalformed if an InitBlob() was given a field that is not a Data
  // field or the message refers to external data (bytes outside the slot)
  // (the build is dropped either way; last_finish().ErrorMessage() says by
  // how much or which); kNoLoan for an invalid loan or one of
  // another publisher. Each failure is counted once in send_failures(): an
  // invalid loan's by MakeLoan() (not again here), a failed build's or a
  // foreign loan's here, the commit's by RawPublisher::Send(). RT-safe for
  // messages that fit (counting is one relaxed atomic add; an overflowing
  // build is an error path that allocated while it was built, framing.h).
  TETHER_HOT_PATH PublishResult Send(Loan<T>&& loan,
                                     const SendTimes* times = nullptr) {
    if (loan.publisher_ == nullptr) return {PublishStatus::kNoLoan};
    if (loan.publisher_ != this || !loan_out_) {
      return raw_->CountFailure(PublishStatus::kNoLoan);
    }
    loan.publisher_ = nullptr;
    loan_out_ = false;
    FinishResult finished = builder_->Finish();
    last_finish_ = finished;
    if (!finished.ok()) {
      builder_.reset();
      return raw_->CountFailure(PublishStatusOf(finished));
    }
    return raw_->Send(finished.size, times, finished.offset);
  }

  // The last Send()'s framing result: for an overflow, ErrorMessage() names
  // the channel, its maxSize and the size needed.
  const FinishResult& last_finish() const { return last_finish_; }
  RawPublisher* raw() const { return raw_.get(); }

 private:
  friend class Loan<T>;
  explicit Publisher(std::unique_ptr<RawPublisher> raw)
      : raw_(std::move(raw)), arena_(raw_->channel()->max_size()) {}
  // A dropped loan: its build is discarded (the next MakeLoan() makes a
  // new builder, which zeroes what it wrote).
  void Abandon() {
    builder_.reset();
    loan_out_ = false;
  }

  std::unique_ptr<RawPublisher> raw_;
  BuildArena arena_;
  // The loan's builder while one is out; between loans, the last message's
  // (kept for SlotMessageBuilder::Reuse()) or none.
  std::optional<SlotMessageBuilder> builder_;
  typename T::Builder root_{nullptr};  // builder_'s root
  bool loan_out_ = false;
  FinishResult last_finish_;
  internal::BlobFieldCache blob_fields_;
};

template <typename T>
Loan<T>::~Loan() {
  if (publisher_ != nullptr) publisher_->Abandon();
}

template <typename T>
template <typename S>
std::span<std::byte> Loan<T>::InitBlob(typename S::Builder s,
                                       const char* field, size_t size,
                                       BlobFill fill) {
  if (publisher_ == nullptr) return {};
  // An unknown name resolves to an invalid field: Finish() says so.
  return publisher_->builder_->InitBlob(
      s, publisher_->blob_fields_.template Find<S>(field), size, fill);
}

// A received message: the root read in place and its context. Valid until
// the subscriber's next read or Release().
template <typename T>
struct Message {
  typename T::Reader root;
  MessageContext context;
  std::span<const std::byte> bytes;
};

// Not copyable or movable; one thread at a time. Destroy it before its
// ChannelHandle.
template <typename T>
class Subscriber {
 public:
  // FailedPrecondition if the channel carries another type (both names);
  // InvalidArgument unless options.pin (typed reads are in place); the raw
  // subscriber's errors otherwise. `channel` and `hooks` (may be null) must
  // outlive it. Setup only.
  static absl::StatusOr<std::unique_ptr<Subscriber>> Create(
      ChannelHandle* channel, const SubscriberOptions& options = {},
      EndpointHooks* hooks = nullptr) {
    if (absl::Status s = CheckChannelType<T>(*channel); !s.ok()) return s;
    if (!options.pin) {
      return absl::InvalidArgumentError(
          "typed subscribers read in place and must pin (options.pin)");
    }
    absl::StatusOr<std::unique_ptr<RawSubscriber>> raw =
        RawSubscriber::Create(channel, options, hooks);
    if (!raw.ok()) return raw.status();
    return std::unique_ptr<Subscriber>(new Subscriber(std::move(*raw)));
  }

  Subscriber(const Subscriber&) = delete;
  Subscriber& operator=(const Subscriber&) = delete;

  // The next message, checked (every pointer bounds-checked) and read in
  // place. kMalformed: this message's bytes are invalid; it is skipped
  // (counted in malformed(), reported to the hooks: an event loop logs one
  // line per channel) and the next call moves on. RT-safe for valid
  // messages (O(message size) check, no allocation); a malformed one takes
  // the check's failure path (framing.h), which may allocate, also inside a
  // RealtimeScope under the allocation checker.
  ReceiveStatus Next(Message<T>* out) { return Take(raw_->Next(&raw_msg_), out); }
  // The newest message if newer than the cursor.
  ReceiveStatus Latest(Message<T>* out) {
    return Take(raw_->Latest(&raw_msg_), out);
  }
  // Runs fn(root) on the message the last Next() or Latest() returned, as
  // a typed watcher runs its callback: the check cannot see a pointer of
  // the wrong kind for its field (in bounds), which throws kj::Exception
  // when fn reads that field. Here that becomes kMalformed: counted in
  // malformed(), reported as a failed check is, the message released (what
  // fn did before that read stays done), and the Message<T> that Next()
  // filled must not be read after. kNothingNew when no message is held
  // (before any Next(), after Release() or a kMalformed). fn must not call
  // Next(), Latest() or Release() on this subscriber. Reading `root`
  // outside Read() is as fast, but such a throw reaches the caller (and, in
  // a real-time scope under the allocation checker, aborts: the exception
  // allocates). RT-safe when fn is; fn runs in a failure-path scope
  // (framing.h, ReadChecked()).
  template <typename Fn>
  ReceiveStatus Read(Fn&& fn) {
    if (!reader_.has_value()) return ReceiveStatus::kNothingNew;
    const FramingStatus status =
        ReadChecked(root_, std::forward<Fn>(fn), &why_,
                    [this] { Malformed(); });
    return status == FramingStatus::kOk ? ReceiveStatus::kOk
                                        : ReceiveStatus::kMalformed;
  }
  // Unpins the last message (its root must not be read after). RT-safe.
  void Release() {
    reader_.reset();
    raw_->Release();
  }
  RawSubscriber* raw() const { return raw_.get(); }
  // Messages skipped as kMalformed so far. RT-safe.
  uint64_t malformed() const { return malformed_; }

 private:
  explicit Subscriber(std::unique_ptr<RawSubscriber> raw) : raw_(std::move(raw)) {}

  // The held message failed (its check, or a read in Read()): counted,
  // reported, its reader freed in a failed scope, the message released.
  void Malformed() {
    ++malformed_;
    DiscardAfterFailure(reader_);
    raw_->ReportMalformed(raw_msg_, why_);
    raw_->Release();
  }

  ReceiveStatus Take(ReceiveStatus status, Message<T>* out) {
    reader_.reset();
    if (status != ReceiveStatus::kOk) return status;
    reader_.emplace(raw_msg_.bytes);
    RootResult<T> root = CheckedRoot<T>(*reader_, &why_);
    if (!root.ok()) {
      Malformed();
      return ReceiveStatus::kMalformed;
    }
    root_ = out->root = root.root;
    out->context = raw_msg_.context;
    out->bytes = raw_msg_.bytes;
    return ReceiveStatus::kOk;
  }

  std::unique_ptr<RawSubscriber> raw_;
  RawMessage raw_msg_;
  std::optional<SlotMessageReader> reader_;
  typename T::Reader root_;  // of reader_, while it holds a message
  uint64_t malformed_ = 0;
  // Why the last malformed message failed: written on the failure path
  // only, kept (freeing it in a real-time scope would abort the checker).
  std::string why_;
};

}  // namespace tether::transport

#endif  // TETHER_TRANSPORT_TYPED_ENDPOINTS_H_
