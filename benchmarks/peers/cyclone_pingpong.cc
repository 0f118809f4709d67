// Cyclone DDS 0.10 (Debian, C API) in the bench protocol: one participant
// per process, a reliable volatile KEEP_LAST topic per payload size
// (benchmarks/peers/bench_payload.idl: fixed-size types), readers waited on
// in a dds_waitset with a read condition and taken as loans.
//
//   --variant=net   (default) RTPS over UDP on the interface CYCLONEDDS_URI
//                   names (`./tether bench` pins it to lo): every byte is
//                   serialized and copied through the kernel.
//   --variant=shm   Cyclone's iceoryx shared memory (CYCLONEDDS_URI enables
//                   SharedMemory; needs iox-roudi): the writer loans the
//                   sample (dds_loan_sample) and writes 16 bytes or all of it
//                   in place; readers take it in place. The runner fails if
//                   Cyclone falls back to the network for any endpoint.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "benchmarks/harness/protocol.h"
#include "benchmarks/harness/supervisor.h"
#include "benchmarks/peers/bench_payload.h"
#include "dds/dds.h"
#include "dds/ddsc/dds_loan_api.h"

namespace tether::bench {
namespace {

// History depth: a ping-pong has one message in flight; a throughput
// reader gets a deep history over the network, and over shared memory the
// most Cyclone allows there (it must not exceed the iceoryx history request,
// 16 by default and at most).
int HistoryFor(const Session& s) {
  return s.test == Test::kThroughput && s.variant != "shm" ? 1024 : 16;
}

const dds_topic_descriptor_t* DescriptorFor(uint32_t payload) {
  switch (payload) {
    case 64:
      return &tether_bench_Payload64_desc;
    case 4096:
      return &tether_bench_Payload4K_desc;
    case 65536:
      return &tether_bench_Payload64K_desc;
    case 1048576:
      return &tether_bench_Payload1M_desc;
    case 4194304:
      return &tether_bench_Payload4M_desc;
  }
  return nullptr;
}

absl::Status DdsError(const std::string& what, dds_return_t rc) {
  return absl::InternalError(
      absl::StrCat(what, " failed: ", dds_strretcode(rc)));
}

// Every payload size of the session, smallest (the stop messages') first.
std::vector<uint32_t> Sizes(const Session& s) {
  std::vector<uint32_t> sizes = {kMinPayload};
  if (s.test == Test::kThroughput) {
    if (s.throughput_payload != kMinPayload) {
      sizes.push_back(s.throughput_payload);
    }
    return sizes;
  }
  for (const Case& c : s.cases) {
    bool have = false;
    for (uint32_t x : sizes) have |= x == c.payload;
    if (!have) sizes.push_back(c.payload);
  }
  return sizes;
}

// A participant and, per payload size, the topics, writers and readers one
// process uses. Deleting the participant deletes everything in it.
class Node {
 public:
  ~Node() {
    if (participant_ > 0) dds_delete(participant_);
  }

  absl::Status Init(const Session& s) {
    shm_ = s.variant == "shm";
    if (!s.variant.empty() && s.variant != "net" && !shm_) {
      return absl::InvalidArgumentError(
          absl::StrCat("--variant=", s.variant, ": use net or shm"));
    }
    if (std::getenv("CYCLONEDDS_URI") == nullptr) {
      return absl::FailedPreconditionError(
          "CYCLONEDDS_URI is not set: refusing to run Cyclone DDS on its "
          "default interface (it would multicast on the LAN); `./tether "
          "bench` pins it to lo");
    }
    for (uint32_t size : Sizes(s)) {
      if (DescriptorFor(size) == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "payload ", size,
            " has no IDL type; bench_payload.idl has 64, 4096, 65536, "
            "1048576 and 4194304"));
      }
    }
    participant_ = dds_create_participant(DDS_DOMAIN_DEFAULT, nullptr, nullptr);
    if (participant_ < 0) return DdsError("dds_create_participant", participant_);
    qos_ = dds_create_qos();
    dds_qset_reliability(qos_, DDS_RELIABILITY_RELIABLE, DDS_SECS(1));
    history_ = HistoryFor(s);
    dds_qset_history(qos_, DDS_HISTORY_KEEP_LAST, history_);
    dds_qset_durability(qos_, DDS_DURABILITY_VOLATILE);
    waitset_ = dds_create_waitset(participant_);
    if (waitset_ < 0) return DdsError("dds_create_waitset", waitset_);
    return absl::OkStatus();
  }

