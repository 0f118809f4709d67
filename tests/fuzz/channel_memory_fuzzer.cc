// Fuzz target: a channel's shared memory as hostile input. The input is a
// program: each step either writes bytes somewhere in the channel's two
// files (header, publisher registry, ring, slot headers, payloads, reader
// registry, pin words, sleeper registry and mask) or runs an operation on
// the channel: a publisher's loan and send, a pinned reader's Next/Latest/
// Release, an unpinned fetch (copy, then StillValid), the sleep protocol
// (announce, load the word, re-check, FUTEX_WAIT with a zero timeout), a
// sweep, the consistency check, and fresh handles on the same files. The
// sanitizers catch any access outside the mappings; the checks below catch
// a view outside its slot, a publisher that faults or a corruption that is
// not reported. Every loop in shm is bounded, so a hang is a finding too
// (libFuzzer's -timeout).
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "shm/channel.h"
#include "shm/channel_access.h"
#include "shm/futex.h"
#include "shm/layout.h"
#include "shm/publisher.h"
#include "shm/reader.h"
#include "tests/fuzz/fuzz_scratch.h"

namespace tether::shm {
namespace {

namespace in = internal;

constexpr QueueParams kParams{.slot_size = 96, .queue_depth = 8,
                              .max_publishers = 2, .max_pinned = 3};

// Reads the program.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t Byte() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint64_t Word() {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{Byte()} << (8 * i);
    return v;
  }
  uint32_t Below(uint32_t n) {
    const uint32_t v = Byte() | uint32_t{Byte()} << 8 | uint32_t{Byte()} << 16;
    return n == 0 ? 0 : v % n;
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// Values that stress bounds checks more than noise does.
uint64_t Adversarial(Input& in) {
  switch (in.Byte() % 10) {
    case 0: return 0;
    case 1: return ~uint64_t{0};
    case 2: return in::kEmpty;
    case 3: return in::MakeEntry(in.Word(), in.Below(1u << 24));
    case 4: return in.Byte() % 64;
    case 5: return kParams.pool_size() + in.Byte() % 8;
    case 6: return in::Pending(in.Byte() % 4, in.Word());
    case 7: return in::Owned(in.Byte() % 4);
    case 8: return uint64_t{1} << (in.Byte() % 64);
    default: return in.Word();
  }
}

struct Handles {
  std::unique_ptr<Channel> channel;
  std::unique_ptr<Publisher> publisher;
  std::unique_ptr<Reader> pinned;
  std::unique_ptr<Reader> unpinned;
  std::unique_ptr<Sleeper> sleeper;
};

Handles Open(const ChannelOptions& options, bool create) {
  Handles h;
  auto c = create ? Channel::OpenOrCreate(options, "/fuzz", kParams)
                  : Channel::Open(options, "/fuzz");
  if (!c.ok()) return h;
  h.channel = std::move(*c);
  if (auto p = Publisher::Create(h.channel.get()); p.ok()) {
    h.publisher = std::move(*p);
  }
  if (auto r = Reader::Create(h.channel.get(), {.pin = true}); r.ok()) {
    h.pinned = std::move(*r);
  }
  if (auto r = Reader::Create(h.channel.get(),
                              {.pin = false,
                               .start = ReaderOptions::Start::kOldest});
      r.ok()) {
    h.unpinned = std::move(*r);
  }
  h.sleeper = std::make_unique<Sleeper>(h.channel->RegisterSleeper());
  return h;
}

// A view must lie inside its slot's payload, whatever the memory said.
void CheckView(const Channel& c, const MessageView& v) {
  if (v.slot >= kParams.pool_size()) std::abort();
  const std::byte* slot = in::ChannelAccess::payload(c, v.slot);
  if (v.data.data() < slot ||
      v.data.data() + v.data.size() > slot + kParams.slot_size) {
    std::abort();
  }
}

uint64_t Sum(std::span<const std::byte> data) {
  uint64_t s = 0;
  for (std::byte b : data) s += static_cast<uint8_t>(b);
  return s;
}

void WriteInto(std::byte* base, uint64_t size, Input& in) {
  const uint64_t off = in.Word() % size;
  if (in.Byte() % 2 == 0 && off + 8 <= size) {
    const uint64_t v = Adversarial(in);
    std::memcpy(base + (off & ~uint64_t{7}), &v, 8);
  } else {
    base[off] = static_cast<std::byte>(in.Byte());
  }
}

void Step(Handles& h, const ChannelOptions& options, Input& in) {
  Channel& c = *h.channel;
  auto* data = reinterpret_cast<std::byte*>(in::ChannelAccess::header(c));
  auto* state = reinterpret_cast<std::byte*>(in::ChannelAccess::state_header(c));
  const uint64_t data_size = in::Layout::For(kParams, c.metadata().size()).total;
  const uint64_t state_size = in::StateLayout::For(kParams).total;
  volatile uint64_t sink = 0;
  MessageView v;
  switch (in.Byte() % 16) {
    case 0:
    case 1:
      WriteInto(data, data_size, in);
      break;
    case 2:
      WriteInto(state, state_size, in);
      break;
    case 3:
    case 4:
      if (h.publisher) {
        std::span<std::byte> loan = h.publisher->Loan();
        const size_t n = in.Below(kParams.slot_size + 16);
        if (!loan.empty()) {
          if (loan.size() != kParams.slot_size) std::abort();
          std::memset(loan.data(), in.Byte(), std::min<size_t>(n, loan.size()));
        }
        const SendResult r = h.publisher->Send(n, nullptr, 8 * in.Below(4));
        if (r.status == SendStatus::kCorrupt && !c.corrupt()) std::abort();
      }
      break;
    case 5:
      if (h.pinned) {
        const ReadStatus s = h.pinned->Next(&v);
        if (s == ReadStatus::kOk) {
          CheckView(c, v);
          sink += Sum(v.data);
        }
        if (s == ReadStatus::kCorrupt && !c.corrupt()) std::abort();
      }
      break;
    case 6:
      if (h.pinned) {
        if (h.pinned->Latest(&v) == ReadStatus::kOk) {
          CheckView(c, v);
          sink += Sum(v.data);
        }
      }
      break;
    case 7:
      if (h.pinned) h.pinned->Release();
      break;
    case 8:
      if (h.unpinned) {
        std::byte copy[kParams.slot_size];
        if (h.unpinned->Next(&v) == ReadStatus::kOk) {
          CheckView(c, v);
          std::memcpy(copy, v.data.data(), v.data.size());
          sink += h.unpinned->StillValid(v) ? Sum({copy, v.data.size()}) : 0;
        }
      }
      break;
    case 9: {
      // The sleep protocol with a zero timeout: must never block.
      h.sleeper->BeginSleep();
      const uint32_t word = c.LoadWakeWord();
      const bool ready = (h.pinned && h.pinned->HasNext()) ||
                         (h.unpinned && h.unpinned->HasNext());
      if (!ready) {
        struct timespec zero = {0, 0};
        FutexWait(c.wake_word(), word, &zero);
      }
      h.sleeper->EndSleep();
      break;
    }
    case 10:
      (void)c.Sweep();
      break;
    case 11:
      (void)c.CheckConsistency();
      (void)c.Stats();
      break;
    case 12: {
      // Fresh handles on the same (possibly corrupt) files; they must open
      // or fail with an error, never crash.
      Handles fresh = Open(options, /*create=*/false);
      if (fresh.channel) {
        Input sub = in;
        for (int i = 0; i < 4 && !sub.empty(); ++i) {
          const uint8_t op = sub.Byte();
          if (op % 3 == 0 && fresh.publisher) {
            (void)fresh.publisher->Send(8);
          } else if (op % 3 == 1 && fresh.pinned) {
            if (fresh.pinned->Next(&v) == ReadStatus::kOk) {
              CheckView(*fresh.channel, v);
            }
          } else {
            (void)fresh.channel->Sweep();
          }
        }
      }
      break;
    }
    case 13:
      // Drop and re-create the pinned reader (release, re-register).
      h.pinned.reset();
      if (auto r = Reader::Create(&c, {.pin = true}); r.ok()) {
        h.pinned = std::move(*r);
      }
      break;
    case 14:
      h.publisher.reset();
      if (auto p = Publisher::Create(&c); p.ok()) h.publisher = std::move(*p);
      break;
    default:
      c.WakeAll();
      break;
  }
  (void)sink;
}

}  // namespace
}  // namespace tether::shm

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tether::shm;
  // A root of its own for each input, removed after it: nothing is left
  // behind between inputs (after a kill mid-input, run_fuzz.sh removes it
  // with its run's scratch folder).
  ChannelOptions options;
  options.root = tether::fuzz::MakeScratchDir("/dev/shm", "channel");
  options.instance = "i";
  Input in(data, size);
  {
    Handles h = Open(options, /*create=*/true);
    if (!h.channel) std::abort();  // a fresh channel must open
    for (int steps = 0; steps < 256 && !in.empty(); ++steps) {
      Step(h, options, in);
    }
    // Whatever happened: the handles still answer without crashing.
    (void)h.channel->CheckConsistency();
    (void)h.channel->Sweep();
  }
  tether::fuzz::RemoveScratchDir(options.root);
  return 0;
}
