// Typed messages through a channel: build in place + send, then receive +
// read in place, for a ~20-scalar control message and a 1 MiB blob, next to
// a memcpy of the same bytes (what a copying transport pays at least).
//
//   bazel run //benchmarks:transport_benchmark
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "benchmark/benchmark.h"
#include "capnp/message.h"
#include "examples/demo.capnp.h"
#include "tests/transport/framing_test.capnp.h"
#include "transport/channel_handle.h"
#include "transport/config.capnp.h"
#include "transport/schema_registry.h"
#include "transport/typed_endpoints.h"

namespace tether::transport {
namespace {

constexpr size_t kBlob = 1 << 20;

struct Fixture {
  Fixture() {
    options.root = "/dev/shm/tether-bench-transport-" + std::to_string(::getpid());
    options.instance = "bench";
    schemas.Register<JointCommand>();
    schemas.Register<Sample>();
  }
  ~Fixture() {
    std::string cmd = "rm -rf '" + options.root + "'";
    if (std::system(cmd.c_str()) != 0) std::perror("cleanup");
  }
  std::unique_ptr<ChannelHandle> Channel(const std::string& name,
                                         const std::string& type,
                                         uint32_t max_size) {
    capnp::MallocMessageBuilder m;
    auto c = m.initRoot<config::Channel>();
    c.setName(name);
    c.setType(type);
    c.setMaxSize(max_size);
    c.setQueueDepth(16);
    c.setMaxPublishers(1);
    c.setMaxPinned(1);
    auto h = ChannelHandle::Create(options, c.asReader(), schemas);
    if (!h.ok()) std::abort();
    return std::move(*h);
  }
  shm::ChannelOptions options;
  SchemaRegistry schemas;
};

Fixture& F() {
  static Fixture f;
  return f;
}

void FillCommand(JointCommand::Builder c, uint64_t i) {
  c.setCycle(i);
  c.setSampleTimeNs(static_cast<int64_t>(i) * 1000000);
  c.setLeftEffortNm(0.1 * i);
  c.setRightEffortNm(-0.1 * i);
  c.setLeftVelocityTarget(1.0);
  c.setRightVelocityTarget(1.0);
  c.setLeftPositionTarget(2.0);
  c.setRightPositionTarget(2.0);
  c.setKp(10.f);
  c.setKi(1.f);
  c.setKd(0.1f);
  c.setFeedForward(0.5f);
  c.setTrackingErrorX(0.01);
  c.setTrackingErrorY(0.02);
  c.setTrackingErrorHeading(0.03);
  c.setReferenceX(1.0);
  c.setReferenceY(2.0);
  c.setReferenceHeading(0.5);
  c.setSaturated(false);
  c.setEnabled(true);
  c.setMode(JointCommand::Mode::EFFORT);
}

double ReadCommand(JointCommand::Reader c) {
  return c.getLeftEffortNm() + c.getRightEffortNm() + c.getKp() +
         c.getTrackingErrorX() + c.getReferenceHeading() + c.getCycle() +
         (c.getEnabled() ? 1 : 0) + static_cast<int>(c.getMode());
}

void BM_ControlMessageSendReceive(benchmark::State& state) {
  auto ch = F().Channel("/bench/command", "examples/demo.capnp:JointCommand", 512);
  auto pub = Publisher<JointCommand>::Create(ch.get());
  auto sub = Subscriber<JointCommand>::Create(ch.get());
  uint64_t i = 0;
  double sum = 0;
  size_t bytes = 0;
  for (auto _ : state) {
    Loan<JointCommand> loan = (*pub)->MakeLoan();
    FillCommand(loan.root(), i++);
    (void)(*pub)->Send(std::move(loan));
    Message<JointCommand> m;
    if ((*sub)->Next(&m) != ReceiveStatus::kOk) state.SkipWithError("receive");
    sum += ReadCommand(m.root);
    bytes = m.bytes.size();
  }
  benchmark::DoNotOptimize(sum);
  state.counters["message_bytes"] = bytes;
}
BENCHMARK(BM_ControlMessageSendReceive);

// The same bytes copied once (a copying transport's floor for one hop).
void BM_ControlMessageMemcpy(benchmark::State& state) {
  std::vector<char> src(200, 'x'), dst(200);  // ~ the framed size above
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), src.size());
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
}
BENCHMARK(BM_ControlMessageMemcpy);

// A 1 MiB blob: the producer writes it into the loan, sends, and the
// subscriber reads it in place (no copy). `in_place`: through InitBlob, a
// segment of its own written directly in the slot and never zeroed first
// (the zero-copy way to send images and point clouds); else through Cap'n
// Proto's initData, which zeroes the field before the write.
void BlobSendReceive(benchmark::State& state, const std::string& channel,
                     bool in_place) {
  auto ch = F().Channel(channel, "tests/transport/framing_test.capnp:Sample",
                        kBlob + 1024);
  auto pub = Publisher<Sample>::Create(ch.get());
  auto sub = Subscriber<Sample>::Create(ch.get());
  std::vector<uint8_t> image(kBlob, 7);
  uint64_t sum = 0;
  for (auto _ : state) {
    Loan<Sample> loan = (*pub)->MakeLoan();
    void* blob = in_place ? static_cast<void*>(loan.InitBlob("blob", kBlob).data())
                          : static_cast<void*>(loan.root().initBlob(kBlob).begin());
    std::memcpy(blob, image.data(), kBlob);  // the producer's write
    (void)(*pub)->Send(std::move(loan));
    Message<Sample> m;
    if ((*sub)->Next(&m) != ReceiveStatus::kOk) state.SkipWithError("receive");
    capnp::Data::Reader got = m.root.getBlob();
    sum += got[0] + got[kBlob - 1];  // read in place: no copy
  }
  benchmark::DoNotOptimize(sum);
  state.SetBytesProcessed(state.iterations() * kBlob);
}

void BM_BlobSendReceive(benchmark::State& state) {
  BlobSendReceive(state, "/bench/blob", /*in_place=*/false);
}
BENCHMARK(BM_BlobSendReceive);

void BM_BlobInPlaceSendReceive(benchmark::State& state) {
  BlobSendReceive(state, "/bench/blob_in_place", /*in_place=*/true);
}
BENCHMARK(BM_BlobInPlaceSendReceive);

void BM_BlobMemcpy(benchmark::State& state) {
  std::vector<uint8_t> src(kBlob, 7), dst(kBlob);
  for (auto _ : state) {
    std::memcpy(dst.data(), src.data(), kBlob);
    benchmark::DoNotOptimize(dst.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * kBlob);
}
BENCHMARK(BM_BlobMemcpy);

}  // namespace
}  // namespace tether::transport

BENCHMARK_MAIN();