  absl::StatusOr<dds_entity_t> Topic(const std::string& name, uint32_t size) {
    const std::string full = absl::StrCat(name, "_", size);
    auto it = topics_.find(full);
    if (it != topics_.end()) return it->second;
    const dds_entity_t t = dds_create_topic(participant_, DescriptorFor(size),
                                            full.c_str(), qos_, nullptr);
    if (t < 0) return DdsError("dds_create_topic " + full, t);
    topics_[full] = t;
    return t;
  }

  absl::StatusOr<dds_entity_t> Writer(const std::string& name, uint32_t size) {
    absl::StatusOr<dds_entity_t> t = Topic(name, size);
    if (!t.ok()) return t.status();
    const dds_entity_t w = dds_create_writer(participant_, *t, qos_, nullptr);
    if (w < 0) return DdsError("dds_create_writer", w);
    if (shm_ && !dds_is_loan_available(w)) {
      return absl::FailedPreconditionError(
          "Cyclone did not enable shared memory for a writer (is iox-roudi "
          "running and SharedMemory enabled in CYCLONEDDS_URI?)");
    }
    return w;
  }

  // A reader attached to the waitset under `key`.
  absl::StatusOr<dds_entity_t> Reader(const std::string& name, uint32_t size,
                                      dds_attach_t key) {
    absl::StatusOr<dds_entity_t> t = Topic(name, size);
    if (!t.ok()) return t.status();
    const dds_entity_t r = dds_create_reader(participant_, *t, qos_, nullptr);
    if (r < 0) return DdsError("dds_create_reader", r);
    if (shm_ && !dds_is_shared_memory_available(r)) {
      return absl::FailedPreconditionError(
          "Cyclone did not enable shared memory for a reader");
    }
    const dds_entity_t cond = dds_create_readcondition(r, DDS_ANY_STATE);
    if (cond < 0) return DdsError("dds_create_readcondition", cond);
    if (dds_return_t rc = dds_waitset_attach(waitset_, cond, key); rc < 0) {
      return DdsError("dds_waitset_attach", rc);
    }
    return r;
  }

  // Writes a `size`-byte sample filled by `fill`: a loan in shared memory,
  // else this node's buffer for that size.
  template <typename Fill>
  absl::Status Write(dds_entity_t writer, uint32_t size, Fill&& fill) {
    void* sample = nullptr;
    if (shm_) {
      if (dds_return_t rc = dds_loan_sample(writer, &sample); rc < 0) {
        return DdsError("dds_loan_sample", rc);
      }
    } else {
      std::vector<std::byte>& b = buffers_[size];
      if (b.size() != size) b.assign(size, std::byte{0});
      sample = b.data();
    }
    fill(absl::Span<std::byte>(static_cast<std::byte*>(sample), size));
    if (dds_return_t rc = dds_write(writer, sample); rc < 0) {
      return DdsError("dds_write", rc);
    }
    return absl::OkStatus();
  }

  // Waits for data; calls on_sample(key, header) for each sample taken.
  template <typename OnSample>
  absl::Status WaitAndTake(const std::map<dds_attach_t, dds_entity_t>& readers,
                           OnSample&& on_sample) {
    dds_attach_t triggered[64];
    const dds_return_t n =
        dds_waitset_wait(waitset_, triggered, 64, DDS_INFINITY);
    if (n < 0) return DdsError("dds_waitset_wait", n);
    for (int i = 0; i < n && i < 64; ++i) {
      auto it = readers.find(triggered[i]);
      if (it == readers.end()) continue;
      for (;;) {
        void* samples[1] = {nullptr};
        dds_sample_info_t info;
        const dds_return_t got = dds_take(it->second, samples, &info, 1, 1);
        if (got <= 0) break;
        if (info.valid_data) {
          on_sample(it->first,
                    ReadHeader(absl::Span<const std::byte>(
                        static_cast<const std::byte*>(samples[0]),
                        sizeof(Header))));
        }
        dds_return_loan(it->second, samples, got);
      }
    }
    return absl::OkStatus();
  }

