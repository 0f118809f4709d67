// Fuzz target: what a remote net bridge sends this host (net/), past
// Cyclone's own CDR decoding: a channel announcement (name, type id and
// name, schema blob and its hash, shape) goes through the bridge's
// acceptance (schema hash, net::OpenOrCreateFor: an existing channel is
// checked with CheckCompatible, a new one is created from the announced
// CodeGeneratorRequest), then frames' payloads are published into the
// channel as the bridge's Deliver does, read back and decoded to JSON as
// `tether echo` would. The shape is clamped to small channels (a hostile
// remote's size is a space question, not a parsing one). Oracles: an
// accepted channel is compatible with the announcement; a payload Publish
// accepts is read back byte for byte. Findings: crashes, sanitizer
// reports, escaping exceptions, a broken oracle.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "net/local_channels.h"
#include "transport/channel_handle.h"
#include "transport/dynamic.h"
#include "transport/raw_endpoints.h"
#include "tests/fuzz/fuzz_scratch.h"
#include "transport/schema_registry.h"

namespace {

namespace tn = tether::net;
namespace tr = tether::transport;

// Little-endian fields off the front of the input; zeros once it runs out.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint64_t Uint(int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes && pos_ < size_; ++i) {
      v |= uint64_t{data_[pos_++]} << (8 * i);
    }
    return v;
  }
  std::vector<std::byte> Bytes(size_t n) {
    n = std::min(n, size_ - pos_);
    std::vector<std::byte> out(n);
    if (n != 0) std::memcpy(out.data(), data_ + pos_, n);
    pos_ += n;
    return out;
  }
  std::string String(size_t n) {
    std::vector<std::byte> b = Bytes(n);
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
  }
  bool empty() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// One root for the process: a channel may be kept for the next input.
// Removed at a normal exit (the corpus test); after libFuzzer's exits,
// run_fuzz.sh removes it with its run's scratch folder.
const std::string& Root() {
  static const std::string root =
      tether::fuzz::MakeScratchDir("/dev/shm", "net");
  return root;
}


void Run(const uint8_t* data, size_t size) {
  Input in(data, size);
  const uint64_t flags = in.Uint(1);
  tn::ChannelDescription remote;
  // A few names (bit 7: one of the input's own, checked like any other).
  static const char* const kNames[] = {"/net/a", "/net/b", "/robot/state",
                                       "/x"};
  remote.name = (flags & 0x80) != 0 ? in.String(in.Uint(1) % 40)
                                    : kNames[in.Uint(1) % 4];
  remote.where = "bridge fuzz on host remote";
  remote.type_id = in.Uint(8);
  remote.type_name = in.String(in.Uint(1) % 48);
  remote.max_size = 8 + static_cast<uint32_t>(in.Uint(2));
  remote.frequency_hz = static_cast<double>(in.Uint(2));
  remote.queue_depth = 1 + static_cast<uint32_t>(in.Uint(1) % 32);
  remote.max_publishers = static_cast<uint32_t>(in.Uint(1) % 4);
  remote.max_pinned = static_cast<uint32_t>(in.Uint(1) % 4);
  remote.schema = in.Bytes(in.Uint(2));
  remote.schema_hash = tn::SchemaHash(remote.schema) ^ ((flags & 1) ? 1 : 0);
  // The bridge refuses a sender whose schema does not match its hash.
  if (tn::SchemaHash(remote.schema) != remote.schema_hash) return;

  tether::shm::ChannelOptions options;
  options.root = Root();
  options.instance = "net";
  auto channel = tn::OpenOrCreateFor(options, remote, "this host");
  if (!channel.ok()) return;
  tr::ChannelHandle& c = **channel;
  if (absl::Status s =
          tn::CheckCompatible(remote, tn::Describe(c, "this host"));
      !s.ok()) {
    std::fprintf(stderr, "accepted an incompatible channel: %s\n",
                 std::string(s.message()).c_str());
    __builtin_trap();
  }
  tr::SchemaRegistry schemas;
  std::optional<capnp::StructSchema> type;
  if (schemas.AddCodeGeneratorRequest(c.schema(), c.type_id()).ok()) {
    type = schemas.Find(c.type_id());
  }
  auto publisher = tr::RawPublisher::Create(&c);
  // A channel kept from an earlier input still holds its messages: start
  // after them.
  auto subscriber = tr::RawSubscriber::Create(&c);
  if (subscriber.ok()) {
    tr::RawMessage old;
    while ((*subscriber)->Next(&old) == tr::ReceiveStatus::kOk) {
      (*subscriber)->Release();
    }
  }
  if (publisher.ok() && subscriber.ok()) {
    while (!in.empty()) {
      std::vector<std::byte> payload = in.Bytes(in.Uint(2) % 2048);
      const tr::PublishResult p = (*publisher)->Publish(payload);
      if (p.status != tr::PublishStatus::kOk) continue;
      tr::RawMessage m;
      if ((*subscriber)->Next(&m) != tr::ReceiveStatus::kOk ||
          m.bytes.size() != payload.size() ||
          std::memcmp(m.bytes.data(), payload.data(), payload.size()) != 0) {
        std::fprintf(stderr, "a published payload did not read back\n");
        __builtin_trap();
      }
      if (type.has_value()) (void)tr::MessageToJson(*type, m.bytes);
      (*subscriber)->Release();
    }
  }
  subscriber = absl::UnknownError("");
  publisher = absl::UnknownError("");
  // Bit 1: leave the channel for the next input (which then opens it and
  // compares); else start clean.
  if ((flags & 2) == 0) {
    const std::string data_path = c.path(), state_path = c.reader_state_path();
    channel = absl::UnknownError("");
    ::unlink(data_path.c_str());
    ::unlink(state_path.c_str());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool cleaned = [] {
    // Root() first: its string must outlive the handler (statics and
    // atexit handlers run in the reverse order of their completion).
    (void)Root();
    std::atexit([] { tether::fuzz::RemoveScratchDir(Root()); });
    return true;
  }();
  (void)cleaned;
  try {
    Run(data, size);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "exception escaped: %s\n", e.what());
    __builtin_trap();  // errors are statuses, never exceptions
  } catch (...) {
    __builtin_trap();
  }
  return 0;
}