  bool shm() const { return shm_; }
  int history() const { return history_; }

 private:
  dds_entity_t participant_ = 0;
  dds_entity_t waitset_ = 0;
  dds_qos_t* qos_ = nullptr;
  bool shm_ = false;
  int history_ = 16;
  std::map<std::string, dds_entity_t> topics_;
  std::map<uint32_t, std::vector<std::byte>> buffers_;
};

int32_t Matched(dds_entity_t entity, bool writer) {
  if (writer) {
    dds_publication_matched_status_t st;
    return dds_get_publication_matched_status(entity, &st) == 0
               ? static_cast<int32_t>(st.current_count)
               : -1;
  }
  dds_subscription_matched_status_t st;
  return dds_get_subscription_matched_status(entity, &st) == 0
             ? static_cast<int32_t>(st.current_count)
             : -1;
}

absl::Status AwaitMatched(const std::vector<dds_entity_t>& entities,
                          bool writers, int count, const std::string& what) {
  return WaitUntil(
      [&] {
        for (dds_entity_t e : entities) {
          if (Matched(e, writers) < count) return false;
        }
        return true;
      },
      std::chrono::seconds(30), what);
}

std::string Info(const Node& node) {
  return node.shm()
             ? absl::StrCat("iceoryx shared memory, loaned samples, reliable "
                            "KEEP_LAST(",
                            node.history(), "), waitset + read condition")
             : absl::StrCat("RTPS/UDP on lo, reliable KEEP_LAST(",
                            node.history(),
                            "), waitset + read condition, loaned takes");
}

// Topic names carry the session's run id: two benches that picked the same
// domain still never match each other's endpoints.
std::string PingTopic(const Session& s) {
  return absl::StrCat("bench_ping_", s.run_id);
}
std::string PongTopic(const Session& s, int i) {
  return absl::StrCat("bench_pong", i, "_", s.run_id);
}

absl::Status Ping(const Session& s, Board* board) {
  Node node;
  if (absl::Status st = node.Init(s); !st.ok()) return st;
  board->SetInfo(Info(node));
  std::map<uint32_t, dds_entity_t> writers;
  std::map<dds_attach_t, dds_entity_t> readers;
  std::vector<dds_entity_t> all_writers, all_readers;
  for (uint32_t size : Sizes(s)) {
    absl::StatusOr<dds_entity_t> w = node.Writer(PingTopic(s), size);
    if (!w.ok()) return w.status();
    writers[size] = *w;
    all_writers.push_back(*w);
    for (int i = 0; i < s.pongs; ++i) {
      // Key: pong index in the low byte.
      const dds_attach_t key = (static_cast<dds_attach_t>(size) << 8) | i;
      absl::StatusOr<dds_entity_t> r = node.Reader(PongTopic(s, i), size, key);
      if (!r.ok()) return r.status();
      readers[key] = *r;
      all_readers.push_back(*r);
    }
  }
  if (absl::Status st = WaitForPongs(board, s.pongs, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = AwaitMatched(all_writers, true, s.pongs,
                                     "every ponger to match the ping writers");
      !st.ok()) {
    return st;
  }
  if (absl::Status st =
          AwaitMatched(all_readers, false, 1, "the reply readers to match");
      !st.ok()) {
    return st;
  }
  PingDriver driver(s, board);
  for (;;) {
    const PingDriver::Outgoing o = driver.Next();
    absl::Status st =
        node.Write(writers[o.size], o.size, [&](absl::Span<std::byte> b) {
          driver.Write(b, o);
          driver.BeforeSend();
        });
    driver.AfterSend();
    if (!st.ok()) return st;
    if (o.kind == PingDriver::Kind::kTerminate) {
      ::usleep(200000);  // reliable delivery of the last message
      return absl::OkStatus();
    }
    bool complete = false;
    while (!complete) {
      st = node.WaitAndTake(readers, [&](dds_attach_t key, const Header& h) {
        complete |= driver.Reply(static_cast<int>(key & 0xff), h);
      });
      if (!st.ok()) return st;
    }
  }
}

absl::Status Pong(const Session& s, Board* board, int index) {
  Node node;
  if (absl::Status st = node.Init(s); !st.ok()) return st;
  std::map<uint32_t, dds_entity_t> writers;
  std::map<dds_attach_t, dds_entity_t> readers;
  std::vector<dds_entity_t> all_writers, all_readers;
  for (uint32_t size : Sizes(s)) {
    absl::StatusOr<dds_entity_t> w = node.Writer(PongTopic(s, index), size);
    if (!w.ok()) return w.status();
    writers[size] = *w;
    all_writers.push_back(*w);
    absl::StatusOr<dds_entity_t> r = node.Reader(PingTopic(s), size, size);
    if (!r.ok()) return r.status();
    readers[size] = *r;
    all_readers.push_back(*r);
  }
  if (absl::Status st = AwaitMatched(all_readers, false, 1,
                                     "the ping writers to match");
      !st.ok()) {
    return st;
  }
  if (absl::Status st =
          AwaitMatched(all_writers, true, 1, "the pinger's reply readers");
      !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  PongDriver driver(s, board, index);
  bool exit = false;
  absl::Status failure;
  while (!exit) {
    absl::Status st = node.WaitAndTake(readers, [&](dds_attach_t,
                                                    const Header& h) {
      const PongDriver::Action a = driver.OnMessage(
          absl::Span<const std::byte>(reinterpret_cast<const std::byte*>(&h),
                                      sizeof(h)));
      if (a.kind == PongDriver::Kind::kExit) exit = true;
      if (a.kind != PongDriver::Kind::kReply || !failure.ok()) return;
      failure = node.Write(writers[a.size], a.size,
                           [&](absl::Span<std::byte> b) { driver.Write(b, a); });
    });
    if (!st.ok()) return st;
    if (!failure.ok()) return failure;
  }
  return absl::OkStatus();
}

absl::Status Publisher(const Session& s, Board* board) {
  Node node;
  if (absl::Status st = node.Init(s); !st.ok()) return st;
  board->SetInfo(Info(node));
  board->queue_depth = node.history();
  std::map<uint32_t, dds_entity_t> writers;
  std::vector<dds_entity_t> all;
  for (uint32_t size : Sizes(s)) {
    absl::StatusOr<dds_entity_t> w = node.Writer(PingTopic(s), size);
    if (!w.ok()) return w.status();
    writers[size] = *w;
    all.push_back(*w);
  }
  if (absl::Status st = WaitForPongs(board, 1, std::chrono::seconds(30));
      !st.ok()) {
    return st;
  }
  if (absl::Status st = AwaitMatched(all, true, 1, "the subscriber to match");
      !st.ok()) {
    return st;
  }
  auto send = [&](const Header& h, uint32_t size) {
    return node
        .Write(writers[size], size,
               [&](absl::Span<std::byte> b) {
                 std::memcpy(b.data(), &h, sizeof(h));
               })
        .ok();
  };
  RateSender rates(s, board);
  absl::Status st = rates.Run(send);
  (void)send(Header{kTerminate, 0}, kMinPayload);
  ::usleep(200000);
  return st;
}

absl::Status Subscriber(const Session& s, Board* board) {
  Node node;
  if (absl::Status st = node.Init(s); !st.ok()) return st;
  std::map<dds_attach_t, dds_entity_t> readers;
  std::vector<dds_entity_t> all;
  for (uint32_t size : Sizes(s)) {
    absl::StatusOr<dds_entity_t> r = node.Reader(PingTopic(s), size, size);
    if (!r.ok()) return r.status();
    readers[size] = *r;
    all.push_back(*r);
  }
  if (absl::Status st = AwaitMatched(all, false, 1, "the publisher to match");
      !st.ok()) {
    return st;
  }
  MarkPongReady(board);
  RateCounter counter(board);
  bool done = false;
  while (!done) {
    absl::Status st =
        node.WaitAndTake(readers, [&](dds_attach_t, const Header& h) {
          done |= counter.OnMessage(absl::Span<const std::byte>(
              reinterpret_cast<const std::byte*>(&h), sizeof(h)));
        });
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace
}  // namespace tether::bench

int main(int argc, char** argv) {
  using namespace tether::bench;
  return PingPongMain(argc, argv, "cyclonedds", Ping, Pong, Publisher, Subscriber);
}
